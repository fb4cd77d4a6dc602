// Exercise 5.2 — the fused inner loop: a flash-attention kernel, one thread per query row over
// shared-memory K/V tiles: a straightforward answer (kernels/fused/ holds the polished
// versions). See exercises/05-fused-attention/ch05.h.
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
  __shared__ float k_tile[kKeyTile][kMaxHeadDim];
  __shared__ float v_tile[kKeyTile][kMaxHeadDim];
  const int h = blockIdx.y, g = h / group_size;
  const int q_start = blockIdx.x * kQueryTile;
  const int i = q_start + threadIdx.x;
  const bool owns_row = i < seq_len;
  const float* K = k + size_t(g) * seq_len * head_dim;
  const float* V = v + size_t(g) * seq_len * head_dim;
  const size_t row = (size_t(h) * seq_len + i) * head_dim;

  float q_row[kMaxHeadDim], acc[kMaxHeadDim], s[kKeyTile];
  for (int c = 0; c < head_dim; ++c) {
    q_row[c] = owns_row ? q[row + c] * scale : 0.0f;
    acc[c] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;

  // Causal: keys past the block's last row are masked for every row of the block.
  const int kv_end = causal ? min(seq_len, q_start + kQueryTile) : seq_len;
  for (int kv_start = 0; kv_start < kv_end; kv_start += kKeyTile) {
    const int tile_len = min(kKeyTile, kv_end - kv_start);
    for (int e = threadIdx.x; e < tile_len * head_dim; e += blockDim.x) {
      const int j = e / head_dim, c = e % head_dim;
      k_tile[j][c] = K[size_t(kv_start + j) * head_dim + c];
      v_tile[j][c] = V[size_t(kv_start + j) * head_dim + c];
    }
    __syncthreads();  // the tiles are complete before any thread reads them

    if (owns_row) {
      float tile_max = -INFINITY;
      for (int j = 0; j < tile_len; ++j) {
        float dot = -INFINITY;
        if (!causal || kv_start + j <= i) {
          dot = 0.0f;
          for (int c = 0; c < head_dim; ++c) dot += q_row[c] * k_tile[j][c];
        }
        s[j] = dot;
        tile_max = fmaxf(tile_max, dot);
      }
      if (tile_max != -INFINITY) {  // a tile wholly masked for this row changes nothing
        const float m_new = fmaxf(m, tile_max);
        const float alpha = expf(m - m_new);  // 0 on the row's first visible tile
        l *= alpha;
        for (int c = 0; c < head_dim; ++c) acc[c] *= alpha;
        for (int j = 0; j < tile_len; ++j) {
          const float p = expf(s[j] - m_new);
          l += p;
          for (int c = 0; c < head_dim; ++c) acc[c] += p * v_tile[j][c];
        }
        m = m_new;
      }
    }
    __syncthreads();  // every thread is done with the tiles before the next load overwrites them
  }

  if (owns_row) {
    const float inv_l = 1.0f / l;  // l ≥ 1: the row's max contributes exp(0)
    for (int c = 0; c < head_dim; ++c) out[row + c] = acc[c] * inv_l;
  }
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
