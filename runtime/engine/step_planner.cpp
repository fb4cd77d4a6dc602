#include "runtime/engine/step_planner.h"

#include <algorithm>
#include <string>

#include "common/check.h"

namespace inferlab::engine {
namespace {

void check_demands(std::span<const SequenceDemand> demands, const char* which) {
  for (size_t i = 0; i < demands.size(); ++i)
    require(demands[i].remaining >= 1, std::string(which) + "[" + std::to_string(i) + "].remaining",
            demands[i].remaining, "must be ≥ 1");
}

}  // namespace

std::vector<ScheduledChunk> plan_step(std::span<const SequenceDemand> running, std::span<const SequenceDemand> waiting,
                                      const StepLimits& limits) {
  require_positive("token_budget", limits.token_budget);
  require_positive("max_seqs", limits.max_seqs);
  require_positive("chunk_size", limits.chunk_size);
  require(int64_t(running.size()) <= limits.max_seqs, "running.size()", running.size(),
          "must be ≤ max_seqs = " + std::to_string(limits.max_seqs));
  check_demands(running, "running");
  check_demands(waiting, "waiting");

  std::vector<ScheduledChunk> plan;
  int64_t budget = limits.token_budget;
  // How many tokens a prompt gets now: a chunk, or all or nothing without chunking.
  const auto prompt_tokens = [&](int64_t remaining) -> int64_t {
    if (!limits.chunked_prefill) return remaining <= budget ? remaining : 0;
    return std::min({remaining, limits.chunk_size, budget});
  };

  for (const SequenceDemand& s : running)  // 1. decodes
    if (s.remaining == 1 && budget > 0) {
      plan.push_back({s.id, 1});
      --budget;
    }
  for (const SequenceDemand& s : running) {  // 2. prompts in progress
    if (s.remaining == 1) continue;
    const int64_t n = prompt_tokens(s.remaining);
    if (n == 0) return plan;
    plan.push_back({s.id, n});
    budget -= n;
  }
  int64_t seqs = int64_t(running.size());
  for (const SequenceDemand& s : waiting) {  // 3. admissions, first come first served
    if (seqs >= limits.max_seqs) break;
    const int64_t n = prompt_tokens(s.remaining);
    if (n == 0) break;
    plan.push_back({s.id, n});
    budget -= n;
    ++seqs;
  }
  return plan;
}

int64_t choose_victim(std::span<const VictimCandidate> running) {
  require(!running.empty(), "running.size()", 0, "must be > 0: there is no one to preempt");
  int64_t victim = 0;
  for (size_t i = 1; i < running.size(); ++i) {
    const VictimCandidate& a = running[i];
    const VictimCandidate& v = running[size_t(victim)];
    if (a.arrival > v.arrival || (a.arrival == v.arrival && a.id > v.id)) victim = int64_t(i);
  }
  return victim;
}

}  // namespace inferlab::engine
