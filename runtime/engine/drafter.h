#pragma once
/// @file drafter.h
/// Speculative decoding's drafters (chapter 12): who guesses the next tokens that the target
/// model then verifies in one step (speculative.h). Two, behind one interface:
///  - **prompt lookup** (`ngram`): the tokens that followed the last n-gram's most recent earlier
///    occurrence in the sequence itself (propose_ngram()) — no model, no state; its guesses are
///    deterministic (q = 1 at the guess);
///  - **a draft model** (`draft`): a cheaper model over the same vocabulary — here the same file
///    with its block-quantized (Q4_1) matrices drafting for a target whose matrices were widened
///    to fp32 — run γ times, one token per run, batched over the sequences that speculate. It
///    keeps each sequence's K/V in a paged pool of its own (its own block manager, no prefix
///    cache), catches a sequence up on the tokens it has not seen (the prompt, the last
///    verified tokens) in its first run, and rolls back to the verified tokens after each step.
///    With a sampling request it draws its guesses from its own distribution q
///    (sampling_distribution() of its logits with the request's temperature and top-p), which the
///    verifier needs; with a greedy one it guesses its argmax.

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/engine/request.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_runner.h"
#include "runtime/paged/block_manager.h"

namespace inferlab::engine {

/// Who guesses.
enum class SpeculativeMethod {
  none,   ///< no speculation: one token per sequence per decode step
  ngram,  ///< prompt lookup (propose_ngram())
  draft,  ///< a draft model (SpeculativeConfig::draft_model)
};

/// "none", "ngram", "draft".
std::string_view to_string(SpeculativeMethod method);
/// The method named @p name ("none", "ngram", "draft"). Throws std::invalid_argument naming the
/// known ones.
SpeculativeMethod parse_speculative_method(std::string_view name);

/// Speculative decoding's settings (vLLM's `speculative_config`).
struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::none;  ///< who guesses
  int64_t num_speculative_tokens = 4;                  ///< γ: guesses per sequence per step, at most
  int64_t ngram_max = 3;  ///< prompt lookup: the longest suffix n-gram tried (vLLM's prompt_lookup_max)
  /// prompt lookup: the shortest (vLLM's prompt_lookup_min). 2, not 1: a one-token match guesses
  /// often and badly (chapter 12 measures α for both).
  int64_t ngram_min = 2;
  /// The draft model (method draft): same vocabulary as the target; kept by reference, it must
  /// outlive the engine. It runs on the engine's backend.
  const model::LlamaModel* draft_model = nullptr;

  /// True unless method is none.
  bool enabled() const { return method != SpeculativeMethod::none; }
  /// Throws std::invalid_argument naming a bad field: γ < 1 when enabled, ngram sizes not
  /// 1 ≤ min ≤ max, method draft without a draft model.
  void validate() const;
};

/// What a drafter is asked for one sequence.
struct DraftRequest {
  int64_t id = 0;                    ///< the sequence (its state in a stateful drafter)
  std::span<const int32_t> tokens;   ///< all its tokens; the last one has no K/V in the target yet
  int64_t num_tokens = 0;            ///< guesses wanted, at most (≥ 1)
  const SamplingParams* sampling = nullptr;  ///< how it samples (a draft model draws like it)
  uint64_t* rng_state = nullptr;     ///< its random stream (a sampling draft model draws from it)
};

/// A drafter's guesses for one sequence.
struct Draft {
  std::vector<int32_t> tokens;  ///< the guesses, at most DraftRequest::num_tokens; may be empty
  /// Per guess, the distribution it was drawn from (verify_rejection()'s q), or all rows empty
  /// for deterministic guesses.
  std::vector<std::vector<double>> q;
};

/// Guesses tokens for the target to verify (see the file comment).
class Drafter {
 public:
  virtual ~Drafter() = default;
  /// The guesses for each of @p requests, in order.
  virtual std::vector<Draft> propose(std::span<const DraftRequest> requests) = 0;
  /// Sequence @p id's first @p num_tokens tokens are verified (its guesses past them were
  /// rejected): a stateful drafter drops what it holds beyond them.
  virtual void rollback(int64_t id, int64_t num_tokens) = 0;
  /// Sequence @p id left the engine or was preempted: drop its state.
  virtual void forget(int64_t id) = 0;
};

/// The drafter of @p config (nullptr for method none), for an engine of @p max_num_seqs
/// sequences of up to @p max_seq_len tokens whose target is @p target, on @p backend, with a
/// pool of @p paging for a draft model's K/V. Throws std::invalid_argument for a bad config or a
/// draft model whose vocabulary differs from the target's (naming both sizes).
std::unique_ptr<Drafter> make_drafter(const SpeculativeConfig& config, const model::LlamaModel& target,
                                      Backend backend, int64_t max_num_seqs, int64_t max_seq_len,
                                      const KvPaging& paging);

}  // namespace inferlab::engine
