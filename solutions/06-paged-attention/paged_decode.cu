// Exercise 6.3 — paged decode attention: chapter 03's decode kernel with every K and V row found
// through the block table. A straightforward answer (the lab's cuda/decode reads both layouts
// through one Rows<Layout> template and adds vector loads). See
// exercises/06-paged-attention/ch06.h.
#include <algorithm>
#include <cmath>
#include <string>

#include "06-paged-attention/ch06.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxWarps = 1024 / kWarpSize;          // a block holds at most 1024 threads
constexpr int64_t kMaxSharedFloats = 48 * 1024 / 4;  // the default dynamic shared memory limit: 48 KiB

// ---- given: the reductions of exercise 3.2 ----

// The max (kMax) or the sum of @p value over the 32 lanes of the calling warp; every lane gets
// the result. Every lane of the warp must call it (the mask is 0xffffffff).
template <bool kMax>
__device__ float warp_reduce(float value) {
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

// ---- the exercise ----

// The flat index of element 0 of token @p j's row of KV head @p g of sequence @p b in a pool
// [num_blocks][num_kv_heads][block_size][head_dim]: its logical block j / block_size is physical
// block p = block_table[b][j / block_size], and within p the row of (g, j % block_size).
__device__ size_t paged_row_offset(const int* block_table, int b, int g, int j, int max_blocks_per_seq,
                                   int num_kv_heads, int block_size, int head_dim) {
  const size_t p = size_t(block_table[size_t(b) * max_blocks_per_seq + j / block_size]);
  // size_t throughout: p · num_kv_heads · block_size · head_dim overflows int in a large pool.
  return ((p * num_kv_heads + g) * block_size + size_t(j % block_size)) * head_dim;
}

// out[b][h] = softmax(q[b][h] · K[b][g]ᵀ · scale) · V[b][g] over the lengths[b] cached tokens of
// sequence b, g = h / group_size, for block (h, b); K and V rows found through the block table.
// q, out [batch][num_heads][head_dim]; pools [num_blocks][num_heads / group_size][block_size]
// [head_dim]; block_table [batch][max_blocks_per_seq]. Dynamic shared memory: q_scaled
// [head_dim], then scores [max_length].
__global__ void paged_decode_kernel(const float* q, const float* k_pool, const float* v_pool, const int* block_table,
                                    const int* lengths, float* out, int num_heads, int group_size,
                                    int max_blocks_per_seq, int block_size, int head_dim, float scale) {
  SIMT_DYNAMIC_SHARED(float, shared);
  float* q_scaled = shared;           // [head_dim]: q[b][h] · scale
  float* scores = shared + head_dim;  // [max_length]: scores, then exp(score − max)
  __shared__ float slots[kMaxWarps];  // block_reduce's scratch: one float per warp
  const int h = blockIdx.x, b = blockIdx.y;
  const int g = h / group_size, num_kv_heads = num_heads / group_size;
  const int L = lengths[b];  // the same for the whole block: every loop bound below is uniform
  const size_t row = (size_t(b) * num_heads + h) * head_dim;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int warps = blockDim.x / kWarpSize;

  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) q_scaled[c] = q[row + c] * scale;
  __syncthreads();  // q_scaled is complete before any warp reads it

  // Scores: one warp per key, its lanes splitting the dot product. Key j's row is wherever the
  // block table put it: logical neighbours may be far apart in the pool.
  for (int j = warp; j < L; j += warps) {
    const float* K =
        k_pool + paged_row_offset(block_table, b, g, j, max_blocks_per_seq, num_kv_heads, block_size, head_dim);
    float dot = 0.0f;
    for (int c = lane; c < head_dim; c += kWarpSize) dot += q_scaled[c] * K[c];
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

  // Output: one thread per dimension; for each key j the threads read consecutive elements of
  // its V row, found through the block table.
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < L; ++j) {
      const float* V =
          v_pool + paged_row_offset(block_table, b, g, j, max_blocks_per_seq, num_kv_heads, block_size, head_dim);
      acc += scores[j] * V[c];
    }
    out[row + c] = acc * inv_sum;
  }
}

// ---- given: device copies of int32 host arrays ----

// A device copy of @p values, as the kernel reads them (int).
DeviceBuffer<int> upload_ints(const std::vector<int32_t>& values) {
  static_assert(sizeof(int) == sizeof(int32_t), "the kernel reads int32 arrays as int");
  DeviceBuffer<int> device(values.size());
  device.upload(reinterpret_cast<const int*>(values.data()));
  return device;
}

}  // namespace

void paged_decode_attention(const Tensor<float>& q, const Tensor<float>& k_pool, const Tensor<float>& v_pool,
                            const std::vector<int32_t>& block_table, int64_t max_blocks_per_seq,
                            const std::vector<int32_t>& lengths, Tensor<float>& out, int threads_per_block) {
  check_rank(q, 3, "q");
  check_rank(k_pool, 4, "k_pool");
  const int64_t batch = q.dim(0), num_heads = q.dim(1), head_dim = q.dim(2);
  const int64_t num_blocks = k_pool.dim(0), num_kv_heads = k_pool.dim(1), block_size = k_pool.dim(2);
  require(batch > 0 && num_heads > 0 && head_dim > 0, "q.shape", to_string(q.shape()),
          "must be [batch, num_heads, head_dim], every size ≥ 1");
  require(batch <= 65535, "batch", batch, "must be ≤ 65535 (grid.y)");
  require(num_blocks > 0 && num_kv_heads > 0 && block_size > 0 && k_pool.dim(3) == head_dim, "k_pool.shape",
          to_string(k_pool.shape()),
          "must be [num_blocks, num_kv_heads, block_size, head_dim = " + std::to_string(head_dim) + "] to match q");
  check_shape(v_pool, k_pool.shape(), "v_pool");
  require(num_heads % num_kv_heads == 0, "num_heads", num_heads,
          "must be a multiple of num_kv_heads = " + std::to_string(num_kv_heads));
  require(max_blocks_per_seq > 0, "max_blocks_per_seq", max_blocks_per_seq, "must be ≥ 1");
  require(int64_t(block_table.size()) == batch * max_blocks_per_seq, "block_table.size()", block_table.size(),
          "must be batch · max_blocks_per_seq = " + std::to_string(batch * max_blocks_per_seq));
  require(int64_t(lengths.size()) == batch, "lengths.size()", lengths.size(),
          "must equal batch = " + std::to_string(batch));
  int64_t max_length = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t L = lengths[size_t(b)];
    require(L >= 1 && L <= max_blocks_per_seq * block_size, "lengths[" + std::to_string(b) + "]", L,
            "must be in [1, max_blocks_per_seq · block_size = " + std::to_string(max_blocks_per_seq * block_size) +
                "] (append the new token's K and V before decoding it)");
    for (int64_t i = 0; i < (L + block_size - 1) / block_size; ++i) {  // the blocks holding its tokens
      const int32_t p = block_table[size_t(b * max_blocks_per_seq + i)];
      require(p >= 0 && p < num_blocks, "block_table[" + std::to_string(b) + "][" + std::to_string(i) + "]", p,
              "must be a block of the pool [0, " + std::to_string(num_blocks) + "): it holds tokens " +
                  std::to_string(i * block_size) + " … of sequence " + std::to_string(b) + " (length " +
                  std::to_string(L) + ")");
    }
    max_length = std::max(max_length, L);
  }
  require(head_dim + max_length <= kMaxSharedFloats, "head_dim + max(lengths)", head_dim + max_length,
          "must be ≤ " + std::to_string(kMaxSharedFloats) + " (q and the scores live in 48 KiB of shared memory)");
  check_shape(out, q.shape(), "out");
  require(threads_per_block >= 32 && threads_per_block <= 1024 && threads_per_block % 32 == 0, "threads_per_block",
          threads_per_block, "must be a multiple of 32 from 32 to 1024");

  const DeviceBuffer<float> d_q(q), d_k_pool(k_pool), d_v_pool(v_pool);
  auto d_out = DeviceBuffer<float>::poisoned(out.size());
  const DeviceBuffer<int> d_block_table = upload_ints(block_table), d_lengths = upload_ints(lengths);
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const size_t shared_bytes = size_t(head_dim + max_length) * sizeof(float);
  check_cuda(
      simt::launch(paged_decode_kernel, dim3(unsigned(num_heads), unsigned(batch)), dim3(unsigned(threads_per_block)),
                   shared_bytes, nullptr, static_cast<const float*>(d_q.data()),
                   static_cast<const float*>(d_k_pool.data()), static_cast<const float*>(d_v_pool.data()),
                   static_cast<const int*>(d_block_table.data()), static_cast<const int*>(d_lengths.data()),
                   d_out.data(), int(num_heads), int(num_heads / num_kv_heads), int(max_blocks_per_seq),
                   int(block_size), int(head_dim), scale),
      "paged_decode_kernel");
  check_cuda(cudaDeviceSynchronize(), "paged_decode_kernel");
  d_out.download(out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
