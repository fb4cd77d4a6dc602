// Exercise 4.2 — the INT8 decode inner loops. See ch04.h for the task: write int8_key_score and
// int8_value_sum; the kernel that calls them and its launcher are given.
#include <algorithm>
#include <cmath>
#include <string>

#include "04-int8-kv-cache/ch04.h"
#include "03-kv-cache-decode/device_lengths.cuh"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxWarps = 1024 / kWarpSize;          // a block holds at most 1024 threads
constexpr int64_t kMaxSharedFloats = 48 * 1024 / 4;  // the default dynamic shared memory limit: 48 KiB

// The sum of @p value over the 32 lanes of the calling warp; every lane gets it. Every lane of
// the warp must call it.
[[maybe_unused]] __device__ float warp_sum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// The max (kMax) or the sum of @p value over the whole block; every thread gets the result.
// @p slots: shared memory for one float per warp. Every thread of the block must call it.
template <bool kMax>
__device__ float block_reduce(float value, float* slots) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, warps = blockDim.x / kWarpSize;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = kMax ? fmaxf(value, other) : value + other;
  }
  if (lane == 0) slots[warp] = value;
  __syncthreads();  // every warp's result is in slots before any thread reads them
  value = lane < warps ? slots[lane] : (kMax ? -INFINITY : 0.0f);
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = kMax ? fmaxf(value, other) : value + other;
  }
  __syncthreads();  // every thread has read slots before the next reduction overwrites them
  return value;
}

// Exercise 4.2a: k_scale · Σ_c q_scaled[c] · k_row[c], on every lane of the calling warp.
__device__ float int8_key_score(const float* q_scaled, const int8_t* k_row, float k_scale, int head_dim, int lane) {
  // TODO(student): lane's partial sum of q_scaled[c] * float(k_row[c]) over c = lane, lane + 32,
  // … < head_dim; warp_sum() of it (every lane calls it); times k_scale, once. (roughly 4 lines)
  return 0.0f;
}

// Exercise 4.2b: Σ_{j < length} p[j] · v_scales[j] · v_rows[j·head_dim + c].
__device__ float int8_value_sum(const float* p, const int8_t* v_rows, const float* v_scales, int length, int head_dim,
                                int c) {
  // TODO(student): for j = 0 … length − 1: acc += (p[j] * v_scales[j]) * float(v_rows[j * head_dim + c]).
  // Never read a row at or past length. (roughly 3 lines)
  return 0.0f;
}

// Given: out[b][h] = softmax(q[b][h] · K̂[b][g]ᵀ · scale) · V̂[b][g] over the lengths[b] cached
// tokens, g = h / group_size, for block (h, b). Dynamic shared memory: q_scaled [head_dim], then
// scores [max_length].
__global__ void decode_int8_kernel(const float* q, const int8_t* k_cache, const int8_t* v_cache, const float* k_scales,
                                   const float* v_scales, const int* lengths, float* out, int num_heads,
                                   int group_size, int max_seq_len, int head_dim, float scale) {
  SIMT_DYNAMIC_SHARED(float, shared);
  float* q_scaled = shared;           // [head_dim]: q[b][h] · scale
  float* scores = shared + head_dim;  // [max_length]: scores, then exp(score − max)
  __shared__ float slots[kMaxWarps];  // block_reduce's scratch: one float per warp
  const int h = blockIdx.x, b = blockIdx.y;
  const int g = h / group_size, num_kv_heads = num_heads / group_size;
  const int L = lengths[b];
  const size_t row = (size_t(b) * num_heads + h) * head_dim;
  const size_t head = size_t(b) * num_kv_heads + g;  // (sequence, KV head): its rows and scales
  const int8_t* K = k_cache + head * size_t(max_seq_len) * head_dim;
  const int8_t* V = v_cache + head * size_t(max_seq_len) * head_dim;
  const float* k_scale = k_scales + head * size_t(max_seq_len);
  const float* v_scale = v_scales + head * size_t(max_seq_len);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, warps = blockDim.x / kWarpSize;

  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) q_scaled[c] = q[row + c] * scale;
  __syncthreads();  // q_scaled is complete before any warp reads it

  for (int j = warp; j < L; j += warps) {  // one key per warp; warp-uniform bound
    const float score = int8_key_score(q_scaled, K + size_t(j) * head_dim, k_scale[j], head_dim, lane);
    if (lane == 0) scores[j] = score;
  }
  __syncthreads();  // every score is in shared memory before the softmax reads them

  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < L; j += blockDim.x) local_max = fmaxf(local_max, scores[j]);
  const float max_score = block_reduce<true>(local_max, slots);
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < L; j += blockDim.x) {
    scores[j] = expf(scores[j] - max_score);
    local_sum += scores[j];
  }
  // block_reduce's first barrier also publishes the exponentials written just above.
  const float inv_sum = 1.0f / block_reduce<false>(local_sum, slots);

  for (int c = threadIdx.x; c < head_dim; c += blockDim.x)
    out[row + c] = int8_value_sum(scores, V, v_scale, L, head_dim, c) * inv_sum;
}

}  // namespace

void decode_int8(const Tensor<float>& q, const Tensor<int8_t>& k_cache, const Tensor<int8_t>& v_cache,
                 const Tensor<float>& k_scales, const Tensor<float>& v_scales, const std::vector<int32_t>& lengths,
                 Tensor<float>& out, int threads_per_block) {
  check_rank(q, 3, "q");
  check_rank(k_cache, 4, "k_cache");
  const int64_t batch = q.dim(0), num_heads = q.dim(1), head_dim = q.dim(2);
  const int64_t num_kv_heads = k_cache.dim(1), max_seq_len = k_cache.dim(2);
  require(batch > 0 && num_heads > 0 && head_dim > 0, "q.shape", to_string(q.shape()),
          "must be [batch, num_heads, head_dim], every size ≥ 1");
  require(batch <= 65535, "batch", batch, "must be ≤ 65535 (grid.y)");
  require(k_cache.dim(0) == batch && k_cache.dim(3) == head_dim && num_kv_heads > 0 && max_seq_len > 0, "k_cache.shape",
          to_string(k_cache.shape()),
          "must be [batch = " + std::to_string(batch) +
              ", num_kv_heads, max_seq_len, head_dim = " + std::to_string(head_dim) + "] to match q");
  check_shape(v_cache, k_cache.shape(), "v_cache");
  check_shape(k_scales, Shape{batch, num_kv_heads, max_seq_len}, "k_scales");
  check_shape(v_scales, Shape{batch, num_kv_heads, max_seq_len}, "v_scales");
  require(num_heads % num_kv_heads == 0, "num_heads", num_heads,
          "must be a multiple of num_kv_heads = " + std::to_string(num_kv_heads));
  const int64_t max_length = checked_max_length(lengths, batch, max_seq_len);
  require(head_dim + max_length <= kMaxSharedFloats, "head_dim + max(lengths)", head_dim + max_length,
          "must be ≤ " + std::to_string(kMaxSharedFloats) + " (q and the scores live in 48 KiB of shared memory)");
  check_shape(out, q.shape(), "out");
  require(threads_per_block >= 32 && threads_per_block <= 1024 && threads_per_block % 32 == 0, "threads_per_block",
          threads_per_block, "must be a multiple of 32 from 32 to 1024");

  throw NotImplemented("decode_int8");  // TODO(student): delete this line once the two device functions are written

  const DeviceBuffer<float> d_q(q), d_k_scales(k_scales), d_v_scales(v_scales);
  auto d_out = DeviceBuffer<float>::poisoned(out.size());
  const DeviceBuffer<int8_t> d_k_cache(k_cache), d_v_cache(v_cache);
  const DeviceBuffer<int> d_lengths = upload_lengths(lengths);
  const size_t shared_bytes = size_t(head_dim + max_length) * sizeof(float);
  check_cuda(simt::launch(decode_int8_kernel, dim3(unsigned(num_heads), unsigned(batch)),
                          dim3(unsigned(threads_per_block)), shared_bytes, nullptr,
                          static_cast<const float*>(d_q.data()), d_k_cache.data(), d_v_cache.data(),
                          static_cast<const float*>(d_k_scales.data()), static_cast<const float*>(d_v_scales.data()),
                          d_lengths.data(), d_out.data(), int(num_heads), int(num_heads / num_kv_heads),
                          int(max_seq_len), int(head_dim), 1.0f / std::sqrt(float(head_dim))),
             "decode_int8_kernel");
  check_cuda(cudaDeviceSynchronize(), "decode_int8_kernel");
  d_out.download(out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
