// Exercise 7.2 — the preemption victim: the latest arrival, ties to the larger id. See ch07.h for
// the task and why.
#include <span>

#include "07-continuous-batching/ch07.h"
#include "common/check.h"

namespace inferlab::student {

int64_t student_choose_victim(std::span<const VictimCandidate> running) {
  // ---- given: the check ----
  require(!running.empty(), "running.size()", 0, "must be > 0: there is no one to preempt");

  throw NotImplemented("student_choose_victim");  // TODO(student): delete this line once written

  // TODO(student): one pass keeping the index of the victim so far (start with 0): candidate i
  // replaces it when it arrived later, or at the same time with a larger id. Return the index,
  // not the id; num_computed plays no part. (roughly 6 lines)
  return 0;
}

}  // namespace inferlab::student
