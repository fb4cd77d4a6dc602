// Predictions P12.1–P12.5 (see predictions.h): replace each NotImplemented with your answer.
#include "12-speculative-decoding/predictions.h"

#include "common/check.h"

namespace inferlab::student {

double predict_tokens_per_step(double alpha, int64_t gamma) {
  // TODO(student): the probability that the step gets past guess k, summed (a loop, or the
  // geometric series' closed form; mind α = 1) (roughly 3 lines)
  (void)alpha, (void)gamma;
  throw NotImplemented("predict_tokens_per_step");
}

double predict_speedup(double alpha, int64_t gamma, double step_time_one, double draft_time, double step_time_verify) {
  // TODO(student): tokens a second with speculation over tokens a second without (1 line)
  (void)alpha, (void)gamma, (void)step_time_one, (void)draft_time, (void)step_time_verify;
  throw NotImplemented("predict_speedup");
}

double predict_guess_acceptance(std::span<const double> p, int32_t guess) {
  // TODO(student): min(1, p/q) with q = 1 at the guess (1 line)
  (void)p, (void)guess;
  throw NotImplemented("predict_guess_acceptance");
}

double predict_acceptance_rate(std::span<const double> p, std::span<const double> q) {
  // TODO(student): Σ over tokens of P(drawn) · P(accepted | drawn) (roughly 3 lines)
  (void)p, (void)q;
  throw NotImplemented("predict_acceptance_rate");
}

bool predict_greedy_speculation_changes_output() {
  // TODO(student): true or false (1 line)
  throw NotImplemented("predict_greedy_speculation_changes_output");
}

}  // namespace inferlab::student
