#pragma once
// Chapter 10 prediction questions (exercises/10-parallelism/predictions.h), checked against values
// worked out here from each scenario's ingredients, one term at a time (never by a formula shared
// with the solution; the pipeline's bubble by drawing its schedule slot by slot, the GQA rule
// checked against the lab's tensor_split() as well): the graded tests (test_predictions.cpp) pass
// the student's functions, tests/wrong/wrong_predictions.cpp passes the classic wrong answers and
// requires each to be rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "10-parallelism/predictions.h"
#include "runtime/parallel/tensor_parallel.h"
#include "tests/support/prediction_check.h"
#include "tests/support/seeded.h"

namespace inferlab::testing::ch10 {

inline const char* kLesson =
    "chapters/10-parallelism/README.md (the split drawn, \"Predict first: the bytes a step sends\", the decode step "
    "on GPUs projected, GQA's rule, pipeline parallelism's bubble) and the worked examples of "
    "exercises/10-parallelism/predictions.h";

/// A fresh real number in [lo, hi), log-uniform (sizes and rates span decades).
inline double log_uniform(SeededRng& rng, double lo, double hi) {
  return lo * std::pow(hi / lo, std::uniform_real_distribution<double>(0.0, 1.0)(rng.engine()));
}

// ==== P10.1 the pipeline bubble ===============================================================

using BubbleQuestion = std::function<double(int64_t stages, int64_t micro_batches)>;

/// GPipe's forward schedule drawn slot by slot: micro-batch j runs on stage s in slot j + s; the
/// step lasts until the last micro-batch leaves the last stage. The idle slots of one stage over
/// the step's slots.
inline double drawn_bubble(int64_t stages, int64_t micro_batches) {
  int64_t slots = 0, busy_on_stage_0 = 0;
  for (int64_t j = 0; j < micro_batches; ++j)
    for (int64_t s = 0; s < stages; ++s) {
      slots = std::max(slots, j + s + 1);
      if (s == 0) ++busy_on_stage_0;
    }
  return double(slots - busy_on_stage_0) / double(slots);
}

/// P10.1: (p − 1) / (m + p − 1), by the drawn schedule.
inline ::testing::AssertionResult check_pipeline_bubble(const BubbleQuestion& predict) {
  SeededRng rng;
  std::vector<std::pair<int64_t, int64_t>> scenarios = {{2, 2}, {4, 1}, {1, 8}, {4, 16}, {8, 3}, {3, 4}};
  for (int i = 0; i < 3; ++i) scenarios.push_back({rng.integer(2, 16), rng.integer(1, 64)});
  std::vector<Prediction> predictions;
  for (const auto& [p, m] : scenarios) {
    const double expected = drawn_bubble(p, m);
    const double pd = double(p), md = double(m);
    predictions.push_back(
        {std::to_string(p) + " stages, " + std::to_string(m) + " micro-batches", expected,
         "the step lasts m + p − 1 = " + std::to_string(m + p - 1) + " slots, each stage works m = " +
             std::to_string(m) + " of them: " + std::to_string(p - 1) + " / " + std::to_string(m + p - 1),
         predict(p, m),
         {{"(p − 1) / (m + p), one slot too many in the step", (pd - 1.0) / (md + pd)},
          {"(p − 1) / m, the idle time over the working time (Megatron's ratio) instead of over the step",
           (pd - 1.0) / md},
          {"1 / m", 1.0 / md},
          {"(p − 1) / p, the micro-batches forgotten", (pd - 1.0) / pd},
          {"the working share m / (m + p − 1) instead of the idle one", md / (md + pd - 1.0)}}});
  }
  return predictions_match("P10.1 predict_pipeline_bubble (a fraction of the step)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

// ==== P10.2 the all-reduce payload a token a layer ============================================

using PayloadQuestion = std::function<double(int64_t dim, int64_t bytes_per_element)>;

/// P10.2: two all-reduces a layer (after W_o, after W_down), each of one token's dim activations.
inline ::testing::AssertionResult check_allreduce_payload(const PayloadQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    std::string name;
    int64_t dim, bytes;
  };
  std::vector<Scenario> scenarios = {{"SmolLM2, fp32 activations", 576, 4},
                                     {"random:bench (768 wide), fp32", 768, 4},
                                     {"Llama-2-70B's shape, fp16", 8192, 2},
                                     {"an odd width, fp32", 1000, 4}};
  for (int i = 0; i < 3; ++i) scenarios.push_back({"fresh scenario " + std::to_string(i + 1), rng.integer(64, 16384), rng.integer(1, 2) * 2});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double one = double(s.dim) * double(s.bytes);  // one all-reduce of one token
    const double expected = one + one;                    // W_o's, then W_down's
    predictions.push_back({s.name + ": dim " + std::to_string(s.dim) + ", " + std::to_string(s.bytes) + " bytes an element",
                           expected,
                           "2 all-reduces × " + std::to_string(s.dim) + " × " + std::to_string(s.bytes) + " bytes",
                           predict(s.dim, s.bytes),
                           {{"one all-reduce a layer (there are two: after W_o and after W_down)", one},
                            {"elements instead of bytes", 2.0 * double(s.dim)},
                            {"bits instead of bytes", 8.0 * expected}}});
  }
  return predictions_match("P10.2 predict_allreduce_bytes_per_token_layer (bytes)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

// ==== P10.3 the bytes a rank sends in a ring all-reduce =======================================

using RingBytesQuestion = std::function<double(double message_bytes, int64_t ranks)>;

/// P10.3: 2 (p − 1) steps of one chunk of n / p bytes.
inline ::testing::AssertionResult check_ring_bytes(const RingBytesQuestion& predict) {
  SeededRng rng;
  std::vector<std::pair<double, int64_t>> scenarios = {{6144.0, 2}, {4608.0, 3}, {4.0 * 65537, 5}, {1e9, 8}, {1e6, 64}};
  for (int i = 0; i < 3; ++i) scenarios.push_back({std::round(log_uniform(rng, 1e3, 1e10)), rng.integer(2, 128)});
  std::vector<Prediction> predictions;
  for (const auto& [n, p] : scenarios) {
    const double chunk = n / double(p);
    double sent = 0.0;
    for (int64_t step = 0; step < 2 * (p - 1); ++step) sent += chunk;  // reduce-scatter, then all-gather
    predictions.push_back({prediction_number(n) + " bytes over " + std::to_string(p) + " ranks", sent,
                           "2 (p − 1) = " + std::to_string(2 * (p - 1)) + " steps × a chunk of " +
                               prediction_number(chunk) + " bytes",
                           predict(n, p),
                           {{"the reduce-scatter alone ((p − 1)/p · n)", sent / 2.0},
                            {"the whole message every step (2 (p − 1) · n)", 2.0 * double(p - 1) * n},
                            {"the message once (n)", n},
                            {"what the root of a gather-and-broadcast sends ((p − 1) · n)", double(p - 1) * n}}});
  }
  return predictions_match("P10.3 predict_ring_bytes_sent_per_rank (bytes)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

// ==== P10.4 and P10.5 the tensor-parallel decode step =========================================

/// One model on one kind of device and link (the lesson's table (c) and fresh ones).
struct StepScenario {
  std::string name;
  double weight_bytes;
  int64_t ranks;
  double bandwidth_gbs;
  int64_t layers;
  double latency_seconds;
};

inline std::vector<StepScenario> step_scenarios(SeededRng& rng) {
  std::vector<StepScenario> s = {
      {"Llama-2-70B's shape, fp16, 8 H100s over NVLink", 137.4e9, 8, 3350.0, 80, 6.8e-6},
      {"Llama-2-70B's shape, fp16, 2 H100s over NVLink", 137.4e9, 2, 3350.0, 80, 6.8e-6},
      {"Llama-2-70B's shape, 8 GPUs at PCIe latency", 137.4e9, 8, 3350.0, 80, 42e-6},
      {"SmolLM2-135M, fp16, 3 H100s over NVLink", 269e6, 3, 3350.0, 30, 6.8e-6},
      {"SmolLM2-135M on one H100 (not split)", 269e6, 1, 3350.0, 30, 6.8e-6},
      {"this machine's 100 M model in Q4_1, 2 ranks over shared memory", 62.6e6, 2, 33.5, 12, 0.43e-6}};
  for (int i = 0; i < 3; ++i)
    s.push_back({"fresh scenario " + std::to_string(i + 1), log_uniform(rng, 1e8, 1e12), rng.integer(2, 16),
                 log_uniform(rng, 20.0, 8000.0), rng.integer(4, 128), log_uniform(rng, 1e-7, 1e-4)});
  return s;
}

inline std::string show_step(const StepScenario& s) {
  return s.name + ": " + prediction_number(s.weight_bytes) + " B of weights, " + std::to_string(s.ranks) +
         " ranks, " + prediction_number(s.bandwidth_gbs) + " GB/s, " + std::to_string(s.layers) + " layers, " +
         prediction_number(s.latency_seconds * 1e6) + " µs an all-reduce";
}

/// The step's two terms, worked out: a rank's read of its share, and the all-reduces (none on one rank).
struct StepTerms {
  double read, collectives;
};
inline StepTerms step_terms(const StepScenario& s, int64_t ranks) {
  const double share = s.weight_bytes / double(ranks);
  const double read = share / (s.bandwidth_gbs * 1e9);
  const int64_t all_reduces = ranks == 1 ? 0 : 2 * s.layers;
  return {read, double(all_reduces) * s.latency_seconds};
}

using StepQuestion = std::function<double(double weight_bytes, int64_t ranks, double bandwidth_gbs, int64_t layers,
                                          double allreduce_latency_seconds)>;

/// P10.4: weights / (p · bandwidth) + 2 · layers · latency (no all-reduce on one rank).
inline ::testing::AssertionResult check_tp_step_seconds(const StepQuestion& predict) {
  SeededRng rng;
  std::vector<Prediction> predictions;
  for (const StepScenario& s : step_scenarios(rng)) {
    const StepTerms t = step_terms(s, s.ranks);
    const double expected = t.read + t.collectives;
    const double p = double(s.ranks), all = s.weight_bytes / (s.bandwidth_gbs * 1e9);
    const double latency_term = 2.0 * double(s.layers) * s.latency_seconds;
    predictions.push_back(
        {show_step(s), expected,
         "read " + prediction_number(t.read * 1e3) + " ms + all-reduces " + prediction_number(t.collectives * 1e3) +
             " ms",
         predict(s.weight_bytes, s.ranks, s.bandwidth_gbs, s.layers, s.latency_seconds),
         {{"the whole model read by each rank (each reads only its 1/p)", all + t.collectives},
          {"one all-reduce a layer (there are two)", t.read + t.collectives / 2.0},
          {"the all-reduces forgotten", t.read},
          {"all-reduces on one rank too (a model that is not split makes none)", t.read + latency_term},
          {"the latency paid p times an all-reduce", t.read + p * t.collectives},
          {"milliseconds instead of seconds", 1e3 * expected}}});
  }
  return predictions_match("P10.4 predict_tp_decode_step_seconds (seconds)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

/// P10.5: one device's step over the split one's.
inline ::testing::AssertionResult check_tp_speedup(const StepQuestion& predict) {
  SeededRng rng;
  std::vector<Prediction> predictions;
  for (const StepScenario& s : step_scenarios(rng)) {
    const StepTerms one = step_terms(s, 1), split = step_terms(s, s.ranks);
    const double expected = (one.read + one.collectives) / (split.read + split.collectives);
    const double with_latency_on_one = (one.read + 2.0 * double(s.layers) * s.latency_seconds) /
                                       (split.read + split.collectives);
    predictions.push_back({show_step(s), expected,
                           prediction_number((one.read + one.collectives) * 1e3) + " ms / " +
                               prediction_number((split.read + split.collectives) * 1e3) + " ms",
                           predict(s.weight_bytes, s.ranks, s.bandwidth_gbs, s.layers, s.latency_seconds),
                           {{"the ideal p (the all-reduces cost nothing)", double(s.ranks)},
                            {"the split step over the whole one (upside down)", 1.0 / expected},
                            {"all-reduces on one device too", with_latency_on_one}}});
  }
  return predictions_match("P10.5 predict_tp_speedup (×)", predictions, 0.01, 0.0, kLesson, seed_note(rng.seed()));
}

// ==== P10.6 GQA's rule ========================================================================

using ReplicasQuestion = std::function<int64_t(int64_t n_heads, int64_t n_kv_heads, int64_t ranks)>;

/// The lab's answer: tensor_split()'s kv_replicas for a model of these heads (hidden width a
/// multiple of ranks, so only the heads decide), 0 when it refuses.
inline int64_t lab_kv_replicas(int64_t n_heads, int64_t n_kv_heads, int64_t ranks) {
  model::LlamaConfig c;
  c.n_heads = n_heads, c.n_kv_heads = n_kv_heads, c.head_dim_size = 64, c.dim = 64 * n_heads;
  c.hidden_dim = 256 * ranks, c.n_layers = 1, c.vocab_size = 1000, c.max_seq_len = 64;
  try {
    return parallel::tensor_split(c, 0, int(ranks)).kv_replicas;
  } catch (const std::invalid_argument&) {
    return 0;
  }
}

/// P10.6: query heads must split; KV heads split (p ≤ G, p | G) or replicated (p > G, G | p).
inline ::testing::AssertionResult check_kv_replicas(const ReplicasQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    int64_t heads, kv, ranks;
  };
  std::vector<Scenario> scenarios = {{9, 3, 2},  {9, 3, 3},  {8, 2, 4},  {8, 4, 2},  {8, 4, 4},   {8, 1, 8},
                                     {16, 2, 8}, {12, 4, 8}, {32, 8, 16}, {8, 8, 3}, {24, 8, 12}, {6, 3, 6}};
  for (int i = 0; i < 4; ++i) {
    const int64_t kv = int64_t(1) << rng.integer(0, 3), group = rng.integer(1, 4);
    scenarios.push_back({kv * group, kv, rng.integer(1, 16)});
  }
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const int64_t H = s.heads, G = s.kv, p = s.ranks;
    int64_t expected = 0;
    std::string working;
    if (H % p != 0) {
      working = std::to_string(p) + " ranks do not divide " + std::to_string(H) + " query heads: no split";
    } else if (p <= G) {
      expected = G % p == 0 ? 1 : 0;
      working = std::to_string(p) + " ≤ " + std::to_string(G) + " KV heads: " +
                (expected ? "split, " + std::to_string(G / p) + " a rank" : std::to_string(p) + " ∤ " + std::to_string(G));
    } else {
      expected = p % G == 0 ? p / G : 0;
      working = std::to_string(p) + " > " + std::to_string(G) + " KV heads: " +
                (expected ? "each replicated on " + std::to_string(p) + " / " + std::to_string(G) + " ranks"
                          : std::to_string(G) + " ∤ " + std::to_string(p));
    }
    if (const int64_t lab = lab_kv_replicas(H, G, p); lab != expected)
      return ::testing::AssertionFailure() << "P10.6: the lab's tensor_split() gives " << lab << " for " << H << " / "
                                           << G << " heads over " << p << " ranks, the check " << expected
                                           << " (a lab bug)";
    const double never = -1.0;  // a mistake that answers like the contract here is skipped by predictions_match
    predictions.push_back(
        {std::to_string(H) + " query / " + std::to_string(G) + " KV heads over " + std::to_string(p) + " ranks",
         double(expected), working, double(predict(H, G, p)),
         {{"the query heads forgotten (they must split evenly too)",
           p <= G ? (G % p == 0 ? 1.0 : 0.0) : (p % G == 0 ? double(p / G) : 0.0)},
          {"no replication (p must divide the KV heads)", H % p == 0 && G % p == 0 ? 1.0 : 0.0},
          {"the ranks for the replicas", H % p == 0 && p > G && p % G == 0 ? double(p) : never},
          {"the KV heads a rank holds instead of the ranks a KV head is on",
           H % p == 0 && p <= G && G % p == 0 ? double(G / p) : never}}});
  }
  return predictions_match("P10.6 predict_kv_replicas (ranks a KV head is on; 0: no split)", predictions, 0.0, 1e-9,
                           kLesson, seed_note(rng.seed()));
}

}  // namespace inferlab::testing::ch10
