// Chapter-02 CUDA fixtures: the exercises' kernels written right once and wrong in the ways
// students get them wrong (see wrong_ch02_kernels.h). tests/wrong/wrong_ch02_gpu.cpp runs them
// through the checks that grade the exercises and expects every mistake to be rejected.
#include "tests/wrong/kernels/wrong_ch02_kernels.h"

#include <algorithm>
#include <cmath>

#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch02 {

namespace {

constexpr int kTile = 16;
constexpr unsigned kFullMask = 0xffffffffu;

// ---- scores ----------------------------------------------------------------------------------

template <ScoresFixture kFixture>
__global__ void scores_fixture(const float* q, const float* k, float* scores, int seq_len, int head_dim,
                               int num_kv_heads, int group_size, float scale, bool causal) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y, h = blockIdx.z;
  if (i >= seq_len || j >= seq_len) return;
  const int g = kFixture == ScoresFixture::gqa_modulo ? h % num_kv_heads : h / group_size;
  const bool masked = causal && (kFixture == ScoresFixture::mask_diagonal ? j >= i : j > i);
  float dot = 0.0f;
  for (int c = 0; c < head_dim; ++c)
    dot += q[(size_t(h) * seq_len + i) * head_dim + c] * k[(size_t(g) * seq_len + j) * head_dim + c];
  scores[(size_t(h) * seq_len + i) * seq_len + j] = masked ? -INFINITY : dot * scale;
}

// ---- softmax ---------------------------------------------------------------------------------

template <SoftmaxFixture kFixture, bool kMax>
__device__ float warp_reduce(float value) {
  const int first_offset = kFixture == SoftmaxFixture::offsets_from_8 ? 8 : 16;
  for (int offset = first_offset; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, value, offset);
    value = kMax ? fmaxf(value, other) : value + other;
  }
  return value;
}

template <SoftmaxFixture kFixture, bool kMax>
__device__ float block_reduce(float value, float* slots) {
  value = warp_reduce<kFixture, kMax>(value);
  if (kFixture == SoftmaxFixture::no_cross_warp) return value;  // the mistake: the warp's result only
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) slots[warp] = value;
  __syncthreads();
  value = warp_reduce<kFixture, kMax>(lane < warps ? slots[lane] : (kMax ? -INFINITY : 0.0f));
  __syncthreads();
  return value;
}

template <SoftmaxFixture kFixture>
__global__ void softmax_fixture(const float* scores, float* probs, int row_len) {
  __shared__ float slots[32];
  const float* s = scores + size_t(blockIdx.x) * row_len;
  float* p = probs + size_t(blockIdx.x) * row_len;
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < row_len; j += blockDim.x) local_max = fmaxf(local_max, s[j]);
  const float row_max = block_reduce<kFixture, true>(local_max, slots);
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < row_len; j += blockDim.x) local_sum += expf(s[j] - row_max);
  const float inv_sum = 1.0f / block_reduce<kFixture, false>(local_sum, slots);
  for (int j = threadIdx.x; j < row_len; j += blockDim.x) p[j] = expf(s[j] - row_max) * inv_sum;
}

// ---- GEMM: one kernel per mistake, so that the race report names the mistake ------------------

// The right one (the exercise's solution), with the K-step count switchable for k_tiles_floor.
template <bool kFloorSteps>
__global__ void gemm_tiled(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float a_tile[kTile][kTile];
  __shared__ float b_tile[kTile][kTile];
  const int x = threadIdx.x, y = threadIdx.y, row = blockIdx.y * kTile + y, col = blockIdx.x * kTile + x;
  const int steps = kFloorSteps ? k / kTile : (k + kTile - 1) / kTile;
  float sum = 0.0f;
  for (int step = 0; step < steps; ++step) {
    const int k0 = step * kTile;
    a_tile[y][x] = (row < m && k0 + x < k) ? a[size_t(row) * k + k0 + x] : 0.0f;
    b_tile[y][x] = (k0 + y < k && col < n) ? b[size_t(k0 + y) * n + col] : 0.0f;
    __syncthreads();
    for (int t = 0; t < kTile; ++t) sum += a_tile[y][t] * b_tile[t][x];
    __syncthreads();
  }
  if (row < m && col < n) c[size_t(row) * n + col] = sum;
}

__global__ void gemm_missing_load_barrier(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float a_tile[kTile][kTile];
  __shared__ float b_tile[kTile][kTile];
  const int x = threadIdx.x, y = threadIdx.y, row = blockIdx.y * kTile + y, col = blockIdx.x * kTile + x;
  float sum = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    a_tile[y][x] = (row < m && k0 + x < k) ? a[size_t(row) * k + k0 + x] : 0.0f;
    b_tile[y][x] = (k0 + y < k && col < n) ? b[size_t(k0 + y) * n + col] : 0.0f;
    // MISSING: __syncthreads() — the tiles are read before the other threads have filled them.
    for (int t = 0; t < kTile; ++t) sum += a_tile[y][t] * b_tile[t][x];
    __syncthreads();
  }
  if (row < m && col < n) c[size_t(row) * n + col] = sum;
}

__global__ void gemm_missing_reuse_barrier(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float a_tile[kTile][kTile];
  __shared__ float b_tile[kTile][kTile];
  const int x = threadIdx.x, y = threadIdx.y, row = blockIdx.y * kTile + y, col = blockIdx.x * kTile + x;
  float sum = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    a_tile[y][x] = (row < m && k0 + x < k) ? a[size_t(row) * k + k0 + x] : 0.0f;
    b_tile[y][x] = (k0 + y < k && col < n) ? b[size_t(k0 + y) * n + col] : 0.0f;
    __syncthreads();
    for (int t = 0; t < kTile; ++t) sum += a_tile[y][t] * b_tile[t][x];
    // MISSING: __syncthreads() — a fast thread overwrites the tiles while slower ones still read.
  }
  if (row < m && col < n) c[size_t(row) * n + col] = sum;
}

__global__ void gemm_barrier_in_branch(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float a_tile[kTile][kTile];
  __shared__ float b_tile[kTile][kTile];
  const int x = threadIdx.x, y = threadIdx.y, row = blockIdx.y * kTile + y, col = blockIdx.x * kTile + x;
  if (row < m && col < n) {  // WRONG: the threads outside C never reach the barriers below
    float sum = 0.0f;
    for (int k0 = 0; k0 < k; k0 += kTile) {
      a_tile[y][x] = k0 + x < k ? a[size_t(row) * k + k0 + x] : 0.0f;
      b_tile[y][x] = k0 + y < k ? b[size_t(k0 + y) * n + col] : 0.0f;
      __syncthreads();
      for (int t = 0; t < kTile; ++t) sum += a_tile[y][t] * b_tile[t][x];
      __syncthreads();
    }
    c[size_t(row) * n + col] = sum;
  }
}

}  // namespace

void scores(ScoresFixture fixture, const Tensor<float>& q, const Tensor<float>& k, bool causal, Tensor<float>& scores) {
  const int H = int(q.dim(0)), L = int(q.dim(1)), d = int(q.dim(2)), kv_heads = int(k.dim(0));
  DeviceBuffer<float> d_q(size_t(q.size())), d_k(size_t(k.size())), d_s(size_t(scores.size()));
  d_q.upload(q.data());
  d_k.upload(k.data());
  d_s.poison();
  void (*kernel)(const float*, const float*, float*, int, int, int, int, float, bool) =
      fixture == ScoresFixture::gqa_modulo      ? scores_fixture<ScoresFixture::gqa_modulo>
      : fixture == ScoresFixture::mask_diagonal ? scores_fixture<ScoresFixture::mask_diagonal>
                                                : scores_fixture<ScoresFixture::correct>;
  check_cuda(simt::launch(kernel, dim3(blocks_for(L, kTile), blocks_for(L, kTile), H), dim3(kTile, kTile), 0, nullptr,
                          static_cast<const float*>(d_q.data()), static_cast<const float*>(d_k.data()), d_s.data(), L,
                          d, kv_heads, H / kv_heads, 1.0f / std::sqrt(float(d)), causal),
             "scores_fixture");
  check_cuda(cudaDeviceSynchronize(), "scores_fixture");
  d_s.download(scores.data());
}

void softmax(SoftmaxFixture fixture, const Tensor<float>& scores, Tensor<float>& probs, int threads_per_block) {
  const int rows = int(scores.dim(0)), row_len = int(scores.dim(1));
  DeviceBuffer<float> d_s(size_t(scores.size())), d_p(size_t(probs.size()));
  d_s.upload(scores.data());
  d_p.poison();
  void (*kernel)(const float*, float*, int) =
      fixture == SoftmaxFixture::offsets_from_8  ? softmax_fixture<SoftmaxFixture::offsets_from_8>
      : fixture == SoftmaxFixture::no_cross_warp ? softmax_fixture<SoftmaxFixture::no_cross_warp>
                                                 : softmax_fixture<SoftmaxFixture::correct>;
  check_cuda(simt::launch(kernel, dim3(rows), dim3(threads_per_block), 0, nullptr,
                          static_cast<const float*>(d_s.data()), d_p.data(), row_len),
             "softmax_fixture");
  check_cuda(cudaDeviceSynchronize(), "softmax_fixture");
  d_p.download(probs.data());
}

void gemm(GemmFixture fixture, const Tensor<float>& a, const Tensor<float>& b, Tensor<float>& c) {
  const int m = int(a.dim(0)), k = int(a.dim(1)), n = int(b.dim(1));
  DeviceBuffer<float> d_a(size_t(a.size())), d_b(size_t(b.size())), d_c(size_t(c.size()));
  d_a.upload(a.data());
  d_b.upload(b.data());
  d_c.poison();
  void (*kernel)(const float*, const float*, float*, int, int, int) = gemm_tiled<false>;
  dim3 grid(blocks_for(n, kTile), blocks_for(m, kTile));
  switch (fixture) {
    case GemmFixture::correct:
      break;
    case GemmFixture::missing_load_barrier:
      kernel = gemm_missing_load_barrier;
      break;
    case GemmFixture::missing_reuse_barrier:
      kernel = gemm_missing_reuse_barrier;
      break;
    case GemmFixture::k_tiles_floor:
      kernel = gemm_tiled<true>;
      break;
    case GemmFixture::grid_floor:
      grid = dim3(std::max(1, n / kTile), std::max(1, m / kTile));
      break;
    case GemmFixture::barrier_in_branch:
      kernel = gemm_barrier_in_branch;
      break;
  }
  check_cuda(simt::launch(kernel, grid, dim3(kTile, kTile), 0, nullptr, static_cast<const float*>(d_a.data()),
                          static_cast<const float*>(d_b.data()), d_c.data(), m, n, k),
             "gemm fixture");
  check_cuda(cudaDeviceSynchronize(), "gemm fixture");
  d_c.download(c.data());
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch02
