#pragma once
// Chapter 11 prediction questions (exercises/11-compute-roof/predictions.h), checked against values
// worked out here from each scenario's ingredients, one term at a time (never by a formula shared
// with the solution; P11.3's traffic from the lab's quant_matmul_cost() as well, P11.4 by walking M
// up from 1): the graded tests (test_predictions.cpp) pass the student's functions,
// tests/wrong/wrong_predictions.cpp passes the classic wrong answers and requires each rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "11-compute-roof/predictions.h"
#include "tests/support/prediction_check.h"
#include "tests/support/seeded.h"

namespace inferlab::testing::ch11 {

inline const char* kPredictLesson =
    "chapters/11-compute-roof/README.md (\"Predict first: the int8 ceiling\", \"the arithmetic intensity of a "
    "GEMM tile\", \"when a batch crosses the int8 ridge\") and the worked examples of "
    "exercises/11-compute-roof/predictions.h";

// ==== P11.1 operations of one dot-product instruction ==========================================

using OpsQuestion = std::function<double(int64_t vector_bits)>;

/// P11.1: bits / 8 byte products, each a multiply and an add.
inline ::testing::AssertionResult check_dot_ops(const OpsQuestion& predict) {
  SeededRng rng;
  std::vector<Prediction> predictions;
  for (const int64_t bits : {128, 256, 512}) {
    const double products = double(bits) / 8.0;
    predictions.push_back({std::to_string(bits) + "-bit register", products + products,
                           std::to_string(bits) + " / 8 = " + prediction_number(products) +
                               " byte products, each multiplied and added",
                           predict(bits),
                           {{"the products only (each is also added)", products},
                            {"the int32 lanes (bits / 32) instead of the byte products", double(bits) / 32.0},
                            {"an fp32 FMA's count (2 · bits / 32)", 2.0 * double(bits) / 32.0},
                            {"bits instead of bytes", 2.0 * double(bits)}}});
  }
  return predictions_match("P11.1 predict_dot_ops_per_instruction (operations)", predictions, 0.01, 0.0, kPredictLesson,
                           seed_note(rng.seed()));
}

// ==== P11.2 the int8 ceiling ====================================================================

using CeilingQuestion = std::function<double(int64_t cores, double ghz, int64_t bits, double per_cycle)>;

/// P11.2: cores × cycles a second × instructions a cycle × operations an instruction.
inline ::testing::AssertionResult check_int8_ceiling(const CeilingQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    std::string name;
    int64_t cores;
    double ghz;
    int64_t bits;
    double per_cycle;
  };
  std::vector<Scenario> scenarios = {{"this lab's 2-core VM, zmm, 1 a cycle", 2, 3.7, 512, 1.0},
                                     {"8 cores, ymm, 2 a cycle", 8, 3.0, 256, 2.0},
                                     {"1 core at 2 GHz, zmm (the worked example)", 1, 2.0, 512, 1.0},
                                     {"a 4-core laptop, ymm (AVX-VNNI), 1 a cycle", 4, 4.5, 256, 1.0}};
  for (int i = 0; i < 3; ++i)
    scenarios.push_back({"fresh scenario " + std::to_string(i + 1), rng.integer(1, 64),
                         double(rng.integer(20, 40)) / 10.0, rng.integer(0, 1) ? 512 : 256,
                         double(rng.integer(1, 2))});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double per_instruction = double(s.bits) / 8.0 * 2.0;
    const double per_core_cycle = per_instruction * s.per_cycle;
    const double expected = per_core_cycle * s.ghz * double(s.cores);  // GOP/s: GHz = 1e9 cycles a second
    predictions.push_back({s.name + ": " + std::to_string(s.cores) + " cores × " + prediction_number(s.ghz) + " GHz × " +
                               prediction_number(s.per_cycle) + " × " + std::to_string(s.bits) + "-bit",
                           expected,
                           prediction_number(per_instruction) + " operations an instruction × " +
                               prediction_number(s.per_cycle) + " a cycle × " + prediction_number(s.ghz) + " GHz × " +
                               std::to_string(s.cores) + " cores",
                           predict(s.cores, s.ghz, s.bits, s.per_cycle),
                           {{"one core only", expected / double(s.cores)},
                            {"the products only (each is also added)", expected / 2.0},
                            {"operations a second, not GOP/s (× 1e9)", expected * 1e9},
                            {"the fp32 FMA peak of the same vectors (a quarter)", expected / 4.0}}});
  }
  return predictions_match("P11.2 predict_int8_ceiling_gops (GOP/s)", predictions, 0.01, 0.0, kPredictLesson,
                           seed_note(rng.seed()));
}

// ==== P11.3 the arithmetic intensity of a quantized GEMM =====================================

using IntensityQuestion = std::function<double(int64_t rows, int64_t out, int64_t in, double weight_bytes)>;

/// A GEMM scenario of P11.3 and P11.4.
struct GemmScenario {
  std::string name;
  int64_t rows, out, in;
  double weight_bytes;  ///< bytes a weight value
};

/// The intensity term by term: operations, then W's, x's and y's bytes.
inline double worked_intensity(int64_t rows, int64_t out, int64_t in, double weight_bytes) {
  const double ops = 2.0 * double(rows) * double(out) * double(in);
  const double w_bytes = double(out) * double(in) * weight_bytes;
  const double x_bytes = 4.0 * double(rows) * double(in), y_bytes = 4.0 * double(rows) * double(out);
  return ops / (w_bytes + x_bytes + y_bytes);
}

/// P11.3: 2·M·out·in over the weights' bytes plus x and y in fp32.
inline ::testing::AssertionResult check_gemm_intensity(const IntensityQuestion& predict) {
  SeededRng rng;
  std::vector<GemmScenario> scenarios = {{"the worked example", 1, 2, 32, 1.0625},
                                         {"SmolLM2's gate, decode, Q8_0", 1, 1536, 576, 1.0625},
                                         {"SmolLM2's gate, 64 tokens, Q4_1", 64, 1536, 576, 0.625},
                                         {"SmolLM2's down, 512 tokens, Q8_0", 512, 576, 1536, 1.0625},
                                         {"SmolLM2's head, 8 tokens, Q8_0", 8, 49152, 576, 1.0625}};
  for (int i = 0; i < 3; ++i)
    scenarios.push_back({"fresh scenario " + std::to_string(i + 1), rng.integer(1, 1024), 32 * rng.integer(1, 200),
                         32 * rng.integer(1, 200), rng.integer(0, 1) ? 1.0625 : 0.5625});
  std::vector<Prediction> predictions;
  for (const GemmScenario& s : scenarios) {
    const double expected = worked_intensity(s.rows, s.out, s.in, s.weight_bytes);
    const double ops = 2.0 * double(s.rows) * double(s.out) * double(s.in);
    predictions.push_back({s.name + ": M " + std::to_string(s.rows) + ", " + std::to_string(s.out) + " × " +
                               std::to_string(s.in) + ", " + prediction_number(s.weight_bytes) + " bytes a weight",
                           expected,
                           "2·M·out·in = " + prediction_number(ops) + " over out·in·" + prediction_number(s.weight_bytes) +
                               " + 4·M·in + 4·M·out bytes",
                           predict(s.rows, s.out, s.in, s.weight_bytes),
                           {{"the weights' bytes only (x and y forgotten)",
                             ops / (double(s.out) * double(s.in) * s.weight_bytes)},
                            {"fp32 weights (4 bytes each) instead of the block format's",
                             worked_intensity(s.rows, s.out, s.in, 4.0)},
                            {"M·out·in multiply-adds counted once", expected / 2.0}}});
  }
  return predictions_match("P11.3 predict_gemm_intensity (operations a byte)", predictions, 0.01, 0.0, kPredictLesson,
                           seed_note(rng.seed()));
}

// ==== P11.4 the batch at the int8 ridge ======================================================

using RidgeQuestion =
    std::function<int64_t(double int8_gops, double bandwidth_gbs, int64_t out, int64_t in, double weight_bytes)>;

/// P11.4: M walked up from 1 until the intensity reaches the ridge; 0 when even its limit does not.
inline int64_t walked_rows(double ridge, int64_t out, int64_t in, double weight_bytes) {
  const double limit = double(out) * double(in) / (2.0 * double(out + in));  // 2·out·in / (4·in + 4·out)
  if (limit <= ridge) return 0;
  for (int64_t m = 1;; ++m)
    if (worked_intensity(m, out, in, weight_bytes) >= ridge) return m;
}

inline ::testing::AssertionResult check_rows_at_ridge(const RidgeQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    std::string name;
    double gops, gbs;
    int64_t out, in;
    double weight_bytes;
  };
  std::vector<Scenario> scenarios = {{"the worked example", 900, 36, 1536, 576, 1.0625},
                                     {"this lab's VM (int8 ≈ 1 300 GOP/s, 20 GB/s), gate, Q4_1", 1300, 20, 1536, 576, 0.625},
                                     {"the fp32 ridge's figures (230 GFLOP/s, 36 GB/s), down, Q8_0", 230, 36, 576, 1536, 1.0625},
                                     {"an H100-class chip (int8 ≈ 1 979 TOP/s, 3 350 GB/s), gate, Q8_0", 1979000, 3350,
                                      1536, 576, 1.0625},
                                     {"a tiny layer that never gets there", 900, 10, 64, 64, 1.0625}};
  for (int i = 0; i < 3; ++i)
    scenarios.push_back({"fresh scenario " + std::to_string(i + 1), double(rng.integer(100, 3000)),
                         double(rng.integer(10, 100)), 32 * rng.integer(8, 100), 32 * rng.integer(8, 100),
                         rng.integer(0, 1) ? 1.0625 : 0.625});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double ridge = s.gops / s.gbs;
    const int64_t expected = walked_rows(ridge, s.out, s.in, s.weight_bytes);
    // The weights-only intensity is 2·M / bytes a weight: its M reaches the ridge first.
    const double weights_only = std::ceil(ridge * s.weight_bytes / 2.0);
    predictions.push_back({s.name + ": ridge " + prediction_number(ridge) + " operations a byte, " +
                               std::to_string(s.out) + " × " + std::to_string(s.in),
                           double(expected),
                           expected == 0 ? "the intensity tends to out·in / (2·(out + in)) = " +
                                               prediction_number(double(s.out) * double(s.in) / (2.0 * double(s.out + s.in))) +
                                               ", below the ridge: 0"
                                         : "the first M whose 2·M·out·in / (out·in·w + 4·M·(in + out)) ≥ " +
                                               prediction_number(ridge),
                           double(predict(s.gops, s.gbs, s.out, s.in, s.weight_bytes)),
                           {{"the weights' bytes only (x and y forgotten)", weights_only},
                            {"the last M below the ridge instead of the first at it", double(expected - 1)}}});
  }
  return predictions_match("P11.4 predict_rows_at_int8_ridge (rows, exactly)", predictions, 0.0, 0.0, kPredictLesson,
                           seed_note(rng.seed()));
}

}  // namespace inferlab::testing::ch11
