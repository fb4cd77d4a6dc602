// Exercise 3.2 — decode attention, one block per (query head, sequence): the solution with a
// student's bug (tests/grading/grade_bugs.py): q's load loop runs to c <= head_dim, so the last
// block reads one float past the end of q's cudaMalloc buffer (memcheck). The other blocks read
// the next row's first element into scores[0], which the scores loop overwrites: only the
// checker sees the bug. See
// exercises/03-kv-cache-decode/ch03.h.
#include <algorithm>
#include <cmath>
#include <string>

#include "03-kv-cache-decode/ch03.h"
#include "03-kv-cache-decode/device_lengths.cuh"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxWarps = 1024 / kWarpSize;          // a block holds at most 1024 threads
constexpr int64_t kMaxSharedFloats = 48 * 1024 / 4;  // the default dynamic shared memory limit: 48 KiB

// The max (kMax) or the sum of @p value over the 32 lanes of the calling warp; every lane gets
// the result. Every lane of the warp must call it (the mask is 0xffffffff).
template <bool kMax>
__device__ float warp_reduce(float value) {
  // Butterfly: after the step with offset o, every lane holds the result over its group of
  // 2·o lanes; after offset 1 that group is the whole warp.
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = kMax ? fmaxf(value, other) : value + other;
  }
  return value;
}

// The max (kMax) or the sum of @p value over the whole block; every thread gets the result.
// @p slots: shared memory for one float per warp. Every thread of the block must call it.
template <bool kMax>
__device__ float block_reduce(float value, float* slots) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  value = warp_reduce<kMax>(value);
  if (lane == 0) slots[warp] = value;
  __syncthreads();  // every warp's result is in slots before any thread reads them
  value = warp_reduce<kMax>(lane < warps ? slots[lane] : (kMax ? -INFINITY : 0.0f));
  __syncthreads();  // every thread has read slots before the next reduction overwrites them
  return value;
}

// out[b][h] = softmax(q[b][h] · K[b][g]ᵀ · scale) · V[b][g] over the lengths[b] cached tokens,
// g = h / group_size, for block (h, b). q, out [batch][num_heads][head_dim]; caches
// [batch][num_heads / group_size][max_seq_len][head_dim]. Dynamic shared memory: q_scaled
// [head_dim], then scores [max_length].
__global__ void decode_kernel(const float* q, const float* k_cache, const float* v_cache, const int* lengths,
                              float* out, int num_heads, int group_size, int max_seq_len, int head_dim, float scale) {
  SIMT_DYNAMIC_SHARED(float, shared);
  float* q_scaled = shared;           // [head_dim]: q[b][h] · scale
  float* scores = shared + head_dim;  // [max_length]: scores, then exp(score − max)
  __shared__ float slots[kMaxWarps];  // block_reduce's scratch: one float per warp
  const int h = blockIdx.x, b = blockIdx.y;
  const int g = h / group_size, num_kv_heads = num_heads / group_size;
  const int L = lengths[b];  // the same for the whole block: every loop bound below is uniform
  const size_t row = (size_t(b) * num_heads + h) * head_dim;
  const float* K = k_cache + (size_t(b) * num_kv_heads + g) * size_t(max_seq_len) * head_dim;
  const float* V = v_cache + (size_t(b) * num_kv_heads + g) * size_t(max_seq_len) * head_dim;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int warps = blockDim.x / kWarpSize;

  for (int c = threadIdx.x; c <= head_dim; c += blockDim.x) q_scaled[c] = q[row + c] * scale;  // BUG(off-by-one-load)
  __syncthreads();  // q_scaled is complete before any warp reads it

  // Scores: one warp per key, its lanes splitting the dot product. The loop bound depends on
  // the warp only, so all 32 lanes take part in every shuffle.
  for (int j = warp; j < L; j += warps) {
    float dot = 0.0f;
    for (int c = lane; c < head_dim; c += kWarpSize) dot += q_scaled[c] * K[size_t(j) * head_dim + c];
    dot = warp_reduce<false>(dot);
    if (lane == 0) scores[j] = dot;
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

  // Output: one thread per dimension; for each key j the threads read consecutive elements of V[j].
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < L; ++j) acc += scores[j] * V[size_t(j) * head_dim + c];
    out[row + c] = acc * inv_sum;
  }
}

}  // namespace

void decode_attention(const Tensor<float>& q, const Tensor<float>& k_cache, const Tensor<float>& v_cache,
                      const std::vector<int32_t>& lengths, Tensor<float>& out, int threads_per_block) {
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
  require(num_heads % num_kv_heads == 0, "num_heads", num_heads,
          "must be a multiple of num_kv_heads = " + std::to_string(num_kv_heads));
  const int64_t max_length = checked_max_length(lengths, batch, max_seq_len);
  require(head_dim + max_length <= kMaxSharedFloats, "head_dim + max(lengths)", head_dim + max_length,
          "must be ≤ " + std::to_string(kMaxSharedFloats) + " (q and the scores live in 48 KiB of shared memory)");
  check_shape(out, q.shape(), "out");
  require(threads_per_block >= 32 && threads_per_block <= 1024 && threads_per_block % 32 == 0, "threads_per_block",
          threads_per_block, "must be a multiple of 32 from 32 to 1024");

  const DeviceBuffer<float> d_q(q), d_k_cache(k_cache), d_v_cache(v_cache);
  auto d_out = DeviceBuffer<float>::poisoned(out.size());
  const DeviceBuffer<int> d_lengths = upload_lengths(lengths);
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const size_t shared_bytes = size_t(head_dim + max_length) * sizeof(float);
  check_cuda(simt::launch(decode_kernel, dim3(unsigned(num_heads), unsigned(batch)), dim3(unsigned(threads_per_block)),
                          shared_bytes, nullptr, static_cast<const float*>(d_q.data()),
                          static_cast<const float*>(d_k_cache.data()), static_cast<const float*>(d_v_cache.data()),
                          d_lengths.data(), d_out.data(), int(num_heads), int(num_heads / num_kv_heads),
                          int(max_seq_len), int(head_dim), scale),
             "decode_kernel");
  check_cuda(cudaDeviceSynchronize(), "decode_kernel");
  d_out.download(out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
