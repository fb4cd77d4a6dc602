#pragma once
// Chapter 09 prediction questions (exercises/09-serving/predictions.h), checked against values
// worked out here from each scenario's ingredients, one term at a time (never by a formula
// shared with the solution): the graded tests (test_predictions.cpp) pass the student's
// functions, tests/wrong/wrong_predictions.cpp passes the classic wrong answers and requires each
// to be rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "09-serving/predictions.h"
#include "tests/support/prediction_check.h"
#include "tests/support/seeded.h"

namespace inferlab::testing::ch09 {

inline const char* kLesson =
    "chapters/09-serving/README.md (a server under load: TPOT, saturation, TTFT, Little's law) and the worked "
    "examples of exercises/09-serving/predictions.h";

/// A fresh real number in [lo, hi), log-uniform (rates and times span decades).
inline double log_uniform(SeededRng& rng, double lo, double hi) {
  return lo * std::pow(hi / lo, std::uniform_real_distribution<double>(0.0, 1.0)(rng.engine()));
}

// ==== P9.1 TPOT at a batch ====================================================================

struct TpotScenario {
  std::string name;
  double weight_bytes, kv_bytes_per_token;
  int64_t batch, context;
  double bandwidth_gbs;
};

/// SmolLM2 on this machine (the header's worked example), one stream at an empty cache, a
/// Llama-2-7B-like model in fp16 on an H100, a long-context batch whose KV dominates, then fresh
/// ones.
inline std::vector<TpotScenario> tpot_scenarios(SeededRng& rng) {
  std::vector<TpotScenario> s = {
      {"SmolLM2 as shipped, fp32 KV, this machine", 96.6e6, 2.0 * 30 * 3 * 64 * 4, 8, 512, 33.5},
      {"SmolLM2, one stream, one cached token", 96.6e6, 2.0 * 30 * 3 * 64 * 4, 1, 1, 33.5},
      {"Llama-2-7B-like, fp16, H100", 13.5e9, 2.0 * 32 * 32 * 128 * 2, 16, 4096, 3350.0},
      {"a long-context batch (KV ≫ weights)", 2.0e9, 131072.0, 64, 32768, 4800.0}};
  for (int i = 0; i < 3; ++i)
    s.push_back({"fresh scenario " + std::to_string(i + 1), log_uniform(rng, 1e7, 1e11), log_uniform(rng, 1e3, 1e6),
                 rng.integer(1, 256), rng.integer(1, 65536), log_uniform(rng, 5.0, 8000.0)});
  return s;
}

using TpotQuestion = std::function<double(double weight_bytes, double kv_bytes_per_token, int64_t batch,
                                          int64_t context, double bandwidth_gbs)>;

/// P9.1: (weights + batch · context · KV a token) / bandwidth.
inline ::testing::AssertionResult check_tpot_seconds(const TpotQuestion& predict) {
  SeededRng rng;
  std::vector<Prediction> predictions;
  for (const TpotScenario& s : tpot_scenarios(rng)) {
    const double kv_one = double(s.context) * s.kv_bytes_per_token;  // one sequence's cache
    const double kv_all = kv_one * double(s.batch);
    const double bytes_per_second = s.bandwidth_gbs * 1e9;
    const double expected = (s.weight_bytes + kv_all) / bytes_per_second;
    predictions.push_back(
        {s.name + ": weights " + prediction_number(s.weight_bytes) + " B, KV " +
             prediction_number(s.kv_bytes_per_token) + " B a token, batch " + std::to_string(s.batch) + ", context " +
             std::to_string(s.context) + ", " + prediction_number(s.bandwidth_gbs) + " GB/s",
         expected,
         "(weights " + prediction_number(s.weight_bytes) + " B + KV " + prediction_number(kv_all) + " B) / " +
             prediction_number(bytes_per_second) + " B/s",
         predict(s.weight_bytes, s.kv_bytes_per_token, s.batch, s.context, s.bandwidth_gbs),
         {{"the weights alone (every sequence's KV cache is read too)", s.weight_bytes / bytes_per_second},
          {"the KV cache of one sequence instead of the batch's", (s.weight_bytes + kv_one) / bytes_per_second},
          {"the weights read once per sequence (a step reads them once for the whole batch)",
           (double(s.batch) * s.weight_bytes + kv_all) / bytes_per_second},
          {"GiB/s for GB/s (2^30 bytes)", expected / 1.073741824},
          {"milliseconds instead of seconds", 1e3 * expected},
          {"the step's time divided by the batch (each stream waits a whole step per token)",
           expected / double(s.batch)}}});
  }
  return predictions_match("P9.1 predict_tpot_seconds (seconds)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

// ==== P9.2 the saturation rate ================================================================

using SaturationQuestion = std::function<double(double step_seconds, int64_t max_batch, int64_t output_tokens)>;

/// P9.2: max_batch places, each held for output_tokens steps.
inline ::testing::AssertionResult check_saturation_rate(const SaturationQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    double step_seconds;
    int64_t max_batch, output_tokens;
  };
  std::vector<Scenario> scenarios = {{0.00852, 8, 128}, {0.030, 64, 1000}, {0.0085, 1, 1}, {0.012, 256, 37}};
  for (int i = 0; i < 3; ++i)
    scenarios.push_back({log_uniform(rng, 1e-3, 0.5), rng.integer(1, 512), rng.integer(1, 4096)});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double seconds_held = double(s.output_tokens) * s.step_seconds;  // one request's place
    const double expected = double(s.max_batch) / seconds_held;
    predictions.push_back(
        {"step " + prediction_number(s.step_seconds) + " s, max batch " + std::to_string(s.max_batch) + ", " +
             std::to_string(s.output_tokens) + " output tokens",
         expected,
         std::to_string(s.max_batch) + " places / (" + std::to_string(s.output_tokens) + " steps × " +
             prediction_number(s.step_seconds) + " s = " + prediction_number(seconds_held) + " s a request)",
         predict(s.step_seconds, s.max_batch, s.output_tokens),
         {{"tokens/s instead of requests/s (the batch over the step time)", double(s.max_batch) / s.step_seconds},
          {"one request at a time (the batch forgotten)", 1.0 / seconds_held}}});
  }
  return predictions_match("P9.2 predict_saturation_rate (requests/s)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

// ==== P9.3 TTFT behind a queue ================================================================

using TtftQuestion = std::function<double(int64_t requests_ahead, double completion_rate, int64_t prompt_tokens,
                                          double prefill_tokens_per_second)>;

/// P9.3: the queue's wait (ahead / rate), then the prompt's prefill.
inline ::testing::AssertionResult check_ttft_seconds(const TtftQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    int64_t ahead;
    double rate;
    int64_t prompt;
    double prefill;
  };
  std::vector<Scenario> scenarios = {
      {4, 7.34, 300, 400.0}, {0, 7.34, 300, 400.0}, {31, 2.5, 17, 250.0}, {3, 40.0, 2048, 12000.0}};
  for (int i = 0; i < 3; ++i)
    scenarios.push_back(
        {rng.integer(1, 200), log_uniform(rng, 0.05, 500.0), rng.integer(1, 8192), log_uniform(rng, 50.0, 50000.0)});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double queue = double(s.ahead) / s.rate, prefill = double(s.prompt) / s.prefill;
    predictions.push_back(
        {std::to_string(s.ahead) + " requests ahead, " + prediction_number(s.rate) + " requests/s, a " +
             std::to_string(s.prompt) + "-token prompt at " + prediction_number(s.prefill) + " prefill tokens/s",
         queue + prefill,
         "queue " + std::to_string(s.ahead) + " / " + prediction_number(s.rate) + " = " + prediction_number(queue) +
             " s + prefill " + std::to_string(s.prompt) + " / " + prediction_number(s.prefill) + " = " +
             prediction_number(prefill) + " s",
         predict(s.ahead, s.rate, s.prompt, s.prefill),
         {{"the prefill alone (the requests ahead must leave first)", prefill},
          {"the queue alone (the prompt must be prefilled before the first token)", queue},
          {"waiting for one more request than are ahead", double(s.ahead + 1) / s.rate + prefill},
          {"the requests ahead times the rate (instead of divided by it)", double(s.ahead) * s.rate + prefill}}});
  }
  return predictions_match("P9.3 predict_ttft_seconds (seconds)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

// ==== P9.4 Little's law =======================================================================

using InFlightQuestion =
    std::function<double(double arrival_rate, double ttft_seconds, double tpot_seconds, int64_t output_tokens)>;

/// P9.4: L = λ · (TTFT + (n − 1) · TPOT).
inline ::testing::AssertionResult check_requests_in_flight(const InFlightQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    double rate, ttft, tpot;
    int64_t tokens;
  };
  std::vector<Scenario> scenarios = {
      {5.0, 0.2, 0.00852, 128}, {5.0, 0.2, 0.00852, 1}, {12.0, 0.05, 0.04, 3}, {300.0, 0.8, 0.025, 512}};
  for (int i = 0; i < 3; ++i)
    scenarios.push_back(
        {log_uniform(rng, 0.1, 1000.0), log_uniform(rng, 0.01, 10.0), log_uniform(rng, 1e-3, 0.2), rng.integer(2, 12)});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    double latency = s.ttft;  // the first token at TTFT, then one TPOT for each later one
    for (int64_t token = 2; token <= s.tokens; ++token) latency += s.tpot;
    const double expected = s.rate * latency;
    predictions.push_back(
        {prediction_number(s.rate) + " requests/s, TTFT " + prediction_number(s.ttft) + " s, TPOT " +
             prediction_number(s.tpot) + " s, " + std::to_string(s.tokens) + " output tokens",
         expected,
         prediction_number(s.rate) + " requests/s × W = " + prediction_number(s.ttft) + " + " +
             std::to_string(s.tokens - 1) + " × " + prediction_number(s.tpot) + " = " + prediction_number(latency) +
             " s",
         predict(s.rate, s.ttft, s.tpot, s.tokens),
         {{"W without the TTFT (the wait for the first token counts too)", s.rate * double(s.tokens - 1) * s.tpot},
          {"n TPOTs after the first token instead of n − 1", s.rate * (s.ttft + double(s.tokens) * s.tpot)},
          {"W / λ instead of λ · W", latency / s.rate},
          {"λ / W instead of λ · W", s.rate / latency}}});
  }
  return predictions_match("P9.4 predict_requests_in_flight (requests)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

}  // namespace inferlab::testing::ch09
