#pragma once
// Chapter 01 prediction questions (exercises/01-naive-cpu-attention/predictions.h), checked
// against values worked out here from first principles: the graded tests
// (test_predictions.cpp) pass the student's functions, tests/wrong/wrong_predictions.cpp passes
// the classic wrong answers and requires each to be rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/prediction_check.h"
#include "tests/support/seeded.h"

namespace inferlab::testing::ch01 {

using AiQuestion = std::function<double(int64_t seq_len, int64_t head_dim, double bytes_per_element)>;

inline const char* kLesson = "chapters/01-naive-cpu-attention/README.md §2 (the three traffic models) and §5";

struct AiScenario {
  int64_t L, d;
  double e;
};

// The worked points of the lessons, odd ones, and fresh random ones.
inline std::vector<AiScenario> ai_scenarios(SeededRng& rng) {
  std::vector<AiScenario> s = {{2048, 128, 2.0}, {1024, 64, 4.0}, {1, 1, 4.0}, {33, 80, 2.0}, {257, 96, 1.0}};
  const double sizes[] = {1.0, 2.0, 4.0};
  for (int i = 0; i < 6; ++i)
    s.push_back({rng.integer(2, 20000), rng.integer(1, 300), sizes[rng.integer(0, 2)]});
  return s;
}

inline std::string ai_inputs(const AiScenario& s) {
  return "L = " + std::to_string(s.L) + ", d = " + std::to_string(s.d) + ", " + prediction_number(s.e) +
         " bytes per element";
}

inline double dense_flops(double L, double d) { return 4.0 * L * L * d; }

// The three byte counts of one head, and the mistakes worth naming.
inline double article_bytes(const AiScenario& s) { return s.e * (double(s.L) * s.L + 4.0 * s.L * s.d); }
inline double unfused_bytes(const AiScenario& s) { return s.e * (4.0 * s.L * s.L + 4.0 * s.L * s.d); }
inline double fused_bytes(const AiScenario& s) { return s.e * 4.0 * s.L * s.d; }

inline ::testing::AssertionResult check_ai(const std::string& question, const AiQuestion& predict,
                                           double (*bytes)(const AiScenario&), const std::string& bytes_formula) {
  SeededRng rng;
  std::vector<Prediction> predictions;
  for (const AiScenario& s : ai_scenarios(rng)) {
    const double f = dense_flops(double(s.L), double(s.d));
    const double expected = f / bytes(s);
    const double L = double(s.L), d = double(s.d);
    std::vector<KnownMistake> mistakes = {
        {"the article's model (the L×L scores moved once)", f / article_bytes(s)},
        {"the real unfused model (the scores moved ~4 times)", f / unfused_bytes(s)},
        {"the fused model (only Q, K, V and O)", f / fused_bytes(s)},
        {"counting bits instead of bytes (×8 the bytes)", expected / 8.0},
        {"the article's algebra slip 2L/(1 + 4d/L)", 2.0 * L / (1.0 + 4.0 * d / L)},
        {"half the FLOPs (the causal count; the question uses the dense 4·L²·d)", expected / 2.0},
    };
    predictions.push_back({ai_inputs(s), expected,
                           "FLOPs 4·L²·d = " + prediction_number(f) + " over bytes " + bytes_formula + " = " +
                               prediction_number(bytes(s)),
                           predict(s.L, s.d, s.e), mistakes});
  }
  return predictions_match(question, predictions, 0.01, 0.0, kLesson, seed_note(rng.seed()));
}

/// P1.1 (a): AI under the article's model, e·(L² + 4·L·d) bytes.
inline ::testing::AssertionResult check_article_ai(const AiQuestion& predict) {
  return check_ai("P1.1 (a) predict_article_ai (FLOP/byte)", predict, article_bytes, "e·(L² + 4·L·d)");
}

/// P1.1 (b): AI under the real unfused model, e·(4·L² + 4·L·d) bytes.
inline ::testing::AssertionResult check_unfused_ai(const AiQuestion& predict) {
  return check_ai("P1.1 (b) predict_unfused_ai (FLOP/byte)", predict, unfused_bytes, "e·(4·L² + 4·L·d)");
}

/// P1.1 (c): AI of a fused kernel, e·4·L·d bytes (= L/e).
inline ::testing::AssertionResult check_fused_ai(const AiQuestion& predict) {
  return check_ai("P1.1 (c) predict_fused_ai (FLOP/byte)", predict, fused_bytes, "e·4·L·d");
}

using AttainableQuestion = std::function<double(double ai, double peak_gflops, double bandwidth_gbs)>;

/// P1.2: min(peak, AI·bandwidth), on both sides of the ridge point.
inline ::testing::AssertionResult check_attainable(const AttainableQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    double ai, peak, bw;
  };
  // This machine's roofline at the lesson's AIs (15.1 unfused: memory-bound; 51.2 article:
  // compute-bound), an H100 (989 TFLOP/s, 3350 GB/s) at AI 64 and 1024, then fresh ones.
  std::vector<Scenario> scenarios = {{15.1, 484.0, 29.7}, {51.2, 484.0, 29.7}, {64.0, 989000.0, 3350.0},
                                     {1024.0, 989000.0, 3350.0}, {0.5, 262.0, 31.3}};
  for (int i = 0; i < 6; ++i) {
    const double peak = rng.uniform(50.0f, 2000.0f), bw = rng.uniform(10.0f, 200.0f);
    scenarios.push_back({(peak / bw) * rng.uniform(0.05f, 20.0f), peak, bw});
  }
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double memory_roof = s.ai * s.bw;
    const double expected = std::min(s.peak, memory_roof);
    predictions.push_back(
        {"AI = " + prediction_number(s.ai) + " FLOP/byte, peak " + prediction_number(s.peak) + " GFLOP/s, bandwidth " +
             prediction_number(s.bw) + " GB/s",
         expected,
         "min(peak " + prediction_number(s.peak) + ", AI × bandwidth = " + prediction_number(memory_roof) +
             ") — ridge point at AI " + prediction_number(s.peak / s.bw) + ": " +
             (memory_roof < s.peak ? "memory-bound" : "compute-bound"),
         predict(s.ai, s.peak, s.bw),
         {{"max instead of min", std::max(s.peak, memory_roof)},
          {"the peak alone (ignoring the memory roof)", s.peak},
          {"AI × bandwidth alone (ignoring the compute roof)", memory_roof}}});
  }
  return predictions_match("P1.2 predict_attainable_gflops (GFLOP/s)", predictions, 0.01, 0.0,
                           "chapters/01-naive-cpu-attention/README.md §3 (attainable(AI) = min(P, AI × B))",
                           seed_note(rng.seed()));
}

using TimeFloorQuestion = std::function<double(int64_t heads, int64_t seq_len, int64_t head_dim,
                                               double bytes_per_element, double peak_gflops, double bandwidth_gbs)>;

/// P1.3: max(FLOPs / peak, unfused bytes / bandwidth) over every head, in ms.
inline ::testing::AssertionResult check_time_floor(const TimeFloorQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    int64_t h, L, d;
    double e, peak, bw;
  };
  std::vector<Scenario> scenarios = {{1, 1024, 64, 4.0, 484.0, 29.7},   // the lesson's §4: 0.60 ms, memory
                                     {4, 2048, 128, 4.0, 484.0, 29.7},  // the benchmark's largest point
                                     {32, 4096, 128, 2.0, 989000.0, 3350.0}, {3, 31, 80, 4.0, 262.0, 31.3}};
  const double sizes[] = {2.0, 4.0};
  for (int i = 0; i < 6; ++i)
    scenarios.push_back({rng.integer(1, 64), rng.integer(2, 16384), rng.integer(16, 256), sizes[rng.integer(0, 1)],
                         rng.uniform(20.0f, 3000.0f), rng.uniform(5.0f, 500.0f)});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double L = double(s.L), d = double(s.d), h = double(s.h);
    const double flops = h * 4.0 * L * L * d;
    const double bytes = h * s.e * (4.0 * L * L + 4.0 * L * d);
    const double compute_ms = 1e3 * flops / (s.peak * 1e9), memory_ms = 1e3 * bytes / (s.bw * 1e9);
    const double expected = std::max(compute_ms, memory_ms);
    const double article_bytes_all = h * s.e * (L * L + 4.0 * L * d);
    predictions.push_back(
        {std::to_string(s.h) + " heads, L = " + std::to_string(s.L) + ", d = " + std::to_string(s.d) + ", " +
             prediction_number(s.e) + " B/element, " + prediction_number(s.peak) + " GFLOP/s, " +
             prediction_number(s.bw) + " GB/s",
         expected,
         "max(FLOPs " + prediction_number(flops) + " / peak = " + prediction_number(compute_ms) + " ms, bytes " +
             prediction_number(bytes) + " (e·(4·L² + 4·L·d) per head) / bandwidth = " + prediction_number(memory_ms) +
             " ms)",
         predict(s.h, s.L, s.d, s.e, s.peak, s.bw),
         {{"the compute time alone", compute_ms},
          {"the memory time alone", memory_ms},
          {"the article's byte count (scores moved once)",
           std::max(compute_ms, 1e3 * article_bytes_all / (s.bw * 1e9))},
          {"one head instead of all of them", expected / h},
          {"seconds instead of milliseconds", expected / 1e3},
          {"the sum of the two times instead of the larger", compute_ms + memory_ms}}});
  }
  return predictions_match("P1.3 predict_unfused_time_floor_ms (ms)", predictions, 0.01, 0.0,
                           "chapters/01-naive-cpu-attention/README.md §3 and §4 (the worked example)",
                           seed_note(rng.seed()));
}

}  // namespace inferlab::testing::ch01
