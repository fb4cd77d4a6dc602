#pragma once
/// @file 07-continuous-batching/predictions.h
/// Chapter 07 — predict, then measure. Each function is a question: work the number out from the
/// lesson (chapters/07-continuous-batching/README.md, "Predict first"; chapter 03 §7 for the
/// same arithmetic on real models), write it as a formula in `predictions.cpp`, then run the
/// measurement named in its comment and compare. The graded tests
/// (tests/07-continuous-batching/test_predictions.cpp) ask each question over several scenarios,
/// odd ones included, and accept an answer within 1%. Units: FLOP/byte, GFLOP/s = 1e9 FLOP/s,
/// GB/s = 1e9 bytes/s, tokens/s.

#include <cstdint>

namespace inferlab::student {

/// A decoder-only model as the serving questions see it.
struct ServingModel {
  double parameters = 0;          ///< every parameter a forward pass streams (one multiply-add per token each)
  double weight_bytes = 0;        ///< bytes per parameter (4 = fp32, 2 = fp16, 1 = int8)
  int64_t layers = 0;             ///< transformer layers
  int64_t heads = 0;              ///< query heads per layer
  int64_t kv_heads = 0;           ///< KV heads per layer (heads / kv_heads is the GQA group)
  int64_t head_dim = 0;           ///< dimension of each head
  double kv_bytes = 0;            ///< bytes per cached K or V element
};

/// Prediction P7.1 — the arithmetic intensity of one decode step of @p batch sequences, each with
/// @p context cached tokens, one new token each, in FLOP/byte.
///
/// FLOPs: every sequence's token does 2 FLOPs per parameter, plus attention: 4·context·head_dim
/// per query head per layer. Bytes: the weights once for the whole batch, plus every sequence's
/// K and V of its cached tokens (activations not counted). While the weights dominate the bytes
/// the answer is ≈ 2·batch / weight_bytes (≈ batch in fp16); once the KV dominates it stops
/// growing.
/// Then measure: `./inferlab bench ch07 --benchmark_filter=decode_step` prints `AI` per batch
/// (the benchmark model: 100.1 M fp32 parameters, 12 layers, 12 heads, 4 KV heads of 64, context 512).
double predict_decode_step_ai(const ServingModel& model, int64_t batch, int64_t context);

/// Prediction P7.2 — the roofline's tokens/s for that step on a machine with @p peak_gflops
/// GFLOP/s and @p bandwidth_gbs GB/s: the step takes at least max(FLOPs / peak, bytes /
/// bandwidth) and produces @p batch tokens.
/// Then measure: the `tokens/s` column of the same benchmark (after `./inferlab roofline`).
double predict_decode_tokens_per_second(const ServingModel& model, int64_t batch, int64_t context, double peak_gflops,
                                        double bandwidth_gbs);

/// Prediction P7.3 — the batch at which a decode step reads as many KV bytes as weight bytes,
/// every sequence holding @p context cached tokens (a real number: the crossover, not rounded).
/// Below it, weights dominate (quantize weights, batch wider); above it, the KV cache does.
/// Then compare: `./inferlab analyze --model llama-7b --context 2048` (the KV = weights crossover).
double predict_kv_equals_weights_batch(const ServingModel& model, int64_t context);

}  // namespace inferlab::student
