#pragma once
/// @file sequence.h
/// A request's whole state inside the engine (chapter 07), in one place, as nano-vllm's
/// Sequence: the id the engine gave it, its tokens (prompt, then generated), how many of them
/// have their K/V in the cache, its block table (runtime/paged: the blocks, their chained
/// hashes), its status, its sampling parameters and random stream, and its timings. The
/// scheduler (Engine) owns the sequences; the block manager operates on their tables; each step
/// the scheduler writes a StepPlan (runtime/model/step_plan.h) from them, which is all the model
/// runner sees. No other structure keeps a copy of a request's tokens or blocks.

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/engine/request.h"
#include "runtime/paged/block_manager.h"

namespace inferlab::engine {

/// Where a sequence is in its life.
enum class SequenceStatus {
  waiting,   ///< not yet arrived, or arrived and holding no blocks (new or preempted)
  running,   ///< holds blocks for its tokens; its chunks run in the steps
  finished,  ///< left the engine (finished or aborted); its output is taken
};

/// One request inside the engine.
struct Sequence {
  int64_t id = 0;                                   ///< unique: Engine::add_request()'s for choice 0, another range for the others
  int64_t request_id = 0;                           ///< the request it answers (add_request()'s id; = id for choice 0)
  int32_t choice = 0;                               ///< which of the request's SamplingParams::n choices
  std::vector<int32_t> tokens;                      ///< the prompt, then the generated tokens
  int64_t prompt_len = 0;                           ///< the prompt's tokens (the first of @ref tokens)
  int64_t num_computed = 0;                         ///< leading tokens whose K/V are in the cache
  paged::BlockTable block_table;                    ///< its blocks (empty unless running)
  uint64_t prefix_root = paged::kFirstBlockParent;  ///< its blocks' hash chain root (paged::prefix_root of its salt)
  SequenceStatus status = SequenceStatus::waiting;  ///< where it is
  SamplingParams sampling;                          ///< how it generates
  uint64_t rng_state = 0;                           ///< its random stream (starts at sampling.seed)
  double arrival = 0.0;                             ///< when it may first be scheduled
  RequestMetrics metrics;                           ///< its timings so far
  bool admitted_once = false;                       ///< admitted at least once (prompt counted, cache hit recorded)
  int64_t high_water = 0;                           ///< most tokens ever computed (recomputation below it)

  /// The prompt: the first prompt_len tokens.
  std::span<const int32_t> prompt() const { return std::span<const int32_t>(tokens).first(size_t(prompt_len)); }
  /// The generated tokens: those after the prompt.
  std::span<const int32_t> generated() const { return std::span<const int32_t>(tokens).subspan(size_t(prompt_len)); }
  /// Places in the running batch it takes: n while a request of n choices has not yet sampled
  /// its first token (it forks into them then), else 1.
  int64_t seats() const { return choice == 0 && generated().empty() ? sampling.n : 1; }
  /// What leaves the engine when it finishes for @p reason.
  RequestOutput output(FinishReason reason) const;
};

}  // namespace inferlab::engine
