#pragma once
/// @file 12-speculative-decoding/predictions.h
/// Chapter 12 — predict, then measure. Each function is a question about speculative decoding:
/// work the answer out from the lesson (chapters/12-speculative-decoding/README.md), write it as a
/// formula in `predictions.cpp`, then run the measurement named in its comment and compare. The
/// graded tests (tests/12-speculative-decoding/test_predictions.cpp) ask each question over
/// several scenarios — the lesson's, odd and fresh random ones — and accept an answer within 1%
/// (P12.5, a yes or no: exactly).
///
/// P12.1 is the expected number of tokens one verification step yields; P12.2 the speed-up it buys
/// once the draft and the verification are paid for; P12.3 and P12.4 the acceptance rate α of a
/// deterministic and of a sampled guess; P12.5 whether greedy speculation can change the output.

#include <cstdint>
#include <span>

namespace inferlab::student {

/// Prediction P12.1 — the expected number of tokens one verification step yields (Leviathan et al.,
/// ICML 2023): @p gamma guesses, each accepted with probability @p alpha independently of the
/// others, verification stopping at the first rejection; the step always adds one token of the
/// target's (the replacement, or the bonus after γ accepted guesses).
/// Worked example: α = 0.5, γ = 2: 1 + 0.5 + 0.25 = 1.75 tokens.
/// Then measure: `./inferlab generate --speculative ngram` prints the mean accepted length.
double predict_tokens_per_step(double alpha, int64_t gamma);

/// Prediction P12.2 — the speed-up of speculative decoding over plain decoding at batch 1:
/// a plain step yields 1 token in @p step_time_one (T(1), the target's forward of one query
/// token); a speculative step drafts @p gamma guesses, one after the other, at @p draft_time each,
/// then verifies them in ONE forward of γ + 1 query tokens, @p step_time_verify (T(γ + 1)), and
/// yields P12.1's tokens on average. Any time unit (the same for all three).
/// Worked example: α = 0.5, γ = 2, T(1) = 10 ms, a draft token 1 ms, T(3) = 11 ms: 1.75 tokens in
/// 13 ms against 1.75 in 17.5 ms: 1.346×.
/// Then measure: `./inferlab generate --speculative draft` against plain decoding (the lesson's
/// table puts the measured speed-up beside this prediction from measured α and T(n)).
double predict_speedup(double alpha, int64_t gamma, double step_time_one, double draft_time, double step_time_verify);

/// Prediction P12.3 — the probability that a DETERMINISTIC guess (prompt lookup, a greedy drafter:
/// q = 1 at the guess) is accepted by the rejection sampler, where the target's distribution at
/// that position is @p p (summing to 1) and the guess is token @p guess.
/// Worked example: p = {0.5, 0.3, 0.2}, guess 1: 0.3.
/// Then measure: the acceptance rate `generate --speculative ngram --temperature 1` reports.
double predict_guess_acceptance(std::span<const double> p, int32_t guess);

/// Prediction P12.4 — the acceptance rate α of a SAMPLED guess: the guess is drawn from the
/// drafter's distribution @p q, then accepted with probability min(1, p/q) under the target's
/// @p p (both over the same vocabulary, each summing to 1).
/// Worked example: p = {0.5, 0.3, 0.2}, q = {0.2, 0.6, 0.2}: 0.2 + 0.3 + 0.2 = 0.7.
/// Then measure: the acceptance rate of `generate --speculative draft --temperature 1`.
double predict_acceptance_rate(std::span<const double> p, std::span<const double> q);

/// Prediction P12.5 — can GREEDY speculative decoding (accept a guess while it equals the target's
/// argmax) give other tokens than plain greedy decoding of the target, for some drafter and some
/// prompt (the arithmetic being the same)? true or false.
/// Then measure: the chapter's tests run every prompt with and without speculation, token for token.
bool predict_greedy_speculation_changes_output();

}  // namespace inferlab::student
