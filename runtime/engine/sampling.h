#pragma once
/// @file sampling.h
/// Choosing the next token from a row of logits (chapter 07): greedy, or temperature and
/// nucleus (top-p) sampling driven by a uniform number the caller draws — so a request's
/// choices depend only on its own seed, never on the batch it ran in.

#include <cstdint>
#include <span>

#include "runtime/engine/request.h"

namespace inferlab::engine {

/// The index of the first maximum of @p logits (llama2.c's argmax). Throws
/// std::invalid_argument when @p logits is empty or holds a NaN.
int32_t greedy_token(std::span<const float> logits);

/// Nucleus sampling: p = softmax(logits / @p temperature) (in double, max subtracted); the
/// candidates are the tokens by decreasing p (ties: smaller id first), cut after the first
/// whose cumulative probability reaches @p top_p (at least one); the token is the first
/// candidate whose cumulative probability, renormalised over the candidates, exceeds
/// @p u ∈ [0, 1). Throws std::invalid_argument for empty logits, temperature ≤ 0, top_p outside
/// (0, 1] or u outside [0, 1).
int32_t sample_top_p(std::span<const float> logits, float temperature, float top_p, double u);

/// The distribution choose_token() draws from, over the whole vocabulary: for greedy @p params,
/// 1 at greedy_token() and 0 elsewhere; else softmax(logits / temperature) (in double, max
/// subtracted) kept on sample_top_p()'s nucleus (the most likely tokens, ties: smaller id first,
/// up to the first whose cumulative probability reaches top_p) and renormalised there, 0
/// elsewhere. Sums to 1. Throws std::invalid_argument for empty logits, a NaN, a temperature
/// below 0 or top_p outside (0, 1].
std::vector<double> sampling_distribution(std::span<const float> logits, const SamplingParams& params);

/// A token drawn from @p p (non-negative weights, not necessarily normalised) by the inverse
/// of its cumulative distribution in id order: the first id whose cumulative weight exceeds
/// @p u · Σp (the last id with a positive weight when rounding leaves none). Throws
/// std::invalid_argument when p is empty, has a negative or non-finite weight or sums to 0, or
/// when u is outside [0, 1).
int32_t sample_distribution(std::span<const double> p, double u);

/// log p(@p token) under softmax(@p logits) (computed in double, max subtracted) and the @p top
/// most likely tokens' (by decreasing p, ties: smaller id first). Throws std::invalid_argument for
/// empty logits, a token out of range or top < 0.
SampledLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t top);

/// A uniform double in [0, 1) from @p state (splitmix64: the same sequence on every platform),
/// advancing it.
double next_uniform(uint64_t& state);

/// The next token by @p params: greedy_token() for temperature 0, else sample_top_p() with the
/// next uniform of @p state.
int32_t choose_token(std::span<const float> logits, const SamplingParams& params, uint64_t& state);

}  // namespace inferlab::engine
