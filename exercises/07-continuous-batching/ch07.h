#pragma once
/// @file ch07.h
/// Chapter 07 exercises — the contract: the three small decisions at the heart of a
/// continuous-batching server. The engine (runtime/engine) runs one *step* after another: each
/// step is one forward pass over a flat batch of tokens taken from many sequences at once — a
/// decode token here, a piece of a prompt there (iteration-level scheduling, as in Orca). Before
/// each step the scheduler decides which tokens run (exercise 7.1); when the KV block pool cannot
/// hold the step it decides which running request gives its memory back (exercise 7.2); after the
/// step every sequence that finished its prompt or its decode picks its next token
/// (exercise 7.3). All three are pure functions: no model, no cache, no clock — the engine calls
/// its own versions of them (runtime/engine/step_planner.h and sampling.h), and yours are graded
/// against those.
///
/// All three are plain C++ (namespace inferlab::student), one file each: plan_step.cpp,
/// choose_victim.cpp and sample_top_p.cpp. They are graded separately: nothing of one is used by
/// another.
///
/// Graded by tests/07-continuous-batching/test_student.cpp (checks in
/// tests/07-continuous-batching/student_check.h): hand-written cases that each teach one rule,
/// then thousands of fresh random cases compared with the engine's own functions — a failure
/// prints the input, the expected and the returned answer, and the seed (INFERLAB_SEED set to it
/// replays the run). Run them on your code with `./inferlab student test ch07` (it builds only
/// this chapter and prints each failing test's output) or `./inferlab grade` (the default preset
/// builds solutions/ instead).
///
/// Each stub throws `NotImplemented(...)` after the checks that are given: delete that line once
/// your code is written.
///
/// ## Exercise 7.1 — plan one step: decodes first, then prompt chunks, then admissions (plan_step.cpp)
///
/// A step has two budgets. The *token budget* (vLLM's max_num_batched_tokens) caps the tokens
/// of one forward, all sequences together: it bounds the step's time and its activation memory.
/// The *sequence budget* (max_num_seqs) caps how many sequences hold a place in the running
/// batch. Every sequence is described by its demand: `remaining`, the tokens it must still
/// compute before it can sample — 1 for a sequence that is decoding (its last generated token),
/// more for a prompt (all of it, or what is left of it after earlier chunks). `running` holds
/// the sequences already admitted (at most max_seqs, in the engine's order), `waiting` the queue
/// of requests not admitted yet, in arrival order. Plan the step:
///   1. *decodes first*: every running sequence with remaining = 1, in the order of `running`,
///      gets 1 token — while budget is left. One token each keeps every request's tokens
///      flowing: a long prompt never stalls the others' decoding (no generation stall);
///   2. *prompts in progress*: every running sequence with remaining > 1, in order, gets
///      min(remaining, chunk_size, budget left) tokens — *chunked prefill* (Sarathi): a long
///      prompt is computed a chunk per step, riding along with the decodes. Without chunked
///      prefill (chunked_prefill = false) a prompt runs whole or not at all: all of its remaining
///      tokens if they fit in the budget left, otherwise it waits — and nothing more is planned
///      in this step (neither later prompts nor admissions: no one overtakes it);
///   3. *admissions, first come first served*: waiting requests, in order, while the running
///      sequences plus those admitted in this step are fewer than max_seqs: each gets tokens as
///      in 2 (a chunk, or all or nothing). The first that gets nothing stops the admissions: a
///      later, shorter request never jumps the queue (FCFS — fairness, and no starvation of long
///      prompts).
/// The plan lists the scheduled sequences in that order: decodes, prompts in progress,
/// admissions, each {id, tokens} with tokens ≥ 1 — a sequence that gets nothing is not listed.
/// Once the budget is spent nothing more fits (with chunking, a prompt needs ≥ 1 token of
/// budget). The token counts of the plan add up to at most token_budget; the sequences planned
/// never exceed max_seqs.
/// Worked example: running [{3, 40}, {1, 1}, {2, 1}] (sequence 3 has 40 prompt tokens left, 1 and 2
/// are decoding), waiting [{4, 100}, {5, 8}], token_budget 32, max_seqs 4, chunk_size 16:
///   - chunked: [{1, 1}, {2, 1}, {3, 16}, {4, 14}] — the decodes (budget 30 left), a chunk of 3
///     (14 left), request 4 admitted with what is left; 5 waits: 4 sequences already;
///   - not chunked: [{1, 1}, {2, 1}] — 3's 40 tokens do not fit in 30, so it waits, and so does
///     everyone behind it.
/// The checks are given: a limit ≤ 0, more running sequences than max_seqs or a demand with
/// remaining < 1 throws std::invalid_argument before anything is planned.
/// Graded: the hand cases of the lesson (decodes go first even when a prompt came earlier; a
/// chunk never exceeds chunk_size nor the budget left; without chunking a prompt larger than the
/// budget left waits and blocks the admissions behind it; FCFS admissions stop at max_seqs and at
/// the first request that gets nothing), then thousands of random running and waiting lists —
/// budgets down to 1 and 2 tokens, chunk sizes down to 1, chunking on and off, max_seqs reached —
/// each plan equal, entry for entry, to the engine's plan_step(). Budget: one pass over each
/// list, O(running + waiting). Size hint: roughly 25 lines.
///
/// ## Exercise 7.2 — the preemption victim (choose_victim.cpp)
///
/// The engine admits requests optimistically: a request's KV grows by a token every step, and
/// when the block pool cannot hold the next step's tokens, one running request must give its
/// blocks back. vLLM (and this engine) *recompute*: the victim's KV is thrown away, it goes back
/// to the front of the waiting queue, and when it is readmitted its prompt and the tokens it had
/// generated are computed again as one prefill — cheaper than it sounds, since a prefill
/// computes many tokens per step. The victim is the request that arrived *last* (the latest
/// `arrival`; on a tie, the larger id): the same first-come-first-served order as the
/// admissions, read backwards. Why: the order of the requests is fixed at arrival, so the
/// oldest running request is never preempted while a younger one runs — it keeps its blocks,
/// finishes and frees them, and then the next oldest does: every request eventually finishes (a
/// progress guarantee; no livelock of requests preempting each other in turn). `num_computed`
/// (the tokens whose KV the request holds) is what the recompute will cost; the policy does not
/// use it — picking the cheapest victim could preempt the same young request again and again,
/// or the oldest one, and lose the guarantee.
/// Return the victim's index in `running` (not its id). The check is given: an empty `running`
/// throws std::invalid_argument.
/// Graded: hand cases (the latest arrival wherever it stands in the list; ties in arrival go to
/// the larger id; num_computed ignored), then thousands of random running sets with many ties,
/// each answer equal to the engine's choose_victim(). Budget: one pass, no allocation. Size
/// hint: roughly 8 lines.
///
/// ## Exercise 7.3 — nucleus (top-p) sampling, deterministic given u (sample_top_p.cpp)
///
/// After a step, a sequence's row of logits (one per token of the vocabulary) becomes its next
/// token. With temperature T > 0 the engine samples: the probabilities are
///
///     p_i = exp((logit_i − max) / T) / Σ_j exp((logit_j − max) / T)
///
/// computed in double, with the maximum logit subtracted first (so that large logits or a small
/// T never overflow exp). T < 1 sharpens the distribution, T > 1 flattens it. Nucleus sampling
/// (Holtzman et al., top-p) then samples only among the most likely tokens: sort the tokens by
/// decreasing p (ties: the smaller id first) and keep the shortest prefix of that order whose
/// cumulative probability reaches top_p (the first token at which the running sum is ≥ top_p is
/// the last one kept; at least one token; top_p = 1 keeps every token, even when rounding keeps
/// the sum a hair under 1). The tail of unlikely tokens — where sampled text goes off the rails —
/// is cut. Renormalise over the kept tokens (divide by their total, `mass`) and return the first
/// kept token, in sorted order, whose renormalised cumulative probability exceeds u — u is a
/// uniform number in [0, 1) that the caller draws from the request's own seed, so the choice
/// depends on nothing else (not on the batch the request ran in). Equivalently: the first whose
/// cumulative probability exceeds u · mass (if rounding lets none exceed it, the last kept one).
/// Worked example: logits {2, 1, 0, 1}, T = 1: p ≈ {0.5344, 0.1966, 0.0723, 0.1966}; sorted:
/// tokens 0, 1, 3, 2 (1 and 3 tie: 1 first), cumulative 0.5344, 0.7311, 0.9277, 1.
///   - top_p = 0.7: tokens 0 and 1 are kept (0.7311 ≥ 0.7), mass 0.7311; u = 0.5 → token 0
///     (0.5344 / 0.7311 = 0.731 > 0.5); u = 0.8 → token 1;
///   - top_p = 0.9: tokens 0, 1, 3 (mass 0.9277); u = 0.9 → token 3 (0.7311 / 0.9277 = 0.788 is
///     not above 0.9, 0.9277 / 0.9277 = 1 is);
///   - top_p tiny (say 0.01): only token 0 — greedy, whatever u.
/// The checks are given: empty logits, T ≤ 0 (T = 0 is greedy, the engine's greedy_token), top_p
/// outside (0, 1] or u outside [0, 1) throw std::invalid_argument.
/// Graded: the worked example, ties in logits, top_p = 1 and tiny top_p, logits in the
/// thousands, then thousands of random rows (vocabularies of 1 to 300 tokens, T from 0.1 to 2,
/// top_p in (0, 1], u in [0, 1)), each token equal to the engine's sample_top_p(). (Cases where
/// u or top_p lies within 1e-9 of a boundary of the cumulative sums are not asked: the rounding
/// of a different but correct summation order could decide them either way.) Budget:
/// O(V log V) for a vocabulary of V tokens (one sort), O(V) extra memory. Size hint: roughly
/// 25 lines.

#include <cstdint>
#include <span>
#include <vector>

namespace inferlab::student {

/// A sequence's demand for the next step (exercise 7.1).
struct SequenceDemand {
  int64_t id = 0;         ///< the request
  int64_t remaining = 0;  ///< tokens still to compute before it can sample (1: a decode), ≥ 1
};

/// The budgets of one step (exercise 7.1).
struct StepLimits {
  int64_t token_budget = 256;   ///< tokens in one forward, all sequences together (≥ 1)
  int64_t max_seqs = 16;        ///< sequences holding a place in the running batch (≥ 1)
  int64_t chunk_size = 256;     ///< most prompt tokens of one sequence per step, when chunked (≥ 1)
  bool chunked_prefill = true;  ///< false: a prompt runs whole in one step or waits
};

/// One entry of a step's plan (exercise 7.1).
struct ScheduledChunk {
  int64_t id = 0;      ///< the request
  int64_t tokens = 0;  ///< how many of its remaining tokens run in this step (≥ 1)
  /// Two entries are equal when both fields are.
  friend bool operator==(const ScheduledChunk&, const ScheduledChunk&) = default;
};

/// Exercise 7.1 — the plan of one step (see the file's documentation): decodes of @p running
/// first (1 token each), then its prompts in progress (a chunk each, or all or nothing without
/// chunked prefill), then admissions from @p waiting in order while fewer than max_seqs
/// sequences are planned or running, stopping at the first that gets nothing — all within
/// @p limits.token_budget tokens. Throws std::invalid_argument (given) for a limit ≤ 0, more
/// than max_seqs running sequences or a remaining < 1.
std::vector<ScheduledChunk> student_plan_step(std::span<const SequenceDemand> running,
                                              std::span<const SequenceDemand> waiting, const StepLimits& limits);

/// A running request, as the victim policy sees it (exercise 7.2).
struct VictimCandidate {
  int64_t id = 0;            ///< the request
  double arrival = 0.0;      ///< when it arrived
  int64_t num_computed = 0;  ///< tokens whose KV it holds (what preempting it throws away)
};

/// Exercise 7.2 — the index in @p running of the request to preempt: the latest arrival, on a
/// tie the larger id (see the file's documentation for why). Throws std::invalid_argument
/// (given) when @p running is empty.
int64_t student_choose_victim(std::span<const VictimCandidate> running);

/// Exercise 7.3 — nucleus sampling (see the file's documentation): p = softmax(@p logits /
/// @p temperature) in double with the max subtracted; the tokens by decreasing p (ties: smaller
/// id first) up to the first whose cumulative probability reaches @p top_p; the first of them
/// whose cumulative probability, renormalised over them, exceeds @p u. Throws
/// std::invalid_argument (given) for empty logits, temperature ≤ 0, top_p outside (0, 1] or u
/// outside [0, 1).
int32_t student_sample_top_p(std::span<const float> logits, float temperature, float top_p, double u);

}  // namespace inferlab::student
