#pragma once
/// @file speculative.h
/// Speculative decoding's decisions (chapter 12), as pure functions: guess the next tokens
/// (prompt lookup), and verify a guess against the target model's logits so that the tokens
/// that come out follow the target's distribution exactly — greedy: the target's own argmax
/// tokens; sampling: the modified rejection sampling of Leviathan et al. (ICML 2023, arXiv
/// 2211.17192) and Chen et al. (arXiv 2302.01318). The engine (engine.h) calls these; the
/// chapter's exercises are graded against them.
///
/// One verification step, for a sequence whose newest token t has no K/V yet and γ guesses
/// d₁…d_γ: the target runs t, d₁, …, d_γ in one forward (γ + 1 query tokens of one sequence) and
/// its logits rows 0…γ give p₀ (the distribution after t), p₁ (after d₁), …, p_γ. Guess dᵢ₊₁ is
/// checked against pᵢ; the first rejected guess is replaced by a token drawn from what the
/// target's distribution has left, and when all γ are accepted p_γ gives one more token for
/// free (the bonus). Each step therefore yields between 1 and γ + 1 tokens.

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/engine/request.h"
#include "runtime/engine/sampling.h"

namespace inferlab::engine {

/// Prompt lookup decoding (apoorvumang/prompt-lookup-decoding; vLLM's `ngram` method): the
/// guesses are the tokens that followed an earlier occurrence of the sequence's last n tokens.
/// For n from min(@p max_ngram, tokens.size() − 1) down to @p min_ngram: the most recent start
/// j < tokens.size() − n with tokens[j, j + n) equal to the last n tokens; the first n that has
/// one returns tokens[j + n, min(j + n + @p num_tokens, tokens.size())) — at most @p num_tokens
/// tokens, at least 1. Empty when no n matches (the sequence decodes one token as usual). Throws
/// std::invalid_argument when num_tokens < 0 or 1 ≤ min_ngram ≤ max_ngram does not hold.
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int64_t num_tokens, int64_t max_ngram = 3,
                                   int64_t min_ngram = 1);

/// What one verification step produced.
struct Verification {
  /// The accepted guesses, then one token of the target's: the replacement of the first rejected
  /// guess, or the bonus token after all of them. 1 … γ + 1 tokens.
  std::vector<int32_t> tokens;
  /// The guesses accepted: tokens.size() − 1.
  int64_t accepted = 0;
};

/// Greedy verification: guess dᵢ₊₁ is accepted while it equals greedy_token() of target logits
/// row i; the token after the accepted ones is greedy_token() of the row where they stopped. The
/// result is exactly the target's greedy continuation. @p target_logits holds draft.size() + 1
/// rows of @p vocab logits, one after another. Throws std::invalid_argument when its size is not
/// (draft.size() + 1) · vocab, vocab < 1, a guess is outside [0, vocab), or a row holds a NaN.
Verification verify_greedy(std::span<const float> target_logits, int64_t vocab, std::span<const int32_t> draft);

/// Modified rejection sampling: for i = 0 … γ − 1, with u = next_uniform(@p rng_state), guess
/// d = draft[i] is accepted when u · q[i][d] < p[i][d] (probability min(1, p/q)); the first
/// rejected one is replaced by sample_distribution(max(0, p[i] − q[i]), next_uniform(rng_state))
/// and verification stops. When all are accepted, the bonus token is
/// sample_distribution(p[γ], next_uniform(rng_state)). The tokens then follow the target's
/// distributions exactly, whatever the drafter's q (Leviathan et al., Theorem 1; the chapter's
/// lesson derives it, tests/12-speculative-decoding checks it with a chi-square test).
///
/// @p p: γ + 1 target distributions (sampling_distribution() of each target logits row).
/// @p q: the drafter's distributions, one per guess: what the guess was drawn from. An empty
/// row stands for a deterministic guess (q = 1 at draft[i], 0 elsewhere: prompt lookup, a greedy
/// drafter) — then a guess is accepted with probability p[i][d], and a rejection draws from p[i]
/// without d. When max(0, p[i] − q[i]) sums to 0 (p[i] = q[i] up to rounding) the replacement is
/// drawn from p[i]. Throws std::invalid_argument when p does not hold draft.size() + 1 rows, q
/// does not hold draft.size(), a row's size is not p[0]'s, or a guess is outside the vocabulary
/// or has q[i][d] = 0 (it could not have been drawn).
Verification verify_rejection(std::span<const std::vector<double>> p, std::span<const std::vector<double>> q,
                              std::span<const int32_t> draft, uint64_t& rng_state);

/// Leviathan et al.'s expected tokens per verification step, for an acceptance rate @p alpha
/// (each guess accepted with probability α, independently) and @p gamma guesses:
/// E = (1 − α^(γ+1)) / (1 − α), γ + 1 at α = 1. Throws std::invalid_argument when α is outside
/// [0, 1] or γ < 0.
double expected_tokens_per_step(double alpha, int64_t gamma);

}  // namespace inferlab::engine
