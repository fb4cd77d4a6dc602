#pragma once
// Chapter 07 prediction questions (exercises/07-continuous-batching/predictions.h), checked
// against values worked out here from first principles: the graded tests (test_predictions.cpp)
// pass the student's functions, tests/wrong/wrong_predictions.cpp passes the classic wrong
// answers and requires each to be rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "07-continuous-batching/predictions.h"
#include "tests/support/prediction_check.h"
#include "tests/support/seeded.h"

namespace inferlab::testing::ch07 {

using student::ServingModel;

inline const char* kLesson = "chapters/07-continuous-batching/README.md, \"Predict first: what does batching buy a decode step?\"";

// The benchmark model (fp32), LLaMA-7B and Llama-3-8B in fp16, a 70B-like GQA model in int8, then
// a fresh one.
inline std::vector<ServingModel> models(SeededRng& rng) {
  std::vector<ServingModel> m = {{100.1e6, 4.0, 12, 12, 4, 64, 4.0},
                                 {6.607e9, 2.0, 32, 32, 32, 128, 2.0},
                                 {7.5e9, 2.0, 32, 32, 8, 128, 2.0},
                                 {70e9, 1.0, 80, 64, 8, 128, 1.0}};
  const int64_t kv = rng.integer(1, 16);
  m.push_back({double(rng.integer(10, 20000)) * 1e6, rng.integer(0, 1) == 0 ? 2.0 : 4.0, rng.integer(1, 80),
               kv * rng.integer(1, 8), kv, 16 * rng.integer(2, 16), rng.integer(0, 1) == 0 ? 1.0 : 2.0});
  return m;
}

inline std::string model_inputs(const ServingModel& m) {
  return prediction_number(m.parameters) + " parameters × " + prediction_number(m.weight_bytes) + " B, " +
         std::to_string(m.layers) + " layers, " + std::to_string(m.heads) + "/" + std::to_string(m.kv_heads) +
         " heads of " + std::to_string(m.head_dim) + ", KV " + prediction_number(m.kv_bytes) + " B";
}

struct Worked {
  double flops, bytes, weights, kv;
};

inline Worked worked(const ServingModel& m, int64_t batch, int64_t context) {
  const double B = double(batch), L = double(context);
  const double attention = 4.0 * L * double(m.head_dim) * double(m.heads) * double(m.layers);
  const double kv = 2.0 * double(m.layers) * double(m.kv_heads) * double(m.head_dim) * m.kv_bytes * L;
  return {B * (2.0 * m.parameters + attention), m.parameters * m.weight_bytes + B * kv, m.parameters * m.weight_bytes, kv};
}

using AiQuestion = std::function<double(const ServingModel&, int64_t batch, int64_t context)>;

/// P7.1: B·(2·P + 4·L·d·heads·layers) / (P·e_w + B·2·layers·kv_heads·d·e_kv·L).
inline ::testing::AssertionResult check_decode_step_ai(const AiQuestion& predict) {
  SeededRng rng;
  std::vector<Prediction> predictions;
  for (const ServingModel& m : models(rng))
    for (int64_t b : {int64_t{1}, int64_t{16}, rng.integer(2, 512)}) {
      const int64_t L = m.parameters == 100.1e6 ? 512 : rng.integer(1, 32768);
      const Worked w = worked(m, b, L);
      const double expected = w.flops / w.bytes;
      predictions.push_back(
          {model_inputs(m) + "; batch " + std::to_string(b) + " × " + std::to_string(L) + " tokens", expected,
           "FLOPs B·(2·P + 4·L·d·heads·layers) = " + prediction_number(w.flops) + " over bytes weights " +
               prediction_number(w.weights) + " + B · KV " + prediction_number(w.kv) + " = " + prediction_number(w.bytes),
           predict(m, b, L),
           {{"the weights read once per sequence (no sharing in the batch)",
             w.flops / (double(b) * (w.weights + w.kv))},
            {"the weights alone (KV forgotten)", w.flops / w.weights},
            {"decode attention's AI ≈ 1 (the whole step is not only attention)",
             4.0 * double(L) * double(m.head_dim) * double(m.heads) / (2.0 * double(L) * double(m.head_dim) *
                                                                         double(m.kv_heads) * m.kv_bytes)},
            {"forgetting the ×2 for K and V", w.flops / (w.weights + double(b) * w.kv / 2.0)}}});
    }
  return predictions_match("P7.1 predict_decode_step_ai (FLOP/byte)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

using TokensQuestion =
    std::function<double(const ServingModel&, int64_t batch, int64_t context, double peak_gflops, double bandwidth_gbs)>;

/// P7.2: B / max(FLOPs / peak, bytes / bandwidth).
inline ::testing::AssertionResult check_decode_tokens_per_second(const TokensQuestion& predict) {
  SeededRng rng;
  struct Machine {
    double peak, bw;
  };
  // This CPU (80.5 GFLOP/s FMA, 18.4 GB/s read), an A100 40GB, an H100, and a fresh one.
  const std::vector<Machine> machines = {{80.5, 18.4}, {312000.0, 1555.0}, {989000.0, 3350.0},
                                         {rng.uniform(50.0f, 1e6f), rng.uniform(10.0f, 5000.0f)}};
  std::vector<Prediction> predictions;
  int i = 0;
  for (const ServingModel& m : models(rng)) {
    const Machine& mc = machines[size_t(i++) % machines.size()];
    for (int64_t b : {int64_t{1}, int64_t{64}, rng.integer(2, 256)}) {
      const int64_t L = m.parameters == 100.1e6 ? 512 : rng.integer(1, 16384);
      const Worked w = worked(m, b, L);
      const double compute_s = w.flops / (mc.peak * 1e9), memory_s = w.bytes / (mc.bw * 1e9);
      const double expected = double(b) / std::max(compute_s, memory_s);
      predictions.push_back(
          {model_inputs(m) + "; batch " + std::to_string(b) + " × " + std::to_string(L) + " tokens; " +
               prediction_number(mc.peak) + " GFLOP/s, " + prediction_number(mc.bw) + " GB/s",
           expected,
           "batch / max(compute " + prediction_number(compute_s * 1e3) + " ms, memory " +
               prediction_number(memory_s * 1e3) + " ms) — " + (compute_s > memory_s ? "compute" : "memory") + "-bound",
           predict(m, b, L, mc.peak, mc.bw),
           {{"the memory time alone (ignoring the compute roof)", double(b) / memory_s},
            {"the compute time alone", double(b) / compute_s},
            {"one token per step instead of one per sequence", 1.0 / std::max(compute_s, memory_s)},
            {"the weights read once per sequence",
             double(b) / std::max(compute_s, double(b) * (w.weights + w.kv) / (mc.bw * 1e9))}}});
    }
  }
  return predictions_match("P7.2 predict_decode_tokens_per_second (tokens/s)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

using CrossoverQuestion = std::function<double(const ServingModel&, int64_t context)>;

/// P7.3: P·e_w / (2·layers·kv_heads·d·e_kv·L).
inline ::testing::AssertionResult check_kv_equals_weights_batch(const CrossoverQuestion& predict) {
  SeededRng rng;
  std::vector<Prediction> predictions;
  for (const ServingModel& m : models(rng))
    for (int64_t L : {int64_t{512}, int64_t{2048}, rng.integer(1, 65536)}) {
      const Worked w = worked(m, 1, L);
      const double expected = w.weights / w.kv;
      predictions.push_back({model_inputs(m) + "; context " + std::to_string(L), expected,
                             "weights " + prediction_number(w.weights) + " B / one sequence's KV " +
                                 prediction_number(w.kv) + " B",
                             predict(m, L),
                             {{"forgetting the ×2 for K and V", 2.0 * expected},
                              {"the parameter count instead of the weight bytes", m.parameters / w.kv},
                              {"the KV of one token instead of the whole context", expected * double(L)}}});
    }
  return predictions_match("P7.3 predict_kv_equals_weights_batch (sequences)", predictions, 0.01, 0.0,
                           "chapters/03-kv-cache-decode/README.md §7 (batching shares the weights but not the KV) and " +
                               std::string(kLesson),
                           seed_note(rng.seed()));
}

}  // namespace inferlab::testing::ch07
