#pragma once
/// @file cpu_micro_tile.h
/// The register-tiled micro-kernel and the K/V packing shared by the CPU prefill versions that
/// multiply tiles: cpu/blocked (chapter 02, unfused: a whole block of score rows at a time) and
/// cpu/flash (chapter 05, fused: one key block at a time). Both products of attention,
/// S = Q·Kᵀ and O = P·V, are C = A·B with B's rows kNr floats wide, so one micro-kernel does both.
///
/// The register tile: kMr rows × kNr columns of C live in kMr·kNrVecs vector registers, plus
/// kNrVecs for a row of B and one for the broadcast element of A. Per step of the reduction the
/// tile does kMr·kNrVecs FMAs for kMr + kNrVecs loads.
///   AVX-512 (32 registers): 6 × 4 vectors = 6 × 64 floats, 24 accumulators, 10 loads per 24 FMAs.
///   AVX2    (16 registers): 6 × 2 vectors = 6 × 16 floats, 12 accumulators.
/// (cpu_blocked.cpp's version ladder says what each step of this design measured.)

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "common/ceil_div.h"
#include "common/tensor.h"
#include "kernels/attention/attention.h"
#include "kernels/primitives/cpu_simd.h"

namespace inferlab::tiles {

using simd::kLanes;
using simd::Vec;

#if defined(__AVX512F__)
inline constexpr int kMr = 6, kNrVecs = 4;
#elif defined(__AVX2__)
inline constexpr int kMr = 6, kNrVecs = 2;
#else
/// Rows of C in one register tile.
inline constexpr int kMr = 4;
/// Vectors per row of C in one register tile.
inline constexpr int kNrVecs = 2;
#endif
/// Columns of C in one register tile (and keys per packed K panel).
inline constexpr int64_t kNr = kNrVecs * kLanes;

/// C[kMr × kNr] (= or, with @p kAccumulate, +=) A[kMr × depth] · B[depth × kNr]. A is row-major
/// with stride @p lda and is read one element at a time (broadcast); B's rows are kNr
/// contiguous floats, stride @p ldb; C's rows have stride @p ldc. With @p kAccumulate and a
/// @p c_row_scale (kMr floats), row r of C is first multiplied by c_row_scale[r]:
/// C = diag(scale)·C + A·B, the online softmax's rescaled update in one pass (cpu/flash).
template <bool kAccumulate>
inline void micro_tile(int64_t depth, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                       const float* c_row_scale = nullptr) {
  Vec acc[kMr][kNrVecs];
#pragma GCC unroll 16
  for (int r = 0; r < kMr; ++r) {
#pragma GCC unroll 16
    for (int v = 0; v < kNrVecs; ++v) {
      if constexpr (kAccumulate) {
        acc[r][v] = simd::load(c + r * ldc + v * kLanes);
        if (c_row_scale != nullptr) acc[r][v] = simd::mul(acc[r][v], simd::broadcast(c_row_scale[r]));
      } else {
        acc[r][v] = simd::broadcast(0.0f);
      }
    }
  }
  for (int64_t k = 0; k < depth; ++k) {
    Vec b_k[kNrVecs];
#pragma GCC unroll 16
    for (int v = 0; v < kNrVecs; ++v) b_k[v] = simd::load(b + k * ldb + v * kLanes);
#pragma GCC unroll 16
    for (int r = 0; r < kMr; ++r) {
      const Vec a_rk = simd::broadcast(a[r * lda + k]);
#pragma GCC unroll 16
      for (int v = 0; v < kNrVecs; ++v) acc[r][v] = simd::fma(a_rk, b_k[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kMr; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < kNrVecs; ++v) simd::store(c + r * ldc + v * kLanes, acc[r][v]);
}

/// K and V of every KV head packed for micro_tile(), once per call and shared by the group's
/// query heads and every thread: K transposed into panels of kNr keys, [num_kv_heads][panels]
/// [head_dim][kNr] (keys past seq_len are 0), so a panel is the B of S = Q·Kᵀ; V as rows padded
/// to d_pad = round_up(head_dim, kNr) columns, [num_kv_heads][seq_len][d_pad] (padding 0), the
/// B of O = P·V. Size O(L·d): about the size of K and V themselves.
class PackedKv {
 public:
  /// Packs @p k and @p v (shape @p shape) in parallel with OpenMP.
  PackedKv(const Tensor<float>& k, const Tensor<float>& v, const AttentionShape& shape)
      : seq_len_(shape.seq_len),
        head_dim_(shape.head_dim),
        num_panels_(ceil_div(shape.seq_len, kNr)),
        d_pad_(simd::round_up(shape.head_dim, kNr)),
        k_panels_(shape.num_kv_heads * num_panels_ * head_dim_ * kNr),
        v_rows_(shape.num_kv_heads * seq_len_ * d_pad_) {
    const int64_t L = seq_len_, d = head_dim_;
#pragma omp parallel for schedule(static)
    for (int64_t gp = 0; gp < shape.num_kv_heads * num_panels_; ++gp) {
      const int64_t g = gp / num_panels_, panel = gp % num_panels_;
      float* dst = k_panels_.data() + gp * d * kNr;
      for (int64_t c = 0; c < d; ++c)
        for (int64_t jj = 0; jj < kNr; ++jj) {
          const int64_t j = panel * kNr + jj;
          dst[c * kNr + jj] = j < L ? k[(g * L + j) * d + c] : 0.0f;
        }
      for (int64_t j = panel * kNr; j < std::min(L, (panel + 1) * kNr); ++j) {
        float* row = v_rows_.data() + (g * L + j) * d_pad_;
        std::copy_n(v.data() + (g * L + j) * d, d, row);
        std::fill(row + d, row + d_pad_, 0.0f);
      }
    }
  }

  /// Key panels of one call: ⌈seq_len / kNr⌉.
  int64_t num_panels() const {
    return num_panels_;
  }
  /// head_dim rounded up to a multiple of kNr: the row length of packed V (and of O tiles).
  int64_t d_pad() const {
    return d_pad_;
  }
  /// Panel @p panel of KV head @p kv_head: head_dim rows of kNr keys.
  const float* key_panel(int64_t kv_head, int64_t panel) const {
    return k_panels_.data() + (kv_head * num_panels_ + panel) * head_dim_ * kNr;
  }
  /// Row @p token of KV head @p kv_head of V, d_pad floats (consecutive rows follow).
  const float* value_row(int64_t kv_head, int64_t token) const {
    return v_rows_.data() + (kv_head * seq_len_ + token) * d_pad_;
  }

 private:
  int64_t seq_len_, head_dim_, num_panels_, d_pad_;
  simd::AlignedFloats k_panels_, v_rows_;
};

/// Floats added to the row stride of a block of scores S: rows a multiple of 4 KiB apart would
/// map to the same cache sets (4 KiB aliasing).
inline constexpr int64_t kScoreRowPad = 16;

/// One OpenMP work item of the tiled prefill versions: a block of query rows of one head.
struct QueryBlock {
  int64_t head;       ///< the query head h
  int64_t kv_head;    ///< the KV head it reads, h / group_size
  int64_t first_row;  ///< i0, the block's first query row
  int64_t rows;       ///< valid query rows in this block (the last block may be short)
  int64_t tiles;      ///< kMr-row tiles covering them (the last may be padded)
  int64_t kv_end;     ///< keys any row of the block can see: L, or i0 + rows when causal
};

/// Work item @p item of num_heads · @p num_blocks (head-major; blocks of @p block_rows query
/// rows) of a problem of @p shape.
inline QueryBlock query_block(int64_t item, int64_t num_blocks, int64_t block_rows, const AttentionShape& shape) {
  const int64_t h = item / num_blocks, i0 = (item % num_blocks) * block_rows;
  const int64_t rows = std::min(block_rows, shape.seq_len - i0);
  return {h, h / shape.group_size(), i0, rows, ceil_div(rows, kMr), shape.causal ? i0 + rows : shape.seq_len};
}

/// Rows i0 … i0 + rows − 1 of query head @p h of @p q ([num_heads, L, d] floats), each element
/// times @p scale (1/√d: once per element instead of once per score), into @p dst as whole
/// kMr-row tiles of d floats; the padding rows of the last tile are 0. The Q block that both
/// versions multiply by K's panels.
inline void load_query_block(const float* q, int64_t L, int64_t d, int64_t h, int64_t i0, int64_t rows, float scale,
                             float* dst) {
  const int64_t padded_rows = simd::round_up(rows, kMr);
  for (int64_t r = 0; r < padded_rows; ++r)
    for (int64_t c = 0; c < d; ++c) dst[r * d + c] = r < rows ? q[(h * L + i0 + r) * d + c] * scale : 0.0f;
}

}  // namespace inferlab::tiles
