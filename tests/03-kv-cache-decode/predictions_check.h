#pragma once
// Chapter 03 prediction questions (exercises/03-kv-cache-decode/predictions.h), checked against
// values worked out here from first principles: the graded tests (test_predictions.cpp) pass the
// student's functions, tests/wrong/wrong_predictions.cpp passes the classic wrong answers and
// requires each to be rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/prediction_check.h"
#include "tests/support/seeded.h"

namespace inferlab::testing::ch03 {

inline const char* kArithmetic = "chapters/03-kv-cache-decode/README.md §3 (the decode arithmetic)";
inline const char* kCalculator = "chapters/03-kv-cache-decode/README.md §7 (the arithmetic table)";

using DecodeAiQuestion = std::function<double(int64_t context, int64_t head_dim, int64_t group_size, double e)>;

/// P3.1: g·4·L·d / (e·(2·L·d + 2·g·d)).
inline ::testing::AssertionResult check_decode_ai(const DecodeAiQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    int64_t L, d, g;
    double e;
  };
  std::vector<Scenario> scenarios = {{32768, 128, 1, 2.0}, {32768, 128, 1, 4.0}, {4096, 128, 4, 2.0},
                                     {1, 64, 1, 4.0},      {33, 80, 8, 2.0},     {512, 64, 3, 4.0}};
  const double sizes[] = {1.0, 2.0, 4.0};
  const int64_t groups[] = {1, 2, 4, 8};
  for (int i = 0; i < 5; ++i)
    scenarios.push_back({rng.integer(1, 131072), rng.integer(16, 256), groups[rng.integer(0, 3)], sizes[rng.integer(0, 2)]});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double L = double(s.L), d = double(s.d), g = double(s.g);
    const double flops = g * 4.0 * L * d, bytes = s.e * (2.0 * L * d + 2.0 * g * d);
    const double expected = flops / bytes;
    predictions.push_back(
        {"context " + std::to_string(s.L) + ", d = " + std::to_string(s.d) + ", group " + std::to_string(s.g) + ", " +
             prediction_number(s.e) + " B/element",
         expected,
         "FLOPs g·4·L·d = " + prediction_number(flops) + " over bytes e·(2·L·d (K and V once) + 2·g·d (q, out)) = " +
             prediction_number(bytes),
         predict(s.L, s.d, s.g, s.e),
         {{"reading K and V once per query head (GQA ignored)", 4.0 * L * d / (s.e * (2.0 * L * d + 2.0 * d))},
          {"counting K only (forgetting the ×2 for K and V)", flops / (s.e * (L * d + 2.0 * g * d))},
          {"counting bits instead of bytes", expected / 8.0},
          {"the fp16 answer whatever the element size", flops / (2.0 * (2.0 * L * d + 2.0 * g * d))}}});
  }
  return predictions_match("P3.1 predict_decode_ai (FLOP/byte)", predictions, 0.01, 0.0, kArithmetic,
                           seed_note(rng.seed()));
}

using KvPerTokenQuestion = std::function<double(int64_t layers, int64_t kv_heads, int64_t head_dim, double e)>;

struct ModelShape {
  int64_t layers, kv_heads, head_dim;
};

// LLaMA-7B, Llama-3-8B, Llama-3-70B, the ch07 bench model, and odd ones.
inline std::vector<ModelShape> model_shapes(SeededRng& rng) {
  std::vector<ModelShape> s = {{32, 32, 128}, {32, 8, 128}, {80, 8, 128}, {12, 4, 64}, {1, 1, 80}, {7, 3, 96}};
  for (int i = 0; i < 4; ++i) s.push_back({rng.integer(1, 96), rng.integer(1, 64), rng.integer(16, 256)});
  return s;
}

inline std::string shape_inputs(const ModelShape& m, double e) {
  return std::to_string(m.layers) + " layers × " + std::to_string(m.kv_heads) + " KV heads × d = " +
         std::to_string(m.head_dim) + ", " + prediction_number(e) + " B/element";
}

inline double kv_per_token(const ModelShape& m, double e) {
  return 2.0 * double(m.layers) * double(m.kv_heads) * double(m.head_dim) * e;
}

/// P3.2: 2 · layers · kv_heads · d · e.
inline ::testing::AssertionResult check_kv_bytes_per_token(const KvPerTokenQuestion& predict) {
  SeededRng rng;
  const double sizes[] = {1.0, 2.0, 4.0};
  std::vector<Prediction> predictions;
  int i = 0;
  for (const ModelShape& m : model_shapes(rng)) {
    const double e = i++ == 0 ? 2.0 : sizes[rng.integer(0, 2)];
    const double expected = kv_per_token(m, e);
    predictions.push_back({shape_inputs(m, e), expected,
                           "2 (K and V) · " + std::to_string(m.layers) + " · " + std::to_string(m.kv_heads) + " · " +
                               std::to_string(m.head_dim) + " · " + prediction_number(e),
                           predict(m.layers, m.kv_heads, m.head_dim, e),
                           {{"forgetting the ×2 for K and V", expected / 2.0},
                            {"one layer only", expected / double(m.layers)},
                            {"counting bits instead of bytes", expected * 8.0}}});
  }
  return predictions_match("P3.2 predict_kv_bytes_per_token (bytes)", predictions, 0.01, 0.0, kCalculator,
                           seed_note(rng.seed()));
}

using StepQuestion = std::function<double(double weight_gb, int64_t layers, int64_t kv_heads, int64_t head_dim,
                                          double e, int64_t batch, int64_t context, double bandwidth_gbs)>;

/// P3.3: (weights + B·L·KV per token) / bandwidth, in ms.
inline ::testing::AssertionResult check_decode_step_ms(const StepQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    double w;
    ModelShape m;
    double e;
    int64_t b, L;
    double bw;
  };
  // The lesson's LLaMA-7B on an A100 40GB (9.19 ms), its batch-16 × 4096 regime, Llama-3-8B on
  // an H100, the article's 50-layer example at 2048 tokens, then fresh ones.
  std::vector<Scenario> scenarios = {{13.21, {32, 32, 128}, 2.0, 1, 2048, 1555.0},
                                     {13.21, {32, 32, 128}, 2.0, 16, 4096, 1555.0},
                                     {15.0, {32, 8, 128}, 2.0, 64, 8192, 3350.0},
                                     {1.0, {50, 25, 128}, 2.0, 1, 2048, 1000.0},
                                     {0.4, {12, 4, 64}, 4.0, 3, 511, 18.4}};
  for (int i = 0; i < 5; ++i)
    scenarios.push_back({rng.uniform(0.1f, 150.0f), {rng.integer(1, 80), rng.integer(1, 64), rng.integer(32, 256)},
                         rng.integer(0, 1) == 0 ? 2.0 : 1.0, rng.integer(1, 128), rng.integer(1, 32768),
                         rng.uniform(20.0f, 5000.0f)});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double kv = kv_per_token(s.m, s.e), weights = s.w * 1e9;
    const double kv_all = double(s.b) * double(s.L) * kv;
    const double expected = 1e3 * (weights + kv_all) / (s.bw * 1e9);
    predictions.push_back(
        {prediction_number(s.w) + " GB of weights, " + shape_inputs(s.m, s.e) + ", batch " + std::to_string(s.b) +
             " × " + std::to_string(s.L) + " tokens, " + prediction_number(s.bw) + " GB/s",
         expected,
         "(weights " + prediction_number(weights) + " B + batch · context · KV per token " + prediction_number(kv) +
             " B = " + prediction_number(kv_all) + " B) / bandwidth",
         predict(s.w, s.m.layers, s.m.kv_heads, s.m.head_dim, s.e, s.b, s.L, s.bw),
         {{"the KV of one token per step instead of all the cached ones (the article's slip)",
           1e3 * (weights + double(s.b) * kv) / (s.bw * 1e9)},
          {"the weights alone", 1e3 * weights / (s.bw * 1e9)},
          {"the KV alone (forgetting the weights)", 1e3 * kv_all / (s.bw * 1e9)},
          {"forgetting the ×2 for K and V", 1e3 * (weights + kv_all / 2.0) / (s.bw * 1e9)},
          {"the weights read once per sequence", 1e3 * (double(s.b) * weights + kv_all) / (s.bw * 1e9)}}});
  }
  return predictions_match("P3.3 predict_decode_step_ms (ms)", predictions, 0.01, 0.0, kCalculator,
                           seed_note(rng.seed()));
}

using FitQuestion = std::function<int64_t(double memory_gib, double weight_gb, int64_t layers, int64_t kv_heads,
                                          int64_t head_dim, double e)>;

/// P3.4: ⌊(memory·2³⁰ − weights·1e9) / KV per token⌋.
inline ::testing::AssertionResult check_max_cached_tokens(const FitQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    double gib, w;
    ModelShape m;
    double e;
  };
  std::vector<Scenario> scenarios = {{80.0, 13.48, {32, 32, 128}, 2.0}, {40.0, 13.48, {32, 32, 128}, 2.0},
                                     {141.0, 16.06, {32, 8, 128}, 2.0}, {24.0, 16.06, {32, 8, 128}, 1.0},
                                     {16.0, 0.4, {12, 4, 64}, 4.0}};
  for (int i = 0; i < 5; ++i) {
    const double gib = double(rng.integer(8, 192));
    scenarios.push_back({gib, gib * rng.uniform(0.1f, 0.8f), {rng.integer(1, 80), rng.integer(1, 16), rng.integer(64, 256)},
                         rng.integer(0, 1) == 0 ? 2.0 : 1.0});
  }
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double kv = kv_per_token(s.m, s.e), free_bytes = s.gib * 1073741824.0 - s.w * 1e9;
    const double expected = free_bytes <= 0.0 ? 0.0 : std::floor(free_bytes / kv);
    predictions.push_back(
        {prediction_number(s.gib) + " GiB device, " + prediction_number(s.w) + " GB of weights, " + shape_inputs(s.m, s.e),
         expected,
         "(" + prediction_number(s.gib) + " · 2³⁰ − " + prediction_number(s.w) + " · 1e9 = " +
             prediction_number(free_bytes) + " bytes) / KV per token " + prediction_number(kv) + " bytes",
         double(predict(s.gib, s.w, s.m.layers, s.m.kv_heads, s.m.head_dim, s.e)),
         {{"the device's GiB read as GB (1e9 bytes)", std::floor((s.gib * 1e9 - s.w * 1e9) / kv)},
          {"the weights' GB read as GiB", std::floor((s.gib - s.w) * 1073741824.0 / kv)},
          {"forgetting the ×2 for K and V", std::floor(2.0 * free_bytes / kv)},
          {"forgetting the weights", std::floor(s.gib * 1073741824.0 / kv)}}});
  }
  return predictions_match("P3.4 predict_max_cached_tokens (tokens)", predictions, 0.01, 0.0, kCalculator,
                           seed_note(rng.seed()));
}

}  // namespace inferlab::testing::ch03
