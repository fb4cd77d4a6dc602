// Exercise 7.3 — nucleus (top-p) sampling, deterministic given u. See ch07.h for the task and a
// worked example.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <vector>

#include "07-continuous-batching/ch07.h"
#include "common/check.h"

namespace inferlab::student {

int32_t student_sample_top_p(std::span<const float> logits, float temperature, float top_p, double u) {
  // ---- given: the checks ----
  require(!logits.empty(), "logits.size()", 0, "must be > 0");
  require(temperature > 0.0f, "temperature", temperature, "must be > 0 to sample (0 is greedy)");
  require(top_p > 0.0f && top_p <= 1.0f, "top_p", top_p, "must be in (0, 1]");
  require(u >= 0.0 && u < 1.0, "u", u, "must be in [0, 1)");

  throw NotImplemented("student_sample_top_p");  // TODO(student): delete this line once written

  // TODO(student):
  //   1. p[i] = exp((double(logits[i]) − max) / temperature), in double, max = the largest logit;
  //      and their total (divide by it, or carry it along). (about 5 lines)
  //   2. the token ids 0 … V−1 (std::iota) sorted by decreasing p, equal p keeping the smaller
  //      id first (std::stable_sort, or a comparator that breaks ties by id). (about 3 lines)
  //   3. walk the sorted ids adding p / total until the sum is ≥ top_p: the tokens walked so far
  //      (the last one included) are the nucleus, their sum is `mass`. Stop at the end of the
  //      list too (top_p = 1 may never be reached exactly). (about 5 lines)
  //   4. walk the nucleus again: return the first id whose cumulative p / total exceeds u · mass;
  //      after the loop (rounding), return the nucleus's last id. (about 6 lines)
  return 0;
}

}  // namespace inferlab::student
