#pragma once
/// @file cpu_packed_microkernel.h
/// The loops of packed_matmul_cpu() around its micro-kernel, written once over a vector type V that
/// each instruction set's file defines (cpu_packed_avx512_vnni.cpp and the others) and instantiates
/// there, compiled for that set only. Every function here is a template over V, so each file's
/// copies have names of their own and never meet another file's at link time (a copy compiled for
/// AVX-512 must never be the one an AVX2 CPU runs).
///
/// What V provides (I: int32 lanes, F: fp32 lanes, kLanes of each):
///   kLanes, kMR, kNV    lanes a vector; rows and vectors of outputs in a tile
///   zero(), set1(int)   int32 vectors
///   load(p)             kLanes × 4 bytes of a chunk (unaligned)
///   bcast4(p)           4 activation bytes into every lane
///   low_nibbles(raw), high_nibbles(raw)   Q4 codes 0–15 of a chunk's two nibble planes
///   prepare_q8(w)       a chunk of Q8_0 codes (stored q + 128) made ready for dot_q8, once a chunk
///                       (shared by the tile's rows): as it is for vpdpbusd, back to signed for AVX2
///   dot_u8(acc, u, x)   acc + Σ of 4 products of unsigned u and signed x, each lane
///   dot_q8(acc, w, x)   the same for Q8_0's prepared codes
///   halves(p)           kLanes fp16 values → F;  set1f, mul, fma, cvt (int32 → fp32)
///   store(p, v), store_first(p, v, n)      all lanes, or the first n
///   loadf(p), loadf_first(p, n)            kLanes floats, or the first n (the rest 0)
#include <cstdint>

#include "kernels/quant/cpu_packed_gemm.h"
#include "kernels/quant/packed_matrix.h"

namespace inferlab::quant::packed {

/// How the micro-kernel reads one weight format from a packed block.
template <GgmlType kType>
struct Format {
  static constexpr bool kNibbles = kType != GgmlType::q8_0;  ///< 4-bit codes: two planes a chunk
  static constexpr bool kMin = kType == GgmlType::q4_1;      ///< Q4_1's minimum term
  static constexpr int kChunks = kNibbles ? 4 : 8;          ///< 64-byte chunks of codes
  static constexpr int64_t kScales = kMin ? 64 : 32;        ///< bytes of d (and m) first
  static constexpr int64_t kBlock = kScales + 64 * kChunks;  ///< bytes of a packed block
};

/// Where the micro-kernel finds one vector of outputs: its group's packed data and the lane offset
/// within the group (0, or 8 for the second ymm half), and the first output column.
struct VectorOfOutputs {
  const uint8_t* group;  ///< the group's first packed block
  int64_t lane;          ///< outputs of the group before this vector's first
  int64_t column;        ///< its first output: group · 16 + lane
};

/// Blocks [b_begin, b_end) of the reduction, in order (the KC loop cuts it into such ranges).
struct BlockRange {
  int64_t begin;  ///< the first block
  int64_t end;    ///< one past the last
};

/// The micro-kernel: rows x[0 … MR) × NV vectors of outputs, over the blocks of @p range.
/// sum[r][v] holds block b's exact int32 partial sums, acc[r][v] the fp32 chain over the blocks —
/// each lane one (row, output) pair, never a part of another lane's sum. The chain starts at 0 for
/// the first range and from y for a later one (the previous range left it there: an fp32 store
/// and load are exact, so the chain is the same as in one piece).
template <class V, class Fmt, int MR, int NV>
inline void micro_kernel(const VectorOfOutputs* vec, const Activation* const* x, BlockRange range, float* const* y,
                         int64_t out) {
  using I = typename V::I;
  using F = typename V::F;
  F acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      const int64_t left = out - vec[v].column;
      acc[r][v] = range.begin == 0        ? V::fzero()
                  : left >= V::kLanes     ? V::loadf(y[r] + vec[v].column)
                                          : V::loadf_first(y[r] + vec[v].column, int(left));
    }
  for (int64_t b = range.begin; b < range.end; ++b) {
    const uint8_t* block[NV];
    for (int v = 0; v < NV; ++v) block[v] = vec[v].group + b * Fmt::kBlock;
    I sum[MR][NV];
    for (int r = 0; r < MR; ++r) {
      const I start = V::set1(x[r][b].start);  // −offset·Σx (cpu_packed_gemm.h): a broadcast load
      for (int v = 0; v < NV; ++v) sum[r][v] = start;
    }
#pragma GCC unroll 8
    for (int j = 0; j < Fmt::kChunks; ++j) {
      if constexpr (Fmt::kNibbles) {
        // One chunk: values 4j … 4j + 3 in its low nibbles, 16 + 4j … 16 + 4j + 3 in its high ones.
        I low[NV], high[NV];
        for (int v = 0; v < NV; ++v) {
          const I raw = V::load(block[v] + Fmt::kScales + 64 * j + 4 * vec[v].lane);
          low[v] = V::low_nibbles(raw);
          high[v] = V::high_nibbles(raw);
        }
        for (int r = 0; r < MR; ++r) {
          const I x_low = V::bcast4(x[r][b].qs + 4 * j), x_high = V::bcast4(x[r][b].qs + 16 + 4 * j);
          for (int v = 0; v < NV; ++v) sum[r][v] = V::dot_u8(V::dot_u8(sum[r][v], low[v], x_low), high[v], x_high);
        }
      } else {
        I w[NV];
        for (int v = 0; v < NV; ++v) w[v] = V::prepare_q8(V::load(block[v] + Fmt::kScales + 64 * j + 4 * vec[v].lane));
        for (int r = 0; r < MR; ++r) {
          const I xq = V::bcast4(x[r][b].qs + 4 * j);
          for (int v = 0; v < NV; ++v) sum[r][v] = V::dot_q8(sum[r][v], w[v], xq);
        }
      }
    }
    // The block's scales: d_w·d_x is exact (two fp16 values), then one fma a block, in order.
    for (int v = 0; v < NV; ++v) {
      const F d_w = V::halves(block[v] + 2 * vec[v].lane);
      for (int r = 0; r < MR; ++r) acc[r][v] = V::fma(V::mul(d_w, V::set1f(x[r][b].d)), V::cvt(sum[r][v]), acc[r][v]);
      if constexpr (Fmt::kMin) {
        const F m_w = V::halves(block[v] + 32 + 2 * vec[v].lane);
        for (int r = 0; r < MR; ++r) acc[r][v] = V::fma(m_w, V::set1f(x[r][b].s), acc[r][v]);
      }
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      const int64_t left = out - vec[v].column;
      if (left >= V::kLanes)
        V::store(y[r] + vec[v].column, acc[r][v]);
      else
        V::store_first(y[r] + vec[v].column, acc[r][v], int(left));
    }
}

/// A tile of @p rows (1 … V::kMR) rows: the micro-kernel instantiated for that count.
template <class V, class Fmt, int NV>
void tile(int64_t rows, const VectorOfOutputs* vec, const Activation* const* x, BlockRange range, float* const* y,
          int64_t out) {
  static_assert(V::kMR == 4, "tile() dispatches 1 to 4 rows");
  switch (rows) {
    case 1:
      return micro_kernel<V, Fmt, 1, NV>(vec, x, range, y, out);
    case 2:
      return micro_kernel<V, Fmt, 2, NV>(vec, x, range, y, out);
    case 3:
      return micro_kernel<V, Fmt, 3, NV>(vec, x, range, y, out);
    default:
      return micro_kernel<V, Fmt, 4, NV>(vec, x, range, y, out);
  }
}

/// The loops around the micro-kernel (packed_matmul.h), thread @p thread's share: a contiguous
/// range of the panels of V::kNV vectors, rows in blocks of MC that fit half the L2 cache, the
/// reduction in ranges of KC blocks whose slice of a panel fits half the L1 cache, and each panel
/// slice reused by every MR-row tile of the row block.
template <class V, class Fmt>
void gemm_loops(const GemmArgs& a, int thread, int threads) {
  const PackedMatrix& w = *a.w;
  const int64_t blocks = w.blocks(), out = w.out();
  constexpr int64_t kVectorsPerGroup = kPackedGroup / V::kLanes;
  const int64_t vectors = (out + V::kLanes - 1) / V::kLanes;  // the padding's all-zero vectors skipped
  const int64_t panels = (vectors + V::kNV - 1) / V::kNV;
  // MC: rows whose activations take at most half the L2 (the panel's weights and y need the rest),
  // a multiple of MR, at least MR.
  const int64_t row_bytes = blocks * int64_t(sizeof(Activation));
  int64_t mc = int64_t(a.l2_bytes / 2) / row_bytes / V::kMR * V::kMR;
  if (mc < V::kMR) mc = V::kMR;
  // KC: blocks whose slice of a panel (NV vectors of kLanes outputs) takes at most half the L1 —
  // 22 Q8_0 blocks of a 2-vector zmm panel in a 48 KiB L1 — so that every row tile reads it from
  // L1, not L2 (the down matrix's 48 blocks are 52 KB a panel: read whole, they missed L1).
  const int64_t panel_block_bytes = V::kNV * V::kLanes * Fmt::kBlock / kPackedGroup;
  int64_t kc = int64_t(a.l1_bytes / 2) / panel_block_bytes;
  if (kc < 1) kc = 1;
  {
    const int64_t p_begin = panels * thread / threads, p_end = panels * (thread + 1) / threads;
    for (int64_t m0 = 0; m0 < a.rows; m0 += mc)
      for (int64_t k0 = 0; k0 < blocks; k0 += kc) {
      const int64_t m_end = m0 + mc < a.rows ? m0 + mc : a.rows;
      const BlockRange range{k0, k0 + kc < blocks ? k0 + kc : blocks};
      for (int64_t p = p_begin; p < p_end; ++p) {
        VectorOfOutputs vec[V::kNV];
        const int64_t first = p * V::kNV;
        const int nv = int(vectors - first < V::kNV ? vectors - first : V::kNV);
        for (int v = 0; v < nv; ++v) {
          const int64_t g = (first + v) / kVectorsPerGroup, lane = (first + v) % kVectorsPerGroup * V::kLanes;
          vec[v] = {w.block(g, 0), lane, g * kPackedGroup + lane};
        }
        for (int64_t r0 = m0; r0 < m_end; r0 += V::kMR) {
          const int64_t rows = m_end - r0 < V::kMR ? m_end - r0 : V::kMR;
          const Activation* x[V::kMR];
          float* y[V::kMR];
          for (int64_t r = 0; r < rows; ++r) {
            x[r] = a.act + (r0 + r) * blocks;
            y[r] = a.y + (r0 + r) * out;
          }
          if (nv == V::kNV)
            tile<V, Fmt, V::kNV>(rows, vec, x, range, y, out);
          else
            tile<V, Fmt, 1>(rows, vec, x, range, y, out);
        }
      }
    }
  }
}

/// The whole GEMM for V: the weight format chosen once, outside every loop.
template <class V>
void gemm(const GemmArgs& a, int thread, int threads) {
  switch (a.w->type()) {
    case GgmlType::q8_0:
      return gemm_loops<V, Format<GgmlType::q8_0>>(a, thread, threads);
    case GgmlType::q4_0:
      return gemm_loops<V, Format<GgmlType::q4_0>>(a, thread, threads);
    default:
      return gemm_loops<V, Format<GgmlType::q4_1>>(a, thread, threads);
  }
}

}  // namespace inferlab::quant::packed
