#include "runtime/engine/speculative.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/check.h"

namespace inferlab::engine {

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int64_t num_tokens, int64_t max_ngram,
                                   int64_t min_ngram) {
  require(num_tokens >= 0, "num_tokens", num_tokens, "must be ≥ 0");
  require(min_ngram >= 1, "min_ngram", min_ngram, "must be ≥ 1");
  require(max_ngram >= min_ngram, "max_ngram", max_ngram, "must be ≥ min_ngram = " + std::to_string(min_ngram));
  const int64_t size = int64_t(tokens.size());
  if (num_tokens == 0) return {};
  for (int64_t n = std::min(max_ngram, size - 1); n >= min_ngram; --n) {
    const auto suffix = tokens.subspan(size_t(size - n));
    for (int64_t j = size - n - 1; j >= 0; --j) {  // the most recent earlier occurrence first
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + j)) continue;
      const int64_t from = j + n, to = std::min(from + num_tokens, size);
      return {tokens.begin() + from, tokens.begin() + to};
    }
  }
  return {};
}

Verification verify_greedy(std::span<const float> target_logits, int64_t vocab, std::span<const int32_t> draft) {
  require(vocab >= 1, "vocab", vocab, "must be ≥ 1");
  const int64_t rows = int64_t(draft.size()) + 1;
  require(int64_t(target_logits.size()) == rows * vocab, "target_logits.size()", target_logits.size(),
          "must be (draft.size() + 1) · vocab = " + std::to_string(rows * vocab));
  // Every guess and every row is checked up front, also those past a rejection that verification
  // never reaches: a bad id or a NaN there is still the caller's mistake.
  for (size_t i = 0; i < draft.size(); ++i)
    require(draft[i] >= 0 && draft[i] < vocab, "draft[" + std::to_string(i) + "]", draft[i],
            "must be a token id in [0, " + std::to_string(vocab) + ")");
  for (size_t k = 0; k < target_logits.size(); ++k)
    if (std::isnan(target_logits[k]))
      require(false, "target_logits[" + std::to_string(k) + "]", target_logits[k],
              "is NaN (row " + std::to_string(int64_t(k) / vocab) + ")");
  Verification out;
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t best = greedy_token(target_logits.subspan(size_t(i * vocab), size_t(vocab)));
    out.tokens.push_back(best);
    if (i == rows - 1 || draft[size_t(i)] != best) break;  // the target's own token replaces a wrong guess
    ++out.accepted;
  }
  return out;
}

Verification verify_rejection(std::span<const std::vector<double>> p, std::span<const std::vector<double>> q,
                              std::span<const int32_t> draft, uint64_t& rng_state) {
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
    const int32_t d = draft[i];
    const double qd = q[i].empty() ? 1.0 : q[i][size_t(d)];
    const double u = next_uniform(rng_state);
    if (u * qd < p[i][size_t(d)]) {  // accepted with probability min(1, p/q)
      out.tokens.push_back(d);
      ++out.accepted;
      continue;
    }
    // Rejected: draw from what p has beyond q — normalize(max(0, p − q)).
    std::vector<double> residual(vocab);
    double mass = 0.0;
    for (size_t t = 0; t < vocab; ++t) {
      const double qt = q[i].empty() ? (t == size_t(d) ? 1.0 : 0.0) : q[i][t];
      mass += residual[t] = std::max(0.0, p[i][t] - qt);
    }
    out.tokens.push_back(sample_distribution(mass > 0.0 ? std::span<const double>(residual) : p[i],
                                             next_uniform(rng_state)));
    return out;
  }
  out.tokens.push_back(sample_distribution(p[gamma], next_uniform(rng_state)));  // the bonus token
  return out;
}

double expected_tokens_per_step(double alpha, int64_t gamma) {
  require(alpha >= 0.0 && alpha <= 1.0, "alpha", alpha, "must be in [0, 1]");
  require(gamma >= 0, "gamma", gamma, "must be ≥ 0");
  if (alpha == 1.0) return double(gamma + 1);
  return (1.0 - std::pow(alpha, double(gamma + 1))) / (1.0 - alpha);
}

}  // namespace inferlab::engine
