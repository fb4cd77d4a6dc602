#pragma once
// Chapter 02 prediction questions (exercises/02-gpu-prefill/predictions.h), checked against
// values worked out here from first principles: the graded tests (test_predictions.cpp) pass the
// student's functions, tests/wrong/wrong_predictions.cpp passes the classic wrong answers and
// requires each to be rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/prediction_check.h"
#include "tests/support/seeded.h"

namespace inferlab::testing::ch02 {

using AiQuestion = std::function<double(int64_t seq_len, int64_t head_dim)>;

inline const char* kLesson = "chapters/02-gpu-prefill/README.md §6 (the prefill arithmetic, done right)";

struct Shape {
  int64_t L, d;
};

// The lesson's table (d = 128), odd shapes and fresh ones.
inline std::vector<Shape> shapes(SeededRng& rng) {
  std::vector<Shape> s = {{64, 128}, {2048, 128}, {8192, 128}, {1, 64}, {33, 80}, {257, 96}};
  for (int i = 0; i < 5; ++i) s.push_back({rng.integer(2, 65536), rng.integer(16, 256)});
  return s;
}

inline std::string shape_inputs(const Shape& s) {
  return "L = " + std::to_string(s.L) + ", d = " + std::to_string(s.d) + ", fp16";
}

// fp16 bytes of one head under each model.
inline double article_bytes(double L, double d) { return 2.0 * (L * L + 4.0 * L * d); }
inline double unfused_bytes(double L, double d) { return 2.0 * (4.0 * L * L + 4.0 * L * d); }

inline std::vector<KnownMistake> ai_mistakes(double L, double d) {
  const double f = 4.0 * L * L * d;
  return {{"the article's model (the L×L scores moved once)", f / article_bytes(L, d)},
          {"the real unfused model (the scores moved ~4 times)", f / unfused_bytes(L, d)},
          {"the fused model (Q, K, V and O only: L/2)", L / 2.0},
          {"the article's algebra slip 2L/(1 + 4d/L)", 2.0 * L / (1.0 + 4.0 * d / L)},
          {"fp32 (4 bytes per element) instead of fp16", f / (2.0 * unfused_bytes(L, d))},
          {"fp32 (4 bytes per element) instead of fp16", f / (2.0 * article_bytes(L, d))},
          {"counting bits instead of bytes", f / (8.0 * unfused_bytes(L, d))},
          {"counting bits instead of bytes", f / (8.0 * article_bytes(L, d))}};
}

inline ::testing::AssertionResult check_ai(const std::string& question, const AiQuestion& predict,
                                           double (*bytes)(double, double), const std::string& formula) {
  SeededRng rng;
  std::vector<Prediction> predictions;
  for (const Shape& s : shapes(rng)) {
    const double L = double(s.L), d = double(s.d), f = 4.0 * L * L * d;
    predictions.push_back({shape_inputs(s), f / bytes(L, d),
                           "FLOPs 4·L²·d = " + prediction_number(f) + " over bytes " + formula + " = " +
                               prediction_number(bytes(L, d)),
                           predict(s.L, s.d), ai_mistakes(L, d)});
  }
  return predictions_match(question, predictions, 0.01, 0.0, kLesson, seed_note(rng.seed()));
}

/// P2.1 (a): 2·d / (1 + 4·d/L).
inline ::testing::AssertionResult check_article_ai(const AiQuestion& predict) {
  return check_ai("P2.1 (a) predict_article_ai_fp16 (FLOP/byte)", predict, article_bytes, "2·(L² + 4·L·d)");
}

/// P2.1 (b): L·d / (2·(L + d)), saturating at d/2.
inline ::testing::AssertionResult check_unfused_ai(const AiQuestion& predict) {
  return check_ai("P2.1 (b) predict_unfused_ai_fp16 (FLOP/byte)", predict, unfused_bytes, "2·(4·L² + 4·L·d)");
}

using CeilingQuestion = std::function<double(int64_t seq_len, int64_t head_dim, double peak_tflops, double bandwidth_tbs)>;

/// P2.2: min(peak, AI_unfused · bandwidth) in TFLOP/s.
inline ::testing::AssertionResult check_ceiling(const CeilingQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    int64_t L, d;
    double peak, bw;
  };
  // H100 SXM, A100 40GB and H200 at the lesson's points; a small device where the peak binds.
  std::vector<Scenario> scenarios = {{8192, 128, 989.0, 3.35}, {2048, 128, 312.0, 1.555}, {64, 128, 989.0, 4.8},
                                     {4096, 64, 20.0, 1.0}, {33, 80, 989.0, 3.35}};
  for (int i = 0; i < 5; ++i)
    scenarios.push_back({rng.integer(2, 32768), rng.integer(16, 256), rng.uniform(10.0f, 2000.0f),
                         rng.uniform(0.5f, 8.0f)});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double L = double(s.L), d = double(s.d), f = 4.0 * L * L * d;
    const double ai = f / unfused_bytes(L, d), memory_roof = ai * s.bw;
    const double expected = std::min(s.peak, memory_roof);
    predictions.push_back(
        {shape_inputs(Shape{s.L, s.d}) + ", " + prediction_number(s.peak) + " TFLOP/s, " +
             prediction_number(s.bw) + " TB/s",
         expected,
         "min(peak " + prediction_number(s.peak) + ", AI_unfused " + prediction_number(ai) + " × " +
             prediction_number(s.bw) + " TB/s = " + prediction_number(memory_roof) + "); ridge point " +
             prediction_number(s.peak / s.bw) + " FLOP/byte: " + (memory_roof < s.peak ? "memory" : "compute") +
             "-bound",
         predict(s.L, s.d, s.peak, s.bw),
         {{"the peak alone (ignoring the memory roof)", s.peak},
          {"the article's model", std::min(s.peak, f / article_bytes(L, d) * s.bw)},
          {"the fused model (AI = L/2)", std::min(s.peak, L / 2.0 * s.bw)},
          {"fp32 scores throughout (4 bytes per element)", std::min(s.peak, ai / 2.0 * s.bw)}}});
  }
  return predictions_match("P2.2 predict_unfused_ceiling_tflops (TFLOP/s)", predictions, 0.01, 0.0,
                           "chapters/02-gpu-prefill/README.md §6 and \"What to expect on a GPU\"",
                           seed_note(rng.seed()));
}

using TileQuestion = std::function<int64_t(int64_t shared_memory_kib, double bytes_per_element)>;

/// P2.3: the largest power of two T with 2·T²·e ≤ budget (KiB = 1024 bytes).
inline ::testing::AssertionResult check_tile(const TileQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    int64_t kib;
    double e;
  };
  // 48 KiB default, 227 KiB (H100 opt-in), 164 KiB (A100), and budgets just on either side of a
  // power-of-two boundary in KiB (where KB = 1000 bytes or a forgotten ×2 gives the wrong T).
  std::vector<Scenario> scenarios = {{48, 4.0}, {227, 2.0}, {164, 4.0}, {2, 4.0}, {128, 2.0}, {129, 4.0}, {8, 2.0}, {32, 4.0}};
  const double sizes[] = {2.0, 4.0};
  for (int i = 0; i < 4; ++i) scenarios.push_back({rng.integer(1, 256), sizes[rng.integer(0, 1)]});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double budget = double(s.kib) * 1024.0;
    int64_t t = 1;
    while (2.0 * double(2 * t) * double(2 * t) * s.e <= budget) t *= 2;
    auto largest = [&](double bytes_budget, double tiles) {
      int64_t x = 1;
      while (tiles * double(2 * x) * double(2 * x) * s.e <= bytes_budget) x *= 2;
      return double(x);
    };
    predictions.push_back(
        {std::to_string(s.kib) + " KiB, " + prediction_number(s.e) + " bytes per element", double(t),
         "two tiles of T² elements: 2·T²·" + prediction_number(s.e) + " B = " +
             prediction_number(2.0 * double(t) * double(t) * s.e) + " ≤ " + prediction_number(budget) +
             " bytes, and T = " + std::to_string(2 * t) + " would need " +
             prediction_number(2.0 * double(2 * t) * double(2 * t) * s.e),
         double(predict(s.kib, s.e)),
         {{"KB = 1000 bytes instead of KiB = 1024", largest(double(s.kib) * 1000.0, 2.0)},
          {"one tile instead of two (A and B)", largest(budget, 1.0)},
          {"the largest T of any size, not a power of two", std::floor(std::sqrt(budget / (2.0 * s.e)))}}});
  }
  return predictions_match("P2.3 predict_gemm_tile (elements per tile side)", predictions, 0.0, 0.0,
                           "chapters/02-gpu-prefill/README.md §3 (the memory hierarchy and tiling)",
                           seed_note(rng.seed()));
}

}  // namespace inferlab::testing::ch02
