#pragma once
/// @file step_planner.h
/// The scheduler's two decisions, as pure functions (chapter 07; exercises 7.1 and 7.2 write
/// them too): which tokens run in the next step, under a token budget and a sequence budget,
/// and which running request gives its memory back when the pool cannot hold a step.

#include <cstdint>
#include <span>
#include <vector>

namespace inferlab::engine {

/// A sequence's demand for the next step.
struct SequenceDemand {
  int64_t id = 0;         ///< the request
  int64_t remaining = 0;  ///< tokens still to compute before it can sample (1: a decode step), ≥ 1
};

/// The budgets of one step.
struct StepLimits {
  int64_t token_budget = 256;   ///< tokens in one forward, all sequences together (≥ 1)
  int64_t max_seqs = 16;        ///< sequences holding a place in the running batch (≥ 1)
  int64_t chunk_size = 256;     ///< most prompt tokens of one sequence per step, when chunked (≥ 1)
  bool chunked_prefill = true;  ///< false: a prompt runs whole in one step or waits
};

/// One entry of a step's plan.
struct ScheduledChunk {
  int64_t id = 0;      ///< the request
  int64_t tokens = 0;  ///< how many of its remaining tokens run in this step (≥ 1)
  /// Equality, for tests.
  friend bool operator==(const ScheduledChunk&, const ScheduledChunk&) = default;
};

/// Plans one step (iteration-level scheduling, Orca; chunked prefill, Sarathi):
///  1. every running sequence with remaining = 1 (a decode), in order, 1 token each;
///  2. every running sequence still in its prompt, in order: min(remaining, chunk_size, what is
///     left of the budget) tokens — or, without chunked prefill, all of its remaining tokens
///     if they fit in what is left, else nothing more is planned from here on;
///  3. waiting sequences, in order, while running + admitted < max_seqs: as in 2; the first that
///     gets nothing stops the admissions (first come, first served: no one overtakes).
/// Stops when the budget is spent. Decodes go first because each is one token that keeps a
/// request's tokens flowing; prompt chunks fill the rest of the budget. @p running has at most
/// max_seqs entries. Throws std::invalid_argument naming a bad limit or demand.
std::vector<ScheduledChunk> plan_step(std::span<const SequenceDemand> running, std::span<const SequenceDemand> waiting,
                                      const StepLimits& limits);

/// A running request, as the victim policy sees it.
struct VictimCandidate {
  int64_t id = 0;           ///< the request
  double arrival = 0.0;     ///< when it arrived
  int64_t num_computed = 0; ///< tokens whose KV it holds (what preempting it throws away)
};

/// The preemption victim when the pool cannot hold a step: the request that arrived last (ties:
/// the larger id) — first come, first served, as vLLM does (its recompute-mode victim is the
/// newest, lowest-priority request). The oldest requests keep running and finish, which
/// guarantees progress; the victim loses its KV (recompute) and goes to the front of the waiting
/// queue. Returns its index in @p running. Throws std::invalid_argument when @p running is empty.
int64_t choose_victim(std::span<const VictimCandidate> running);

}  // namespace inferlab::engine
