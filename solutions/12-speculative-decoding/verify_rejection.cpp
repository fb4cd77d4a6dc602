// Exercise 12.2 — the rejection sampler: a straightforward answer (the engine's own is
// runtime/engine/speculative.h). See exercises/12-speculative-decoding/ch12.h.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "12-speculative-decoding/ch12.h"
#include "common/check.h"

namespace inferlab::student {
namespace {

// The inverse of w's cumulative distribution in id order (zero weights never chosen).
int32_t draw(std::span<const double> weights, double u) {
  double total = 0.0;
  int32_t last_positive = -1;
  for (size_t t = 0; t < weights.size(); ++t) {
    total += weights[t];
    if (weights[t] > 0.0) last_positive = int32_t(t);
  }
  const double target = u * total;
  double running = 0.0;
  for (size_t t = 0; t < weights.size(); ++t) {
    running += weights[t];
    if (weights[t] > 0.0 && running > target) return int32_t(t);
  }
  return last_positive;  // u · total at the very top, lost to rounding
}

}  // namespace

Verification verify_rejection(std::span<const std::vector<double>> p, std::span<const std::vector<double>> q,
                              std::span<const int32_t> draft, uint64_t& rng_state) {
  // ---- given: the checks ----
  const size_t gamma = draft.size();
  require(p.size() == gamma + 1, "p.size()", p.size(), "must be draft.size() + 1 = " + std::to_string(gamma + 1));
  require(q.size() == gamma, "q.size()", q.size(), "must be draft.size() = " + std::to_string(gamma));
  const size_t vocab = p[0].size();
  require(vocab >= 1, "p[0].size()", vocab, "must be ≥ 1");
  for (size_t i = 0; i < p.size(); ++i)
    require(p[i].size() == vocab, "p[" + std::to_string(i) + "].size()", p[i].size(),
            "must be p[0].size() = " + std::to_string(vocab));
  for (size_t i = 0; i < gamma; ++i) {
    const int32_t d = draft[i];
    require(d >= 0 && size_t(d) < vocab, "draft[" + std::to_string(i) + "]", d,
            "must be a token id in [0, " + std::to_string(vocab) + ")");
    require(q[i].empty() || q[i].size() == vocab, "q[" + std::to_string(i) + "].size()", q[i].size(),
            "must be 0 (a deterministic guess) or p[0].size() = " + std::to_string(vocab));
    require(q[i].empty() || q[i][size_t(d)] > 0.0, "q[" + std::to_string(i) + "][draft]",
            q[i].empty() ? 1.0 : q[i][size_t(d)], "must be > 0: the guess could not have been drawn");
  }

  Verification out;
  for (size_t i = 0; i < gamma; ++i) {
    const size_t guess = size_t(draft[i]);
    const bool deterministic = q[i].empty();
    const double q_guess = deterministic ? 1.0 : q[i][guess];
    if (next_uniform(rng_state) * q_guess < p[i][guess]) {  // accepted with probability min(1, p/q)
      out.tokens.push_back(draft[i]);
      ++out.accepted;
      continue;
    }
    // Rejected: the replacement comes from what p has beyond q.
    std::vector<double> residual(vocab);
    double residual_sum = 0.0;
    for (size_t t = 0; t < vocab; ++t) {
      const double q_t = deterministic ? (t == guess ? 1.0 : 0.0) : q[i][t];
      residual[t] = std::max(0.0, p[i][t] - q_t);
      residual_sum += residual[t];
    }
    const std::span<const double> from = residual_sum > 0.0 ? std::span<const double>(residual) : p[i];
    out.tokens.push_back(draw(from, next_uniform(rng_state)));
    return out;
  }
  out.tokens.push_back(draw(p[gamma], next_uniform(rng_state)));  // every guess accepted: the bonus
  return out;
}

}  // namespace inferlab::student
