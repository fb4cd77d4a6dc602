#pragma once
/// @file 04-int8-kv-cache/predictions.h
/// Chapter 04 — predict, then measure. Each function is a question: work the number out from the
/// lesson (chapters/04-int8-kv-cache/README.md §1 and §5; chapter 03 §7 for the calculator's
/// arithmetic), write it as a formula in `predictions.cpp`, then run the measurement named in its
/// comment and compare. The graded tests (tests/04-int8-kv-cache/test_predictions.cpp) ask each
/// question over several scenarios, odd ones included, and accept an answer within 1% (the
/// rounding error within 0.1%). Units: bytes, GB = 1e9 bytes.

#include <cstdint>

namespace inferlab::student {

/// Prediction P4.1 — KV-cache bytes per token with an INT8 cache: @p layers layers, @p kv_heads
/// KV heads of dimension @p head_dim, one byte per element, and one scale of @p scale_bytes bytes
/// (4 = fp32, 2 = fp16) per token per KV head, for K and for V (per-token scales). In bytes.
/// Then compare: `./inferlab analyze --model llama-7b --batch 1 --context 2048 --kv int8`
/// ("per token", with fp16 scales).
double predict_int8_kv_bytes_per_token(int64_t layers, int64_t kv_heads, int64_t head_dim, double scale_bytes);

/// Prediction P4.2 — the best speed-up a memory-bound decode kernel can get from an INT8 cache
/// over a cache of @p baseline_bytes_per_element bytes per element (2 = fp16, 4 = fp32): the
/// ratio of the bytes per cached row, head dimension @p head_dim, per-token scales of
/// @p scale_bytes bytes. (fp16 → INT8 is not quite 2×.)
/// Then measure: `./inferlab bench ch04 --benchmark_filter=8xllc` (INT8 vs fp16 vs fp32
/// decode at the same shape, medians in the lesson's §4).
double predict_int8_decode_speedup(int64_t head_dim, double scale_bytes, double baseline_bytes_per_element);

/// Prediction P4.3 — the largest rounding error of symmetric INT8 for a group (one row) whose
/// largest magnitude is @p max_abs: step Δ = max|x| / 127, every element rounded to the nearest
/// step. Return the worst |x̂ − x| (absolute, same unit as @p max_abs).
/// Then measure: `ctest -L ch04 -R Int8` checks every element against it; the lesson's §3 table
/// gives the measured errors.
double predict_int8_max_abs_error(double max_abs);

/// Prediction P4.4 — what an INT8 KV cache buys a whole decode step: the ratio of the step's
/// bytes with an fp16 KV cache to the bytes with an INT8 one (per-token scales of @p scale_bytes
/// bytes), weights unchanged. The model streams @p weight_gb GB of weights once per step; each of
/// the @p batch sequences reads the K and V of its @p context cached tokens (@p layers layers,
/// @p kv_heads KV heads of @p head_dim). Memory-bound, so this is the step's speed-up.
/// Then compare: `./inferlab analyze --model llama-7b --batch 1 --context 2048 --device a100-40`
/// ("int8 KV" ×1.04) and `--batch 64 --context 4096 --device a100-80` (×1.81).
double predict_int8_kv_step_speedup(double weight_gb, int64_t layers, int64_t kv_heads, int64_t head_dim,
                                    double scale_bytes, int64_t batch, int64_t context);

}  // namespace inferlab::student
