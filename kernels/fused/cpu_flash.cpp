// cpu/flash — chapter 05: fused prefill attention on the CPU (FlashAttention's algorithm).
//
// Computes what every prefill version computes (kernels/attention/attention.h): per query head
// h, O_h = softmax(Q_h·K_gᵀ/√d [+ causal mask])·V_g, g = h / group_size (GQA). Unlike
// cpu/blocked (chapter 02), no row of scores is ever complete: a block of Br query rows walks
// the keys one block of Bc keys at a time, and each query row i keeps
//   m_i   the running max of the scores seen so far,
//   l_i   the running sum of exp(s − m_i),
//   O_i   the running, unnormalised output Σ exp(s_ij − m_i)·v_j.
// For each key block (the online softmax, derived in chapters/05-fused-attention/README.md):
//   S      = Q_block · K_blockᵀ                     (Br × Bc scores, in L1/L2)
//   m_new  = max(m_i, max_j S_ij)
//   P_ij   = exp(S_ij − m_new)                      (in place)
//   α_i    = exp(m_i − m_new)                       (1 when the max did not grow; 0 at the start)
//   l_i    = α_i·l_i + Σ_j P_ij,   O_i = α_i·O_i + P·V_block,   m_i = m_new
// and at the end O_i / l_i. The scratch is O(Br·Bc + Br·d) floats per thread — the L×L score
// matrix never exists, not even one full row of it (cpu/blocked holds Br × L).
//
// Launch shape: OpenMP over (query head, block of Br query rows), dynamic schedule (causal
// blocks differ in cost). K and V are packed once per call (cpu_micro_tile.h: K in panels of
// kNr keys, V in rows padded to kNr columns), as cpu/blocked does; both products run on the same
// register-tiled micro-kernel (6 rows × 64 columns with AVX-512).
//
// Causal: a query block only visits keys 0 .. i0+Br−1 (key blocks wholly above the diagonal
// are skipped, about half the work); inside the diagonal key blocks each row masks its keys
// past i. A row that sees no key of a block (possible when Br > 1 and the block starts past
// it) keeps m, l and O unchanged.
//
// Cost per head (L = seq_len, d = head_dim): 4·L²·d FLOPs dense (≈ 2·L²·d executed when causal).
// Bytes (common/cost.h, TrafficModel::fused): Q, K, V, O only — 4·L·d elements — so
// AI = 4·L²·d / (4·4·L·d) = L/4 FLOP/byte in fp32 (L/2 in fp16). In practice K and V are
// re-read from L2/L3 once per query block; DRAM sees little more than the model says.
//
// Why it beats the unfused versions at long L (figures: chapter 05's lesson, bench_ch05): the
// L × L score matrix never exists, so nothing spills from L2 to L3/DRAM between the two GEMMs;
// at short L (all scores fit in L2) it is no faster than cpu/blocked. Causal attention skips the
// key blocks above the diagonal as cpu/blocked does; cpu/openblas computes the masked half.
// Where a thread's time goes: the micro-kernel (Q·Kᵀ and P·V about equally), then the online-
// softmax bookkeeping (max, exp, α, l), packing and scheduling. Block sizes: Bc = 128 keys keeps
// P·V's V panel (Bc × kNr floats, 32 KiB) in L1 (Bc = 256 was no faster); Br = 192 rows rather
// than 96 halves how often K and V stream from L3 when a head's K and V exceed L2. α is applied
// as the micro-kernel loads O (micro_tile's row scale), not in a separate pass over O.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/ceil_div.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/cpu_micro_tile.h"
#include "kernels/primitives/cpu_simd.h"
#include "kernels/fused/fused.h"

namespace inferlab {
namespace {

using simd::AlignedFloats;
using simd::round_up;
using tiles::kMr;
using tiles::kNr;
using tiles::load_query_block;
using tiles::micro_tile;
using tiles::query_block;

constexpr int64_t kBlockRows = 32 * kMr;  // Br: query rows per block (192 with AVX-512)
constexpr int64_t kKeyBlock = 2 * kNr;    // Bc: keys per block (128 with AVX-512); S block 48 KiB,
                                          // a V panel of Bc × kNr floats 32 KiB: in L1 for P·V

}  // namespace

void attention_cpu_flash(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                         Tensor<float>& out) {
  const AttentionShape shape = attention_shape(q, k, v, causal);
  check_attention_output(out, shape);
  const int64_t L = shape.seq_len, d = shape.head_dim;
  const tiles::PackedKv packed(k, v, shape);
  const int64_t d_pad = packed.d_pad();
  const int64_t block_rows = std::min(kBlockRows, round_up(L, kMr));
  const int64_t num_blocks = ceil_div(L, block_rows);
  const int64_t score_stride = kKeyBlock + tiles::kScoreRowPad;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

#pragma omp parallel
  {
    // Per-thread scratch, reused across blocks — O(Br·(d + Bc)) floats, independent of L.
    AlignedFloats q_block(block_rows * d);            // Q rows × 1/√d (padding rows 0)
    AlignedFloats scores(block_rows * score_stride);  // S, then P, of one key block
    AlignedFloats o_block(block_rows * d_pad);        // the running, unnormalised O
    std::vector<float> row_max(static_cast<size_t>(block_rows)), row_sum(static_cast<size_t>(block_rows)),
        rescale(static_cast<size_t>(block_rows));

#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < shape.num_heads * num_blocks; ++item) {
      // Head h (KV head g), query rows i0 … i0 + rows − 1 in `tiles` row tiles; causal: the key
      // blocks from kv_end on are skipped.
      const auto [h, g, i0, rows, tiles, kv_end] = query_block(item, num_blocks, block_rows, shape);

      load_query_block(q.data(), L, d, h, i0, rows, scale, q_block.data());
      std::fill(row_max.begin(), row_max.end(), kMinusInf);
      std::fill(row_sum.begin(), row_sum.end(), 0.0f);

      for (int64_t j0 = 0; j0 < kv_end; j0 += kKeyBlock) {
        const int64_t block_keys = std::min(kKeyBlock, kv_end - j0);
        // S = Q_block · K_blockᵀ, whole panels (keys of a panel past the block are never read).
        for (int64_t p = 0; p < ceil_div(block_keys, kNr); ++p)
          for (int64_t t = 0; t < tiles; ++t)
            micro_tile<false>(d, q_block.data() + t * kMr * d, d, packed.key_panel(g, j0 / kNr + p), kNr,
                              scores.data() + t * kMr * score_stride + p * kNr, score_stride);

        // The online softmax step of each row; padding rows' scores are exactly 0 (zero Q rows)
        // and are left as they are: they only feed O's padding rows, never stored.
        for (int64_t r = 0; r < rows; ++r) {
          float* row = scores.data() + r * score_stride;
          const int64_t valid = causal ? std::clamp(i0 + r + 1 - j0, int64_t(0), block_keys) : block_keys;
          if (valid == 0) {  // every key of this block is after query i0 + r: nothing changes
            std::fill(row, row + block_keys, 0.0f);
            rescale[size_t(r)] = 1.0f;
            continue;
          }
          float new_max = 0.0f;
          const float block_sum = simd::softmax_numerator(row, valid, block_keys, row_max[size_t(r)], &new_max);
          const float alpha = std::exp(row_max[size_t(r)] - new_max);  // exp(−inf) = 0 on the first block
          rescale[size_t(r)] = alpha;
          row_sum[size_t(r)] = alpha * row_sum[size_t(r)] + block_sum;
          row_max[size_t(r)] = new_max;
        }

        // O = α·O + P·V_block, α applied as the micro-kernel loads O (no separate pass). The
        // first block writes O (no stale value is ever scaled).
        for (int64_t col = 0; col < d_pad; col += kNr)
          for (int64_t t = 0; t < tiles; ++t) {
            const float* a = scores.data() + t * kMr * score_stride;
            const float* b = packed.value_row(g, j0) + col;
            float* c = o_block.data() + t * kMr * d_pad + col;
            if (j0 == 0) {
              micro_tile<false>(block_keys, a, score_stride, b, d_pad, c, d_pad);
            } else {
              micro_tile<true>(block_keys, a, score_stride, b, d_pad, c, d_pad, rescale.data() + t * kMr);
            }
          }
      }

      for (int64_t r = 0; r < rows; ++r) {
        float* o = out.data() + (h * L + i0 + r) * d;
        const float* o_r = o_block.data() + r * d_pad;
        const float inv_sum = 1.0f / row_sum[size_t(r)];
        for (int64_t c = 0; c < d; ++c) o[c] = o_r[c] * inv_sum;
      }
    }
  }
}

}  // namespace inferlab
