#pragma once
/// @file 03-kv-cache-decode/predictions.h
/// Chapter 03 — predict, then measure. Each function is a question: work the number out from the
/// lesson (chapters/03-kv-cache-decode/README.md §3 and §7), write it as a formula in
/// `predictions.cpp`, then run the measurement named in its comment and compare. The graded tests
/// (tests/03-kv-cache-decode/test_predictions.cpp) ask each question over several scenarios, odd
/// ones included, and accept an answer within 1%. Units: bytes, GB = 1e9 bytes (weights,
/// bandwidth in GB/s), GiB = 2³⁰ bytes (device memory, as GPUs are sold), milliseconds.

#include <cstdint>

namespace inferlab::student {

/// Prediction P3.1 — the arithmetic intensity of decode attention for one KV head, in FLOP/byte.
///
/// One decode step of one sequence: @p context cached tokens, head dimension d = @p head_dim,
/// @p group_size query heads sharing this KV head (1 = MHA; GQA shares one K/V row among the
/// group), cache and activations @p bytes_per_element bytes each. FLOPs: each query head does
/// q·k_j and Σ p_j·v_j over every cached token (2·d FLOPs per token each); the softmax is not
/// counted. Bytes: every cached K and V row read once (for the whole group), and each query head's
/// q read and output written once.
/// Then measure: `./inferlab bench ch03 --benchmark_filter='decode_fp16/cpu/decode_simd'` prints
/// `AI` (its shape: 8 heads, 8 KV heads).
double predict_decode_ai(int64_t context, int64_t head_dim, int64_t group_size, double bytes_per_element);

/// Prediction P3.2 — KV-cache bytes per token of a model: @p layers layers, @p kv_heads KV heads
/// of dimension @p head_dim, @p bytes_per_element bytes per cached element. In bytes.
/// Then compare: `./inferlab analyze --model llama-7b --batch 1 --context 2048` ("per token").
double predict_kv_bytes_per_token(int64_t layers, int64_t kv_heads, int64_t head_dim, double bytes_per_element);

/// Prediction P3.3 — a decode time from bytes and bandwidth: the floor on one decode step of a
/// whole model, in milliseconds.
///
/// The model streams @p weight_gb GB of weights once per step (shared by the batch); each of the
/// @p batch sequences reads the K and V of its @p context cached tokens (@p layers layers,
/// @p kv_heads KV heads of @p head_dim, @p kv_bytes_per_element bytes). The memory is
/// @p bandwidth_gbs GB/s; decode is memory-bound, so the floor is bytes / bandwidth.
/// Then measure: `./inferlab analyze --model llama-7b --batch 1 --context 2048 --device a100-40`
/// ("time floor"), and `./inferlab bench ch07 --benchmark_filter='decode_step'` for a real step.
double predict_decode_step_ms(double weight_gb, int64_t layers, int64_t kv_heads, int64_t head_dim,
                              double kv_bytes_per_element, int64_t batch, int64_t context, double bandwidth_gbs);

/// Prediction P3.4 — how many tokens of KV cache fit: a device with @p memory_gib GiB holds
/// @p weight_gb GB of weights; every other byte holds K and V of cached tokens (shape as in
/// predict_kv_bytes_per_token()). Return the largest whole number of tokens (all sequences
/// together) that fits; 0 if the weights alone do not fit.
/// Then compare: `./inferlab analyze --model llama-7b --batch 16 --context 4096 --device a100-40`
/// says whether weights + KV fit (it counts a device's memory in GB, 1e9 bytes).
int64_t predict_max_cached_tokens(double memory_gib, double weight_gb, int64_t layers, int64_t kv_heads,
                                  int64_t head_dim, double bytes_per_element);

}  // namespace inferlab::student
