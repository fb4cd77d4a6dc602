#pragma once
// Row softmax with warp shuffles and a block reduction — used by cuda/tiled and cuda/cublas —
// and the in-place softmax numerators of the decode kernels (block_softmax_numerators).
//
// Launch: grid = number of rows, block = kSoftmaxThreads (a multiple of 32). Each thread walks
// the row with stride blockDim.x, so any row length works. Two reductions per row (max, then
// sum): inside a warp with __shfl_xor_sync (no shared memory, no barrier), then across warps
// through one shared slot per warp.
#include <cmath>

#include "simt/simt.h"

namespace inferlab::INFERLAB_BACKEND_NS {

constexpr int kSoftmaxThreads = 128;

// Writes a probability as the output element type.
__device__ inline void store_probability(float* at, float p) { *at = p; }
__device__ inline void store_probability(__half* at, float p) { *at = __float2half(p); }
__device__ inline void store_probability(__nv_bfloat16* at, float p) { *at = __float2bfloat16(p); }

// The max (kMax) or sum of @p value over the whole block; every thread gets the result.
// @p slots is shared memory for one float per warp.
template <bool kMax>
__device__ inline float block_reduce(float value, float* slots) {
  const unsigned full = 0xffffffffu;
  // 1. Within each warp: butterfly exchange, after which every lane holds the warp's result.
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(full, value, offset);
    value = kMax ? fmaxf(value, other) : value + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) slots[warp] = value;
  __syncthreads();  // every warp's partial result is in shared memory before anyone reads it
  value = lane < warps ? slots[lane] : (kMax ? -INFINITY : 0.0f);
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(full, value, offset);
    value = kMax ? fmaxf(value, other) : value + other;
  }
  __syncthreads();  // all reads of slots are done before the next reduction overwrites them
  return value;
}

// The max and the sum of one block_softmax_numerators() call.
struct SoftmaxStats {
  float max;  // m = max_j s_j
  float sum;  // l = Σ_j exp(s_j − m)
};

// The softmax numerators of the @p n scores at @p scores (shared memory), in place:
// scores[j] ← exp(s_j − m) with m = max_j s_j; returns m and l = Σ_j exp(s_j − m) on every
// thread. Every thread of the block calls it (block_reduce's barriers); the sum's first barrier
// also publishes the numerators written here. Used by the decode kernels (one row per block).
__device__ inline SoftmaxStats block_softmax_numerators(float* scores, int n, float* slots) {
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < n; j += blockDim.x) local_max = fmaxf(local_max, scores[j]);
  const float max_score = block_reduce<true>(local_max, slots);
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float p = __expf(scores[j] - max_score);
    scores[j] = p;
    local_sum += p;
  }
  return {max_score, block_reduce<false>(local_sum, slots)};
}

// probs[row][j] = softmax(scores[row][:])_j. Row r is query (r mod query_len); with @p causal
// its keys after the query are masked (probability 0) whatever scores holds there.
template <class Out>
__global__ void softmax_rows_warp(const float* scores, Out* probs, int row_len, int query_len, bool causal) {
  __shared__ float slots[32];
  const size_t row = blockIdx.x;
  const int query = int(row % size_t(query_len));
  const int visible = causal ? query + 1 : row_len;  // keys 0..visible-1 take part
  const float* s = scores + row * size_t(row_len);
  Out* p = probs + row * size_t(row_len);

  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < visible; j += blockDim.x) local_max = fmaxf(local_max, s[j]);
  const float row_max = block_reduce<true>(local_max, slots);

  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < visible; j += blockDim.x) local_sum += __expf(s[j] - row_max);
  const float inv_sum = 1.0f / block_reduce<false>(local_sum, slots);

  for (int j = threadIdx.x; j < row_len; j += blockDim.x)
    store_probability(p + j, j < visible ? __expf(s[j] - row_max) * inv_sum : 0.0f);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
