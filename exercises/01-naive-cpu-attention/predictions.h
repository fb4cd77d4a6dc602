#pragma once
/// @file 01-naive-cpu-attention/predictions.h
/// Chapter 01 — predict, then measure. Each function is a question: work the number out on
/// paper from the lesson (chapters/01-naive-cpu-attention/README.md §2–§5), write it as a formula
/// in `predictions.cpp`, then run the measurement named in its comment and compare. The graded
/// tests (tests/01-naive-cpu-attention/test_predictions.cpp) ask each question over several
/// scenarios, odd ones included, and accept an answer within 1%. Units: FLOP, bytes,
/// GFLOP/s = 1e9 FLOP/s, GB/s = 1e9 bytes/s, milliseconds.

#include <cstdint>

namespace inferlab::student {

/// Prediction P1.1 (a) — arithmetic intensity of one head of unfused prefill attention under the
/// source article's traffic model, in FLOP/byte.
///
/// One head, L = @p seq_len tokens, head dimension d = @p head_dim, every element
/// @p bytes_per_element bytes (4 = fp32, 2 = fp16), dense FLOP count 4·L²·d (no causal halving).
/// The article's bytes: read Q, K and V, write the L×L score matrix once, write O.
/// Then measure: `./inferlab bench ch01 --benchmark_filter='prefill/cpu/naive'` prints it as `AI`.
double predict_article_ai(int64_t seq_len, int64_t head_dim, double bytes_per_element);

/// Prediction P1.1 (b) — the same head under the real unfused traffic model, in FLOP/byte.
///
/// Same scenario as predict_article_ai(), but counted as a real unfused pipeline moves the
/// scores: Q·Kᵀ writes them, the softmax reads and rewrites them, P·V reads them (about four
/// times L² elements), plus Q, K, V and O once each.
/// Then measure: the same benchmark prints it as `AI_unfused`.
double predict_unfused_ai(int64_t seq_len, int64_t head_dim, double bytes_per_element);

/// Prediction P1.1 (c) — the same head in a fused kernel (chapter 05), in FLOP/byte: only Q, K,
/// V and O move, the scores never leave the chip.
/// Then measure: `./inferlab bench ch05 --benchmark_filter='prefill/cpu/flash'` (chapter 05).
double predict_fused_ai(int64_t seq_len, int64_t head_dim, double bytes_per_element);

/// Prediction P1.2 — a kernel's place on the roofline: the highest rate a kernel of arithmetic
/// intensity @p arithmetic_intensity (FLOP/byte) can reach on a machine with a peak of
/// @p peak_gflops GFLOP/s and a memory bandwidth of @p bandwidth_gbs GB/s, in GFLOP/s.
/// (Left of the ridge point peak/bandwidth the memory roof limits it, right of it the peak.)
/// Then measure: `./inferlab roofline`, then the `roof_GFLOP/s` column of `./inferlab bench ch01`.
double predict_attainable_gflops(double arithmetic_intensity, double peak_gflops, double bandwidth_gbs);

/// Prediction P1.3 — the floor on the time of unfused prefill: @p num_heads heads (no GQA), each
/// as in predict_unfused_ai() (real unfused traffic, dense FLOPs), on a machine with
/// @p peak_gflops GFLOP/s and @p bandwidth_gbs GB/s. No kernel can beat the larger of
/// FLOPs / peak and bytes / bandwidth; return it in milliseconds.
/// Then measure: the `ms` of `./inferlab bench ch01 --benchmark_filter='prefill/cpu/naive'`
/// (4 heads, fp32) against your floor: the lesson's §4 explains the factor of ~50.
double predict_unfused_time_floor_ms(int64_t num_heads, int64_t seq_len, int64_t head_dim, double bytes_per_element,
                                     double peak_gflops, double bandwidth_gbs);

}  // namespace inferlab::student
