#pragma once
// Chapter 12 prediction questions (exercises/12-speculative-decoding/predictions.h), checked against
// values worked out here from each scenario's ingredients (never by a formula shared with the
// solution: E by the closed form of the geometric series where the solution sums it, the rates
// token by token): the graded tests (test_predictions.cpp) pass the student's functions,
// tests/wrong/wrong_predictions.cpp passes the classic wrong answers and requires each rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "12-speculative-decoding/predictions.h"
#include "tests/support/prediction_check.h"
#include "tests/support/seeded.h"

namespace inferlab::testing::ch12 {

inline const char* kPredictLesson =
    "chapters/12-speculative-decoding/README.md (\"Predict first\", \"the rejection sampler\") and the worked "
    "examples of exercises/12-speculative-decoding/predictions.h";

/// E = (1 − α^(γ+1)) / (1 − α), γ + 1 at α = 1: Leviathan et al.'s expected tokens per step.
inline double worked_tokens_per_step(double alpha, int64_t gamma) {
  if (alpha == 1.0) return double(gamma + 1);
  return (1.0 - std::pow(alpha, double(gamma + 1))) / (1.0 - alpha);
}

// ==== P12.1 tokens per verification step =======================================================

using TokensQuestion = std::function<double(double alpha, int64_t gamma)>;

inline ::testing::AssertionResult check_tokens_per_step(const TokensQuestion& predict) {
  SeededRng rng;
  std::vector<std::pair<double, int64_t>> scenarios = {{0.6, 2}, {0.6, 4}, {0.6, 8}, {0.8, 2}, {0.8, 4},
                                                       {0.8, 8}, {0.5, 2}, {1.0, 5}, {0.0, 3}, {0.9, 0}};
  for (int i = 0; i < 3; ++i) scenarios.push_back({double(rng.integer(1, 99)) / 100.0, rng.integer(1, 12)});
  std::vector<Prediction> predictions;
  for (const auto& [alpha, gamma] : scenarios) {
    const double expected = worked_tokens_per_step(alpha, gamma);
    predictions.push_back(
        {"α = " + prediction_number(alpha) + ", γ = " + std::to_string(gamma), expected,
         alpha == 1.0 ? "every guess accepted: γ + 1 = " + std::to_string(gamma + 1)
                      : "(1 − α^(γ+1)) / (1 − α) = 1 + α + … + α^γ = " + prediction_number(expected),
         predict(alpha, gamma),
         {{"the accepted guesses only (α + … + α^γ: the target's own token forgotten)", expected - 1.0},
          {"1 + γ·α (the guesses as if each were checked whatever happened before it)", 1.0 + double(gamma) * alpha},
          {"1 / (1 − α) (unbounded γ)", alpha < 1.0 ? 1.0 / (1.0 - alpha) : 1e300},
          {"(1 − α^γ) / (1 − α) (one power short: the bonus token forgotten)",
           alpha < 1.0 ? (1.0 - std::pow(alpha, double(gamma))) / (1.0 - alpha) : double(gamma)}}});
  }
  return predictions_match("P12.1 predict_tokens_per_step (tokens)", predictions, 0.01, 0.0, kPredictLesson,
                           seed_note(rng.seed()));
}

// ==== P12.2 the speed-up =======================================================================

using SpeedupQuestion = std::function<double(double alpha, int64_t gamma, double t1, double draft, double verify)>;

inline ::testing::AssertionResult check_speedup(const SpeedupQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    std::string name;
    double alpha;
    int64_t gamma;
    double t1, draft, verify;
  };
  std::vector<Scenario> scenarios = {
      {"the worked example", 0.5, 2, 10.0, 1.0, 11.0},
      {"prompt lookup (no draft model) on this CPU", 0.8, 4, 8.0, 0.0, 9.6},
      {"a quantized self-draft, a third of the target's time", 0.7, 4, 30.0, 10.0, 33.0},
      {"a drafter that is rarely right", 0.2, 4, 8.0, 1.0, 10.0},
      {"γ = 8, verification as slow as 2 steps", 0.8, 8, 5.0, 0.5, 10.0}};
  for (int i = 0; i < 3; ++i) {
    const double t1 = double(rng.integer(2, 40));
    scenarios.push_back({"fresh scenario " + std::to_string(i + 1), double(rng.integer(10, 95)) / 100.0,
                         rng.integer(1, 8), t1, t1 * double(rng.integer(0, 50)) / 100.0,
                         t1 * double(rng.integer(100, 250)) / 100.0});
  }
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double tokens = worked_tokens_per_step(s.alpha, s.gamma);
    const double speculative_time = double(s.gamma) * s.draft + s.verify;  // one speculative step
    const double plain_time = tokens * s.t1;                                // the same tokens, one a step
    const double expected = plain_time / speculative_time;
    predictions.push_back(
        {s.name + ": α " + prediction_number(s.alpha) + ", γ " + std::to_string(s.gamma) + ", T(1) " +
             prediction_number(s.t1) + ", draft " + prediction_number(s.draft) + ", T(γ+1) " + prediction_number(s.verify),
         expected,
         prediction_number(tokens) + " tokens in γ·" + prediction_number(s.draft) + " + " + prediction_number(s.verify) +
             " = " + prediction_number(speculative_time) + " against " + prediction_number(plain_time) + " one a step",
         predict(s.alpha, s.gamma, s.t1, s.draft, s.verify),
         {{"the draft's time forgotten (E · T(1) / T(γ+1))", tokens * s.t1 / s.verify},
          {"E alone (what the steps cost forgotten)", tokens},
          {"γ + 1 tokens a step (every guess accepted)", double(s.gamma + 1) * s.t1 / speculative_time},
          {"the verification costed as γ + 1 plain steps", tokens * s.t1 / (double(s.gamma) * s.draft +
                                                                              double(s.gamma + 1) * s.t1)}}});
  }
  return predictions_match("P12.2 predict_speedup (×)", predictions, 0.01, 0.0, kPredictLesson, seed_note(rng.seed()));
}

// ==== P12.3 and P12.4 acceptance ===============================================================

/// A probability row of @p vocab tokens (from @p rng), summing to 1.
inline std::vector<double> prediction_row(Rng& rng, int64_t vocab) {
  std::vector<double> row(static_cast<size_t>(vocab));
  double total = 0.0;
  for (double& x : row) total += x = double(rng.integer(1, 100));
  for (double& x : row) x /= total;
  return row;
}

using GuessQuestion = std::function<double(std::span<const double> p, int32_t guess)>;

inline ::testing::AssertionResult check_guess_acceptance(const GuessQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    std::string name;
    std::vector<double> p;
    int32_t guess;
  };
  std::vector<Scenario> scenarios = {{"the worked example", {0.5, 0.3, 0.2}, 1},
                                     {"the target's favourite", {0.05, 0.9, 0.05}, 1},
                                     {"a token the target excludes", {0.0, 0.6, 0.4}, 0},
                                     {"a certain token", {0.0, 0.0, 1.0, 0.0}, 2}};
  for (int i = 0; i < 3; ++i) {
    const int64_t vocab = rng.integer(2, 9);
    scenarios.push_back({"fresh scenario " + std::to_string(i + 1), prediction_row(rng, vocab),
                         int32_t(rng.integer(0, vocab - 1))});
  }
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double pd = s.p[size_t(s.guess)];
    const double expected = std::min(1.0, pd / 1.0);  // min(1, p(d)/q(d)) with q(d) = 1
    const double top = *std::max_element(s.p.begin(), s.p.end());
    predictions.push_back({s.name + ": p(d) = " + prediction_number(pd), expected,
                           "min(1, p(d) / q(d)) with q(d) = 1: p(d) = " + prediction_number(expected),
                           predict(s.p, s.guess),
                           {{"always accepted (1)", 1.0},
                            {"p(d) / max p (relative to the target's favourite)", pd / top},
                            {"the rejection probability 1 − p(d)", 1.0 - pd}}});
  }
  return predictions_match("P12.3 predict_guess_acceptance (probability)", predictions, 0.01, 1e-9, kPredictLesson,
                           seed_note(rng.seed()));
}

using RateQuestion = std::function<double(std::span<const double> p, std::span<const double> q)>;

inline ::testing::AssertionResult check_acceptance_rate(const RateQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    std::string name;
    std::vector<double> p, q;
  };
  std::vector<Scenario> scenarios = {{"the worked example", {0.5, 0.3, 0.2}, {0.2, 0.6, 0.2}},
                                     {"a drafter equal to the target", {0.1, 0.2, 0.7}, {0.1, 0.2, 0.7}},
                                     {"disjoint supports", {0.5, 0.5, 0.0, 0.0}, {0.0, 0.0, 0.3, 0.7}},
                                     {"a flat drafter", {0.7, 0.1, 0.1, 0.1}, {0.25, 0.25, 0.25, 0.25}}};
  for (int i = 0; i < 3; ++i) {
    const int64_t vocab = rng.integer(2, 9);
    scenarios.push_back({"fresh scenario " + std::to_string(i + 1), prediction_row(rng, vocab), prediction_row(rng, vocab)});
  }
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    double expected = 0.0, product = 0.0, ratios = 0.0;
    for (size_t t = 0; t < s.p.size(); ++t) {
      const double accepted = s.q[t] > 0.0 ? std::min(1.0, s.p[t] / s.q[t]) : 0.0;
      expected += s.q[t] * accepted;  // P(drawn) · P(accepted | drawn)
      product += s.p[t] * s.q[t];
      ratios += accepted;
    }
    predictions.push_back({s.name, expected, "Σ q(t) · min(1, p(t)/q(t)) = Σ min(p, q) = " + prediction_number(expected),
                           predict(s.p, s.q),
                           {{"Σ p·q (accepting only when a token drawn from p equals the guess)", product},
                            {"Σ min(1, p/q) (the acceptance probabilities not weighted by q)", ratios},
                            {"1 (every guess accepted)", 1.0}}});
  }
  return predictions_match("P12.4 predict_acceptance_rate (probability)", predictions, 0.01, 1e-9, kPredictLesson,
                           seed_note(rng.seed()));
}

// ==== P12.5 greedy speculation and the output ==================================================

using GreedyQuestion = std::function<bool()>;

inline ::testing::AssertionResult check_greedy_unchanged(const GreedyQuestion& predict) {
  const std::vector<Prediction> predictions = {
      {"any drafter, any prompt", 0.0,
       "no (false): every token that comes out is the target's argmax given the tokens before it — an accepted guess "
       "equals it, the first wrong one is replaced by it",
       predict() ? 1.0 : 0.0,
       {{"true (the drafter's mistakes leaking into the output)", 1.0}}}};
  return predictions_match("P12.5 predict_greedy_speculation_changes_output (1 = true, 0 = false)", predictions, 0.0,
                           0.0, kPredictLesson, "");
}

}  // namespace inferlab::testing::ch12
