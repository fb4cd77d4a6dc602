// Exercise 5.2 — the fused inner loop: a flash-attention kernel, one thread per query row over
// shared-memory K/V tiles. See ch05.h for the task.
#include <algorithm>
#include <cmath>
#include <string>

#include "05-fused-attention/ch05.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kQueryTile = 64;    // Br: query rows per block = threads per block
constexpr int kKeyTile = 32;      // Bc: keys per K/V tile
constexpr int kMaxHeadDim = 128;  // the tiles and the per-thread arrays hold this many columns

// out[h][i] = softmax_j(q[h][i] · k[g][j] · scale [j ≤ i when causal]) · v[g][j], g = h / group_size,
// for the rows i = blockIdx.x·64 + threadIdx.x of head h = blockIdx.y. q, out
// [num_heads][seq_len][head_dim]; k, v [num_heads / group_size][seq_len][head_dim].
__global__ void flash_attention_kernel(const float* q, const float* k, const float* v, float* out, int seq_len,
                                       int head_dim, int group_size, float scale, bool causal) {
  [[maybe_unused]] __shared__ float k_tile[kKeyTile][kMaxHeadDim];  // rows kv_start … of K[g]
  [[maybe_unused]] __shared__ float v_tile[kKeyTile][kMaxHeadDim];  // rows kv_start … of V[g]
  // TODO(student): h = blockIdx.y, g = h / group_size, q_start = blockIdx.x * kQueryTile,
  // i = q_start + threadIdx.x (owns a row when i < seq_len). Local arrays q_row[kMaxHeadDim]
  // (= q[h][i] * scale), acc[kMaxHeadDim] (= 0) and s[kKeyTile]; m = -INFINITY, l = 0.
  // kv_end = seq_len, or min(seq_len, q_start + kQueryTile) when causal. For kv_start = 0,
  // kKeyTile, … < kv_end, with tile_len = min(kKeyTile, kv_end - kv_start):
  //   1. every thread copies elements e = threadIdx.x, + blockDim.x, … < tile_len * head_dim of
  //      the tile (row e / head_dim, column e % head_dim) from K[g] and V[g]; __syncthreads();
  //   2. a thread that owns a row: s[j] = q_row · k_tile[j] (-INFINITY when causal and
  //      kv_start + j > i) and the tile's max; unless that max is -INFINITY, the update of
  //      exercise 5.1: m_new = fmaxf(m, max), alpha = expf(m - m_new), l and acc times alpha,
  //      then p = expf(s[j] - m_new) added to l and p * v_tile[j][c] to acc[c]; m = m_new;
  //   3. __syncthreads() before the next tile is loaded.
  // Then a thread that owns a row writes out[h][i][c] = acc[c] / l. No early return: every
  // thread must reach every barrier. (roughly 40 lines)
}

}  // namespace

void flash_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                     Tensor<float>& out) {
  check_rank(q, 3, "q");
  check_rank(k, 3, "k");
  const int64_t num_heads = q.dim(0), seq_len = q.dim(1), head_dim = q.dim(2), num_kv_heads = k.dim(0);
  require(num_heads > 0 && seq_len > 0, "q.shape", to_string(q.shape()),
          "must be [num_heads, seq_len, head_dim], every size ≥ 1");
  require(head_dim >= 1 && head_dim <= kMaxHeadDim, "head_dim", head_dim,
          "must be in [1, " + std::to_string(kMaxHeadDim) + "] (the tiles hold that many columns)");
  require(num_heads <= 65535, "num_heads", num_heads, "must be ≤ 65535 (grid.y)");
  require(num_kv_heads > 0 && num_heads % num_kv_heads == 0, "num_kv_heads", num_kv_heads,
          "must divide num_heads = " + std::to_string(num_heads));
  check_shape(k, Shape{num_kv_heads, seq_len, head_dim}, "k");
  check_shape(v, k.shape(), "v");
  check_shape(out, q.shape(), "out");

  throw NotImplemented("flash_attention");  // TODO(student): delete this line once flash_attention_kernel is written

  const DeviceBuffer<float> d_q(q), d_k(k), d_v(v);
  auto d_out = DeviceBuffer<float>::poisoned(out.size());
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const dim3 grid(blocks_for(seq_len, kQueryTile), unsigned(num_heads));
  check_cuda(
      simt::launch(flash_attention_kernel, grid, dim3(kQueryTile), 0, nullptr, static_cast<const float*>(d_q.data()),
                   static_cast<const float*>(d_k.data()), static_cast<const float*>(d_v.data()), d_out.data(),
                   int(seq_len), int(head_dim), int(num_heads / num_kv_heads), scale, causal),
      "flash_attention_kernel");
  check_cuda(cudaDeviceSynchronize(), "flash_attention_kernel");
  d_out.download(out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
