// Predictions P12.1–P12.5 — straightforward answers. See exercises/12-speculative-decoding/predictions.h.
#include "12-speculative-decoding/predictions.h"

#include <algorithm>
#include <cmath>

namespace inferlab::student {

double predict_tokens_per_step(double alpha, int64_t gamma) {
  // The step gets past guess k with probability α^k (k = 0 … γ): 1 + α + … + α^γ.
  double tokens = 0.0, reach = 1.0;
  for (int64_t k = 0; k <= gamma; ++k, reach *= alpha) tokens += reach;
  return tokens;
}

double predict_speedup(double alpha, int64_t gamma, double step_time_one, double draft_time, double step_time_verify) {
  // (E tokens per speculative step) / (1 token per plain step), each over its time.
  return predict_tokens_per_step(alpha, gamma) * step_time_one / (double(gamma) * draft_time + step_time_verify);
}

double predict_guess_acceptance(std::span<const double> p, int32_t guess) {
  return std::min(1.0, p[size_t(guess)] / 1.0);  // q(guess) = 1
}

double predict_acceptance_rate(std::span<const double> p, std::span<const double> q) {
  double alpha = 0.0;  // Σ q(t) · min(1, p(t)/q(t)) = Σ min(p(t), q(t))
  for (size_t t = 0; t < p.size(); ++t) alpha += std::min(p[t], q[t]);
  return alpha;
}

bool predict_greedy_speculation_changes_output() {
  return false;  // every emitted token is the target's argmax given the tokens before it
}

}  // namespace inferlab::student
