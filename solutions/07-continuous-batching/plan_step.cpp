// Exercise 7.1 — plan one step: a straightforward answer (the lab's runtime/engine/step_planner.h
// is the engine's own). See exercises/07-continuous-batching/ch07.h.
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

  std::vector<ScheduledChunk> plan;
  int64_t budget_left = limits.token_budget;

  // The tokens a prompt with @p remaining tokens gets now: a chunk, or without chunking all of
  // it when it fits and none otherwise. 0 means "it waits" — and no one behind it may pass.
  const auto prompt_share = [&](int64_t remaining) {
    if (limits.chunked_prefill) return std::min({remaining, limits.chunk_size, budget_left});
    return remaining <= budget_left ? remaining : int64_t{0};
  };

  // 1. Decodes: one token each keeps every request's tokens flowing.
  for (const SequenceDemand& seq : running) {
    if (seq.remaining != 1) continue;
    if (budget_left == 0) break;
    plan.push_back({seq.id, 1});
    --budget_left;
  }

  // 2. Prompts already running: a chunk each, in order; the first that must wait ends the step.
  for (const SequenceDemand& seq : running) {
    if (seq.remaining == 1) continue;
    const int64_t share = prompt_share(seq.remaining);
    if (share == 0) return plan;
    plan.push_back({seq.id, share});
    budget_left -= share;
  }

  // 3. Admissions, first come first served, while the batch has a free place.
  int64_t batch_size = int64_t(running.size());
  for (const SequenceDemand& seq : waiting) {
    if (batch_size == limits.max_seqs) break;
    const int64_t share = prompt_share(seq.remaining);
    if (share == 0) break;
    plan.push_back({seq.id, share});
    budget_left -= share;
    ++batch_size;
  }
  return plan;
}

}  // namespace inferlab::student
