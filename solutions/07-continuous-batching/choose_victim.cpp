// Exercise 7.2 — the preemption victim: a straightforward answer. See
// exercises/07-continuous-batching/ch07.h.
#include <span>

#include "07-continuous-batching/ch07.h"
#include "common/check.h"

namespace inferlab::student {

int64_t student_choose_victim(std::span<const VictimCandidate> running) {
  // ---- given: the check ----
  require(!running.empty(), "running.size()", 0, "must be > 0: there is no one to preempt");

  // "Arrived later" is the order; on equal arrivals the larger id counts as later. num_computed
  // is deliberately ignored: the newest request loses its place, whatever recomputing it costs.
  const auto later = [](const VictimCandidate& a, const VictimCandidate& b) {
    return a.arrival != b.arrival ? a.arrival > b.arrival : a.id > b.id;
  };
  int64_t victim = 0;
  for (int64_t i = 1; i < int64_t(running.size()); ++i)
    if (later(running[size_t(i)], running[size_t(victim)])) victim = i;
  return victim;
}

}  // namespace inferlab::student
