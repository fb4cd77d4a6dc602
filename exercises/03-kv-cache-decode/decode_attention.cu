// Exercise 3.2 — decode attention, one block per (query head, sequence). See ch03.h for the task.
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
  // TODO(student): five __shfl_xor_sync(0xffffffff, value, offset) steps, offset 16, 8, 4, 2, 1,
  // each combining value with the other lane's (fmaxf or +) — as in exercise 2.2. (roughly 4 lines)
  return value;
}

// The max (kMax) or the sum of @p value over the whole block; every thread gets the result.
// @p slots: shared memory for one float per warp. Every thread of the block must call it.
template <bool kMax>
__device__ float block_reduce(float value, float* slots) {
  // TODO(student): as in exercise 2.2: reduce within the warp; lane 0 writes the warp's result
  // to slots[warp]; __syncthreads(); every warp reduces slots[0..warps-1] (a lane past the
  // number of warps contributes -INFINITY for a max, 0 for a sum); __syncthreads() again so
  // that the next call cannot overwrite slots still being read. (roughly 8 lines)
  return value;
}

// out[b][h] = softmax(q[b][h] · K[b][g]ᵀ · scale) · V[b][g] over the lengths[b] cached tokens,
// g = h / group_size, for block (h, b). q, out [batch][num_heads][head_dim]; caches
// [batch][num_heads / group_size][max_seq_len][head_dim]. Dynamic shared memory: q_scaled
// [head_dim], then scores [max_length].
__global__ void decode_kernel(const float* q, const float* k_cache, const float* v_cache, const int* lengths,
                              float* out, int num_heads, int group_size, int max_seq_len, int head_dim, float scale) {
  SIMT_DYNAMIC_SHARED(float, shared);
  [[maybe_unused]] float* q_scaled = shared;           // [head_dim]: q[b][h] · scale
  [[maybe_unused]] float* scores = shared + head_dim;  // [max_length]: scores, then exp(score − max)
  [[maybe_unused]] __shared__ float slots[kMaxWarps];  // block_reduce's scratch: one float per warp
  // TODO(student): h = blockIdx.x, b = blockIdx.y, g = h / group_size, L = lengths[b]; the
  // offsets of row (b, h) of q and out and of KV head g of sequence b in the caches. Then:
  //   1. q_scaled[c] = q[b][h][c] * scale (threads striding through c); __syncthreads();
  //   2. warp w computes the scores of keys j = w, w + warps, … < L: each lane adds
  //      q_scaled[c] * K[j][c] for c = lane, lane + 32, … < head_dim, warp_reduce<false>, lane 0
  //      writes scores[j]; __syncthreads();
  //   3. the max of scores[0..L-1] (block_reduce<true>); scores[j] = expf(scores[j] - max) in
  //      place and the sum of them (block_reduce<false>; its first barrier also makes the
  //      exponentials visible to every thread);
  //   4. thread c (striding) writes out[b][h][c] = Σ_j scores[j] * V[j][c] / sum.
  // Never read a key or value at or past L. (roughly 25 lines)
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

  throw NotImplemented("decode_attention");  // TODO(student): delete this line once decode_kernel is written

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
