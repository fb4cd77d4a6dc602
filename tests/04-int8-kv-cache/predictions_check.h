#pragma once
// Chapter 04 prediction questions (exercises/04-int8-kv-cache/predictions.h), checked against
// values worked out here from first principles: the graded tests (test_predictions.cpp) pass the
// student's functions, tests/wrong/wrong_predictions.cpp passes the classic wrong answers and
// requires each to be rejected.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/prediction_check.h"
#include "tests/support/seeded.h"

namespace inferlab::testing::ch04 {

inline const char* kScheme = "chapters/04-int8-kv-cache/README.md §1 (the scheme: one byte per element plus a scale per group)";

using Int8PerTokenQuestion = std::function<double(int64_t layers, int64_t kv_heads, int64_t head_dim, double scale_bytes)>;

/// P4.1: 2 · layers · kv_heads · (d + scale bytes).
inline ::testing::AssertionResult check_int8_kv_bytes_per_token(const Int8PerTokenQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    int64_t layers, kv_heads, d;
    double s;
  };
  std::vector<Scenario> scenarios = {{32, 32, 128, 2.0}, {32, 32, 128, 4.0}, {32, 8, 128, 2.0}, {1, 1, 80, 4.0}, {7, 3, 96, 2.0}};
  for (int i = 0; i < 5; ++i)
    scenarios.push_back({rng.integer(1, 96), rng.integer(1, 64), rng.integer(16, 256), rng.integer(0, 1) == 0 ? 2.0 : 4.0});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double rows = 2.0 * double(s.layers) * double(s.kv_heads), expected = rows * (double(s.d) + s.s);
    predictions.push_back(
        {std::to_string(s.layers) + " layers × " + std::to_string(s.kv_heads) + " KV heads × d = " + std::to_string(s.d) +
             ", " + prediction_number(s.s) + "-byte scales",
         expected,
         "2 (K and V) · " + std::to_string(s.layers) + " · " + std::to_string(s.kv_heads) + " rows of (" +
             std::to_string(s.d) + " bytes + a " + prediction_number(s.s) + "-byte scale)",
         predict(s.layers, s.kv_heads, s.d, s.s),
         {{"forgetting the ×2 for K and V", expected / 2.0},
          {"forgetting the scales", rows * double(s.d)},
          {"one scale per element", rows * double(s.d) * (1.0 + s.s)},
          {"counting bits instead of bytes", expected * 8.0}}});
  }
  return predictions_match("P4.1 predict_int8_kv_bytes_per_token (bytes)", predictions, 0.01, 0.0, kScheme,
                           seed_note(rng.seed()));
}

using SpeedupQuestion = std::function<double(int64_t head_dim, double scale_bytes, double baseline_bytes)>;

/// P4.2: e·d / (d + s).
inline ::testing::AssertionResult check_int8_decode_speedup(const SpeedupQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    int64_t d;
    double s, e;
  };
  std::vector<Scenario> scenarios = {{128, 4.0, 2.0}, {128, 4.0, 4.0}, {128, 2.0, 2.0}, {64, 4.0, 2.0}, {16, 4.0, 2.0}, {80, 2.0, 4.0}};
  for (int i = 0; i < 4; ++i)
    scenarios.push_back({rng.integer(8, 256), rng.integer(0, 1) == 0 ? 2.0 : 4.0, rng.integer(0, 1) == 0 ? 2.0 : 4.0});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double d = double(s.d), expected = s.e * d / (d + s.s);
    predictions.push_back({"d = " + std::to_string(s.d) + ", " + prediction_number(s.s) + "-byte scales, against " +
                               prediction_number(s.e) + " bytes per element",
                           expected,
                           "baseline row " + prediction_number(s.e * d) + " bytes / INT8 row (" + prediction_number(d) +
                               " + " + prediction_number(s.s) + ") bytes",
                           predict(s.d, s.s, s.e),
                           {{"the element sizes alone (forgetting the scale)", s.e},
                            {"a scale per element", s.e / (1.0 + s.s)}}});
  }
  return predictions_match("P4.2 predict_int8_decode_speedup (×)", predictions, 0.01, 0.0,
                           "chapters/04-int8-kv-cache/README.md §4 (measured speed; the byte ratio bounds it)",
                           seed_note(rng.seed()));
}

using ErrorQuestion = std::function<double(double max_abs)>;

/// P4.3: Δ/2 = max|x| / 254.
inline ::testing::AssertionResult check_int8_max_abs_error(const ErrorQuestion& predict) {
  SeededRng rng;
  std::vector<double> maxima = {1.0, 127.0, 0.37, 12.5};
  for (int i = 0; i < 4; ++i) maxima.push_back(rng.uniform(1e-3f, 100.0f));
  std::vector<Prediction> predictions;
  for (double m : maxima) {
    const double step = m / 127.0, expected = step / 2.0;
    predictions.push_back({"max|x| = " + prediction_number(m), expected,
                           "step Δ = max|x| / 127 = " + prediction_number(step) + "; rounding to the nearest step errs by at most Δ/2",
                           predict(m),
                           {{"a whole step Δ instead of half of it", step},
                            {"a step of max|x| / 128", m / 256.0},
                            {"255 levels over [−max, max] (2·max/255 per step)", m / 255.0},
                            {"a step of max|x| / 255", m / 510.0}}});
  }
  return predictions_match("P4.3 predict_int8_max_abs_error", predictions, 0.001, 0.0, kScheme, seed_note(rng.seed()));
}

using StepSpeedupQuestion = std::function<double(double weight_gb, int64_t layers, int64_t kv_heads, int64_t head_dim,
                                                 double scale_bytes, int64_t batch, int64_t context)>;

/// P4.4: (W + B·L·KV_fp16) / (W + B·L·KV_int8).
inline ::testing::AssertionResult check_int8_kv_step_speedup(const StepSpeedupQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    double w;
    int64_t layers, kv_heads, d;
    double s;
    int64_t b, L;
  };
  // The lesson's two regimes (LLaMA-7B: batch 1 × 2048, ×1.04; batch 64 × 4096, ×1.81), GQA, then fresh ones.
  std::vector<Scenario> scenarios = {{13.21, 32, 32, 128, 2.0, 1, 2048}, {13.21, 32, 32, 128, 2.0, 64, 4096},
                                     {15.0, 32, 8, 128, 4.0, 16, 8192}, {0.4, 12, 4, 64, 4.0, 3, 511}};
  for (int i = 0; i < 5; ++i)
    scenarios.push_back({rng.uniform(0.1f, 150.0f), rng.integer(1, 80), rng.integer(1, 64), rng.integer(32, 256),
                         rng.integer(0, 1) == 0 ? 2.0 : 4.0, rng.integer(1, 256), rng.integer(1, 32768)});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double rows = 2.0 * double(s.layers) * double(s.kv_heads), tokens = double(s.b) * double(s.L);
    const double w = s.w * 1e9, fp16 = tokens * rows * double(s.d) * 2.0, int8 = tokens * rows * (double(s.d) + s.s);
    const double expected = (w + fp16) / (w + int8);
    predictions.push_back(
        {prediction_number(s.w) + " GB of weights, " + std::to_string(s.layers) + " layers × " +
             std::to_string(s.kv_heads) + " KV heads × d = " + std::to_string(s.d) + ", " + prediction_number(s.s) +
             "-byte scales, batch " + std::to_string(s.b) + " × " + std::to_string(s.L) + " tokens",
         expected,
         "(weights " + prediction_number(w) + " + fp16 KV " + prediction_number(fp16) + ") / (weights + INT8 KV " +
             prediction_number(int8) + ") bytes",
         predict(s.w, s.layers, s.kv_heads, s.d, s.s, s.b, s.L),
         {{"the KV bytes alone (forgetting that the weights are read too)", fp16 / int8},
          {"a flat 2× (half the bytes, scales and weights forgotten)", 2.0},
          {"forgetting the scales", (w + fp16) / (w + tokens * rows * double(s.d))}}});
  }
  return predictions_match("P4.4 predict_int8_kv_step_speedup (×)", predictions, 0.01, 0.0,
                           "chapters/04-int8-kv-cache/README.md §5 (when KV quantization matters)",
                           seed_note(rng.seed()));
}

}  // namespace inferlab::testing::ch04
