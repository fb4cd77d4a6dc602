// Exercise 12.2 — the rejection sampler: accept each guess with probability min(1, p/q), replace
// the first rejected one by a draw from normalize(max(0, p − q)), add the bonus token when all are
// accepted. See ch12.h for the exact draws, the proof and a worked example.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "12-speculative-decoding/ch12.h"
#include "common/check.h"

namespace inferlab::student {

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

  throw NotImplemented("verify_rejection");  // TODO(student): delete this line once written

  // TODO(student):
  //   1. draw(w, u), a lambda or a function above: total = Σ w in id order; the first id with
  //      w > 0 whose running sum exceeds u · total; after the loop, the last id with w > 0.
  //      (about 10 lines)
  //   2. for each guess i: qd (1 for an empty row), one next_uniform(rng_state); accepted when
  //      u · qd < p[i][d]: push d, ++accepted, continue. (about 6 lines)
  //   3. rejected: the residual max(0, p[i][t] − q_t) for every t and its sum; push
  //      draw(sum > 0 ? residual : p[i], next_uniform(rng_state)) and return. (about 7 lines)
  //   4. all accepted: push draw(p[γ], next_uniform(rng_state)), the bonus token. (1 line)
  (void)rng_state;
  return {};
}

}  // namespace inferlab::student
