#pragma once
/// @file 02-gpu-prefill/predictions.h
/// Chapter 02 — predict, then measure. Each function is a question: work the number out from the
/// lesson (chapters/02-gpu-prefill/README.md §3 and §6), write it as a formula in
/// `predictions.cpp`, then run the measurement named in its comment and compare. The graded tests
/// (tests/02-gpu-prefill/test_predictions.cpp) ask each question over several scenarios, odd ones
/// included, and accept an answer within 1% (the tile size exactly). Units: FLOP/byte,
/// TFLOP/s = 1e12 FLOP/s, TB/s = 1e12 bytes/s, KiB = 1024 bytes.

#include <cstdint>

namespace inferlab::student {

/// Prediction P2.1 (a) — the arithmetic intensity of one head of unfused fp16 prefill attention
/// under the source article's traffic model, in FLOP/byte.
///
/// One head, L = @p seq_len, d = @p head_dim, fp16 (2 bytes per element), dense FLOPs 4·L²·d;
/// bytes: Q, K, V and O once, plus the L×L scores written once.
/// Then measure: `./inferlab bench ch02 --benchmark_filter='prefill/cpu/blocked'` prints the
/// article-model `AI` (of fp32 versions: halve your fp16 answer).
double predict_article_ai_fp16(int64_t seq_len, int64_t head_dim);

/// Prediction P2.1 (b) — the same head as a real unfused fp16 pipeline moves it, in FLOP/byte:
/// Q·Kᵀ writes the fp16 scores, the softmax reads and rewrites them, P·V reads them (4·L²
/// elements), plus Q, K, V and O once each. Where does it saturate as L grows?
/// Then measure: the same benchmark's `AI_unfused` column (fp32: halve).
double predict_unfused_ai_fp16(int64_t seq_len, int64_t head_dim);

/// Prediction P2.2 — a kernel's place on a GPU's roofline: the highest rate the unfused fp16
/// pipeline of predict_unfused_ai_fp16() can reach on a GPU with @p peak_tflops (dense fp16
/// tensor-core TFLOP/s) and @p bandwidth_tbs (HBM TB/s), in TFLOP/s. (An H100 SXM: 989 and 3.35.
/// cuda/cublas_fp16 keeps its scores in fp32, which moves more bytes and lowers its ceiling
/// further — the question is about the all-fp16 pipeline.)
/// Then measure, on a GPU: `./inferlab bench ch02 --benchmark_filter='prefill/cuda/cublas_fp16'`
/// (`GFLOP/s` against your ceiling; `tools/gpu-check.sh` runs it).
double predict_unfused_ceiling_tflops(int64_t seq_len, int64_t head_dim, double peak_tflops, double bandwidth_tbs);

/// Prediction P2.3 — a tile size from a shared-memory budget: a tiled GEMM block keeps one T×T
/// tile of A and one T×T tile of B in shared memory, @p bytes_per_element bytes each (4 = fp32,
/// 2 = fp16), no padding. Return the largest power-of-two T (≥ 1) whose two tiles fit in
/// @p shared_memory_kib KiB. Each element fetched from global memory is then used T times.
/// Then look: `gemm_tiled.cu` uses T = 16, 2 KiB of a block's 48 KiB default: what limits T
/// there is the block's thread count (T² threads ≤ 1024), not shared memory.
int64_t predict_gemm_tile(int64_t shared_memory_kib, double bytes_per_element);

}  // namespace inferlab::student
