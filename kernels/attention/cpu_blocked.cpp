// cpu/blocked — chapter 02: unfused prefill attention, cache-blocked, SIMD + OpenMP.
//
// Computes what cpu/naive computes (attention.h): per query head h, S = Q_h·K_gᵀ/√d, causal
// mask, row softmax, O_h = P·V_g, with g = h / group_size (GQA). Still *unfused*: the scores of
// a block of query rows are materialised in full before any of them is used — fusion (online
// softmax, the scores never stored) is chapter 05.
//
// Cost (per head, L = seq_len, d = head_dim): 4·L²·d FLOPs dense (2·L²·d for Q·Kᵀ, 2·L²·d for
// P·V); with the causal mask this version skips key blocks that lie wholly above the diagonal,
// doing ≈ 2·L²·d. Bytes (common/cost.h): Q, K, V, O are 4·L·d floats; the scores are ~4·L²
// floats of traffic (written by Q·Kᵀ, read and written by softmax, read by P·V) — but here that
// traffic goes to the L2 cache, not to DRAM: a block of BR query rows holds BR×L scores, and BR
// is chosen so that block fits in half of L2. DRAM sees Q, K, V, O plus K and V re-read once
// per query block (from L3 when they do not fit in L2).
//
// Structure (the packing and the micro-kernel live in cpu_micro_tile.h, shared with cpu/flash):
//   1. pack K_g transposed into panels [L/NR][d][NR] and V_g into rows padded to NR columns
//      (once per KV head, shared by the group's query heads and by every thread);
//   2. OpenMP over (query head, block of BR query rows), dynamic schedule (causal blocks differ
//      in cost): S_block = (Q_block·1/√d)·Kᵀ with a register-tiled micro-kernel (MR rows × NR
//      keys per tile, MR·NR/lanes accumulators in vector registers; each step along d feeds
//      MR·NR/lanes FMAs from MR broadcasts of Q and NR/lanes vector loads of K);
//   3. softmax numerators in place (vector exp), 1/sum kept per row;
//   4. O_block = P·V with the same micro-kernel (MR rows × NR of d), keys in chunks of KC so
//      the V panel stays in L1; O = O_block · 1/sum.
//
// The version ladder — how each step above was earned — and its measured figures are in chapter
// 02's lesson (bench_ch02); what each step buys:
//   - blocking with K packed in panels: a score block reuses every K panel for a whole block of
//     queries while it is in cache, instead of streaming K once per query;
//   - register tiles of MR rows × NR keys: MR·NR/lanes independent accumulators hide the FMA
//     latency and turn each K vector load into MR FMAs;
//   - the vector exp: with std::exp the softmax, not the GEMMs, took most of the time;
//   - OpenMP over (head, query block): the blocks are independent.
// Where a thread's time goes: the two micro-kernel GEMMs (Q·Kᵀ and P·V, about equally), the
// softmax a small share, packing and scheduling the rest. Causal attention skips the blocks
// above the diagonal, about half the work; cpu/openblas computes the masked half anyway.
// With AVX2 only (-march=haswell) the tiles are 6 × 16 with 12 accumulators: the same code,
// correct, at a lower share of the AVX2 FMA roof (fewer registers for tiles).
//
// Other rungs of the CPU ladder:
//   cpu/openblas   the same unfused pipeline with OpenBLAS sgemm (cpu_openblas.cpp).
//   cpu/flash      chapter 05: fused, the score block never leaves registers/L1.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/ceil_div.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/cpu_micro_tile.h"
#include "kernels/primitives/cpu_simd.h"

namespace inferlab {
namespace {

using simd::AlignedFloats;
using simd::round_up;
using tiles::kMr;
using tiles::kNr;
using tiles::load_query_block;
using tiles::micro_tile;
using tiles::query_block;

constexpr int64_t kMaxBlockRows = 16 * kMr;    // BR: query rows per block (upper bound)
constexpr int64_t kScoreBlockBytes = 1 << 20;  // the S block's budget: half of a 2 MiB L2
constexpr int64_t kKeyChunk = 128;             // KC: keys per step of P·V (V panel ≤ 32 KiB, in L1)

}  // namespace

void attention_cpu_blocked(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                           Tensor<float>& out) {
  const AttentionShape shape = attention_shape(q, k, v, causal);
  check_attention_output(out, shape);
  const int64_t L = shape.seq_len, d = shape.head_dim;
  // 1. Pack K (transposed, panel-major, zero keys past L) and V (zero columns past d) once.
  const tiles::PackedKv packed(k, v, shape);
  const int64_t num_panels = packed.num_panels();  // key panels of kNr keys
  const int64_t d_pad = packed.d_pad();            // V and O rows padded to whole tiles
  const int64_t score_stride = num_panels * kNr + tiles::kScoreRowPad;
  const int64_t block_rows = std::clamp(kScoreBlockBytes / (score_stride * int64_t(sizeof(float))) / kMr * kMr,
                                        int64_t(kMr), std::min(kMaxBlockRows, round_up(L, kMr)));
  const int64_t num_blocks = ceil_div(L, block_rows);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

#pragma omp parallel
  {
    // Per-thread scratch, reused across blocks: the scaled Q block, the S block, the O block.
    AlignedFloats q_block(block_rows * d);
    AlignedFloats scores(block_rows * score_stride);
    AlignedFloats o_block(block_rows * d_pad);
    std::vector<float> inv_sum(static_cast<size_t>(block_rows));

#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < shape.num_heads * num_blocks; ++item) {
      // Head h (KV head g), query rows i0 … i0 + rows − 1 in `tiles` row tiles; kv_end: the keys
      // any row of the block can see.
      const auto [h, g, i0, rows, tiles, kv_end] = query_block(item, num_blocks, block_rows, shape);
      const float* k_g = packed.key_panel(g, 0);
      const float* v_g = packed.value_row(g, 0);

      // Q block, scaled by 1/√d here (once per element instead of once per score); padding rows 0.
      load_query_block(q.data(), L, d, h, i0, rows, scale, q_block.data());

      // 2. S = Q·Kᵀ for the key panels the block can see (causal: none past the diagonal block).
      for (int64_t panel = 0; panel < ceil_div(kv_end, kNr); ++panel)
        for (int64_t t = 0; t < tiles; ++t)
          micro_tile<false>(d, q_block.data() + t * kMr * d, d, k_g + panel * d * kNr, kNr,
                            scores.data() + t * kMr * score_stride + panel * kNr, score_stride);

      // 3. Softmax numerators; row i sees keys 0..i (causal) or all L. The rest of the row up to
      //    kv_end is zeroed so P·V can run over whole chunks.
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t valid = causal ? i0 + r + 1 : L;
        inv_sum[size_t(r)] = 1.0f / simd::softmax_numerator(scores.data() + r * score_stride, valid, kv_end);
      }

      // 4. O_block = P·V over keys 0..kv_end in chunks of kKeyChunk.
      for (int64_t j0 = 0; j0 < kv_end; j0 += kKeyChunk) {
        const int64_t depth = std::min(kKeyChunk, kv_end - j0);
        for (int64_t col = 0; col < d_pad; col += kNr)
          for (int64_t t = 0; t < tiles; ++t) {
            const float* a = scores.data() + t * kMr * score_stride + j0;
            const float* b = v_g + j0 * d_pad + col;
            float* c = o_block.data() + t * kMr * d_pad + col;
            if (j0 == 0) {
              micro_tile<false>(depth, a, score_stride, b, d_pad, c, d_pad);
            } else {
              micro_tile<true>(depth, a, score_stride, b, d_pad, c, d_pad);
            }
          }
      }
      for (int64_t r = 0; r < rows; ++r) {
        float* o = out.data() + (h * L + i0 + r) * d;
        const float* o_r = o_block.data() + r * d_pad;
        for (int64_t c = 0; c < d; ++c) o[c] = o_r[c] * inv_sum[size_t(r)];
      }
    }
  }
}

}  // namespace inferlab
