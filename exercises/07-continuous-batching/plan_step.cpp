// Exercise 7.1 — plan one step: decodes first, then prompt chunks, then FCFS admissions. See
// ch07.h for the task, the rules and a worked example.
#include <algorithm>
#include <string>
#include <vector>

#include "07-continuous-batching/ch07.h"
#include "common/check.h"

namespace inferlab::student {

std::vector<ScheduledChunk> student_plan_step(std::span<const SequenceDemand> running,
                                              std::span<const SequenceDemand> waiting, const StepLimits& limits) {
  // ---- given: the checks ----
  require_positive("token_budget", limits.token_budget);
  require_positive("max_seqs", limits.max_seqs);
  require_positive("chunk_size", limits.chunk_size);
  require(int64_t(running.size()) <= limits.max_seqs, "running.size()", running.size(),
          "must be ≤ max_seqs = " + std::to_string(limits.max_seqs));
  for (size_t i = 0; i < running.size(); ++i)
    require(running[i].remaining >= 1, "running[" + std::to_string(i) + "].remaining", running[i].remaining,
            "must be ≥ 1");
  for (size_t i = 0; i < waiting.size(); ++i)
    require(waiting[i].remaining >= 1, "waiting[" + std::to_string(i) + "].remaining", waiting[i].remaining,
            "must be ≥ 1");

  throw NotImplemented("student_plan_step");  // TODO(student): delete this line once written

  // TODO(student): keep `budget` = the tokens left (token_budget to start) and the plan.
  //   A helper "how many tokens does a prompt with `remaining` tokens get now?" is worth writing
  //   first: with chunked_prefill, min(remaining, chunk_size, budget); without, remaining if it
  //   is ≤ budget, else 0 (it waits). (about 4 lines)
  //   1. decodes: for each running sequence with remaining == 1, while budget > 0: {id, 1}.
  //   2. prompts in progress: for each running sequence with remaining > 1: n = the helper's
  //      answer; n == 0 → return the plan as it is (no one overtakes); else {id, n}, budget −= n.
  //   3. admissions: for each waiting request, stop when running.size() + admitted ≥ max_seqs;
  //      n = the helper's answer; n == 0 → stop (FCFS); else {id, n}, budget −= n, one more
  //      sequence. (roughly 20 lines in all)
  return {};
}

}  // namespace inferlab::student
