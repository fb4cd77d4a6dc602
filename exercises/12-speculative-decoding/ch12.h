#pragma once
/// @file ch12.h
/// Chapter 12 exercises — the contract: the three pure decisions of speculative decoding, written
/// without the lab's code (student code links only inferlab::common, so everything they need is
/// declared here):
///
///   12.1  prompt lookup (propose_ngram.cpp): guess the next tokens by finding the sequence's last
///         n tokens earlier in the sequence and copying what followed them — no model at all;
///   12.2  the rejection sampler (verify_rejection.cpp): accept or replace each guess so that the
///         tokens that come out follow the TARGET model's distribution exactly, whatever the
///         drafter guessed;
///   12.3  the rollback of a block table (rollback.cpp): after verification, the rejected
///         guesses' KV slots are given back — the blocks past the kept tokens freed, last to first,
///         and the hashes of blocks that are no longer full dropped.
///
/// The engine (runtime/engine/speculative.h, runtime/paged/block_manager.h's truncate) calls its
/// own versions of them, and yours are graded against those.
///
/// Graded by tests/12-speculative-decoding/test_student.cpp (checks in
/// tests/12-speculative-decoding/student_check.h and distribution_check.h): hand cases that each
/// teach one rule, then thousands of fresh random cases compared with the engine's functions — a
/// failure prints the input, the expected and the returned answer, and the seed (INFERLAB_SEED
/// replays it) — and, for 12.2, a chi-square test of the tokens' distribution. Run them with
/// `./inferlab student test ch12` (it builds only this chapter and prints each failing test's
/// output) or `./inferlab grade` (the default preset builds solutions/ instead).
///
/// Each stub throws `NotImplemented(...)` after the checks that are given: delete that line once
/// your code is written.
///
/// ## One verification step (12.1 and 12.2)
///
/// A sequence's newest token t has no K/V yet. The drafter guesses γ tokens d₁ … d_γ; the target
/// model runs t, d₁, …, d_γ in ONE forward (γ + 1 query tokens of one sequence: a decode step reads
/// every weight once whatever the number of query tokens, so this costs little more than one
/// token) and its logits rows 0 … γ give p₀ (the distribution of the token after t), p₁ (after
/// d₁), …, p_γ. Guess dᵢ₊₁ is checked against pᵢ; the first rejected guess is replaced by a token
/// of the target's, and verification stops (the later guesses were conditioned on a wrong token);
/// when all γ are accepted, p_γ gives one more token for free (the bonus). A step therefore
/// yields between 1 and γ + 1 tokens — never fewer than plain decoding.

#include <cstdint>
#include <span>
#include <vector>

namespace inferlab::student {

/// Exercise 12.1 — prompt lookup decoding (apoorvumang/prompt-lookup-decoding; vLLM's `ngram`).
///
/// Input-grounded text (a summary quoting its source, code edited in place, a chat turn repeating
/// a name) repeats stretches of what came before. So: take the last n tokens of @p tokens (the
/// prompt and the output so far), find where they occurred EARLIER in the sequence, and guess that
/// what followed them then follows them again.
///
/// The rules, in order:
///   1. the longest n first: n goes from min(@p max_ngram, tokens.size() − 1) down to
///      @p min_ngram; the first n that has an earlier occurrence decides (a longer match is better
///      evidence than a shorter one);
///   2. the most recent occurrence: among the starts j of an occurrence — tokens[j, j + n) equal to
///      the last n tokens, j < tokens.size() − n (the suffix itself does not count, but an
///      occurrence may overlap it) — take the largest j (recent text predicts best);
///   3. the guesses are tokens[j + n, min(j + n + @p num_tokens, tokens.size())): at most
///      @p num_tokens, cut at the end of the sequence (an occurrence near the end has fewer
///      tokens after it) — at least 1, since j + n < tokens.size();
///   4. no n has an earlier occurrence (or num_tokens = 0, or tokens has fewer than 2 tokens):
///      empty — the sequence decodes one token as usual.
///
/// Worked example: tokens = [5 7 9 2 5 7 9 4 5 7 9], num_tokens 3, max_ngram 3, min_ngram 1.
/// The last 3 tokens are [5 7 9]; they occur at j = 0 and j = 4: the most recent is j = 4, so the
/// guesses are tokens[7, 10) = [4 5 7]. With tokens = [1 2 3 1 2] (num_tokens 3), the last 3 tokens [3 1 2] occur
/// nowhere earlier; the last 2, [1 2], occur at j = 0: the guesses are tokens[2, 5) = [3 1 2].
/// With tokens = [8 8 8] and num_tokens 5: n = 2, [8 8] occurs at j = 0 (overlapping the suffix),
/// the guesses are tokens[2, 3) = [8] (cut at the end).
///
/// The checks are given: num_tokens < 0, min_ngram < 1 or max_ngram < min_ngram throws
/// std::invalid_argument. Graded: hand cases (the longest n first, the most recent occurrence,
/// overlapping occurrences, the cut at the end and at num_tokens, no match), then thousands of
/// random sequences over vocabularies of 2 to 8 tokens (so that matches happen), each answer
/// equal to the engine's propose_ngram(). Budget: O(max_ngram · tokens.size()) comparisons of
/// windows, no allocation but the result. Size hint: roughly 12 lines.
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int64_t num_tokens, int64_t max_ngram,
                                   int64_t min_ngram);

/// The lab's random numbers (given; the engine's next_uniform(), runtime/engine/sampling.h): a
/// uniform double in [0, 1) from @p state (splitmix64, the same sequence on every platform),
/// advancing it. Each call is one draw.
inline double next_uniform(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

/// What one verification step produced (exercise 12.2).
struct Verification {
  /// The accepted guesses, then one token of the target's: the replacement of the first rejected
  /// guess, or the bonus token after all of them. 1 … γ + 1 tokens.
  std::vector<int32_t> tokens;
  /// The guesses accepted: tokens.size() − 1.
  int64_t accepted = 0;
};

/// Exercise 12.2 — the rejection sampler of speculative sampling (Leviathan et al., ICML 2023,
/// arXiv 2211.17192; Chen et al., arXiv 2302.01318).
///
/// @p p holds γ + 1 target distributions (p[i][t]: the probability of token t at position i, each
/// row summing to 1); @p q the drafter's γ distributions, q[i] the one guess @p draft[i] was drawn
/// from. Accepting a guess d with probability min(1, p[i][d] / q[i][d]) and, on a rejection,
/// drawing the replacement from the residual normalize(max(0, p[i] − q[i])) makes the emitted token
/// follow p[i] EXACTLY: P(token = t) = q(t)·min(1, p(t)/q(t)) + P(reject)·residual(t)
/// = min(p(t), q(t)) + max(0, p(t) − q(t)) = p(t) (Leviathan et al., Theorem 1; the lesson works
/// it through). A drafter that is often right (q close to p) is accepted often — α = Σ min(p, q) —
/// and a wrong one costs speed, never correctness.
///
/// An EMPTY q row stands for a deterministic guess (prompt lookup, a greedy drafter): q = 1 at
/// draft[i] and 0 elsewhere — so it is accepted with probability p[i][d], and a rejection draws
/// from p[i] without d.
///
/// The draws — exactly these, in this order, so that the same @p rng_state gives the engine's
/// tokens (and leaves rng_state where the engine leaves it):
///
///     for i = 0 … γ − 1:
///         d = draft[i];  qd = q[i].empty() ? 1 : q[i][d]
///         u = next_uniform(rng_state)
///         if u · qd < p[i][d]: accept d (append it, accepted += 1), next i
///         else: residual[t] = max(0, p[i][t] − q_t) for every t (q_t = q[i][t], or for an empty
///               row 1 at t = d and 0 elsewhere); when the residual sums to 0 (p = q up to
///               rounding) draw from p[i] instead; append draw(residual, next_uniform(rng_state));
///               return
///     all accepted: append draw(p[γ], next_uniform(rng_state))       (the bonus token)
///
/// draw(w, u) is the inverse of w's cumulative distribution in id order: total = Σ w[t] (added in
/// id order); the first id t with w[t] > 0 whose running sum w[0] + … + w[t] exceeds u · total; if
/// rounding leaves none, the last id with w[t] > 0. (The engine's sample_distribution().)
///
/// Worked example: γ = 1, p = {{0.5, 0.3, 0.2}, {0.1, 0.6, 0.3}}, q = {{0.2, 0.6, 0.2}},
/// draft = {1}. Guess 1 is accepted with probability min(1, 0.3 / 0.6) = 0.5:
///   - u = 0.25: 0.25 · 0.6 = 0.15 < 0.3, accepted; the bonus u = 0.05 draws from p[1]: 0.05 <
///     0.1 → token 0; tokens {1, 0}, accepted 1;
///   - u = 0.75: 0.45 ≥ 0.3, rejected; the residual is max(0, p − q) = {0.3, 0, 0} → token 0
///     whatever the next u; tokens {0}, accepted 0.
///
/// The checks are given: p must hold draft.size() + 1 rows and q draft.size() rows, every row the
/// size of p[0] (q rows may be empty), each guess a token id with q[i][d] > 0 — else
/// std::invalid_argument. Graded: the worked example and hand cases; thousands of random cases
/// (vocabularies of 1 to 12, γ = 0 … 5, p with zeros, q rows full or empty, drafts drawn from q),
/// the tokens, the count and the final rng_state equal to the engine's verify_rejection(); and the
/// distribution test: on small random targets (vocabulary 6–8, γ = 1 … 3), tens of thousands of
/// steps with guesses drawn from q, the k-th emitted token (among the steps that emit one) must
/// follow p[k] — a chi-square goodness-of-fit test at significance 1e-6 — and each guess must be
/// accepted at the rate Σ min(p, q) (a binomial test at the same significance). Budget: O(γ +
/// vocab) per step. Size hint: roughly 30 lines.
Verification verify_rejection(std::span<const std::vector<double>> p, std::span<const std::vector<double>> q,
                              std::span<const int32_t> draft, uint64_t& rng_state);

/// Exercise 12.3 — the rollback of a block table (chapter 06's paged KV cache, after a
/// verification step).
///
/// Before verifying, the engine gives the γ guesses KV slots, like any token: the table's
/// @p num_tokens counts them, its @p blocks hold them (chapter 06: ⌈num_tokens / block_size⌉
/// physical block ids, logical block i → blocks[i]), and each block they FILLED got a chained hash
/// in @p hashes (hashes[i] names the content of full block i: its tokens and every token before).
/// After verification only the first @p keep tokens are real (the prompt, the accepted guesses and
/// — not yet slotted — the target's replacement). Roll the table back to them:
///   - blocks: keep the first ⌈keep / block_size⌉; the others are freed — return their ids, LAST
///     TO FIRST (the caller releases them in that order, as chapter 06's free() does: a hashed
///     block becomes evictable when released, and the tail is evicted before the head);
///   - hashes: keep only those of blocks that are still full: the first min(hashes.size(),
///     ⌊keep / block_size⌋). A block that was filled by guesses and then cut is partial again: its
///     hash named rejected tokens and must never be offered to the prefix cache, or a later prompt
///     that starts with those tokens would read the wrong K/V;
///   - num_tokens = keep. The kept last block's rows past keep still hold the rejected guesses'
///     K/V: the next appends overwrite them (nothing to clear).
/// The leading @p num_registered blocks are already in the prefix cache (their hashes registered,
/// maybe shared by other sequences): they cannot be taken back.
///
/// Worked example: block_size 4, blocks {7, 3, 9}, hashes {h0, h1} (blocks 7 and 3 full), 10
/// tokens, num_registered 1; keep 6 → blocks {7, 3}, freed {9}, hashes {h0} (block 3 holds 2
/// tokens now), num_tokens 6. keep 4 → blocks {7}, freed {9, 3}, hashes {h0}. keep 3 is refused:
/// block 7 is registered.
///
/// The check is given: keep outside [num_registered · block_size, num_tokens] throws
/// std::invalid_argument. Graded: the worked example and hand cases (a cut at a block boundary,
/// inside a block, keeping everything), then random tables made by the lab's BlockManager (forks,
/// prefix-cache hits, fresh blocks, block sizes 1 to 16), each result equal to the engine's
/// BlockManager::truncate() — the blocks, the freed ids in order, the hashes, num_tokens — and
/// the pool's check_invariants() holding after your freed blocks are released. Size hint: roughly
/// 8 lines.
std::vector<int32_t> rollback(std::vector<int32_t>& blocks, std::vector<uint64_t>& hashes, int64_t& num_tokens,
                              int64_t keep, int64_t block_size, int64_t num_registered);

}  // namespace inferlab::student
