#pragma once
/// @file fp8_check.h
/// The checks of chapter 04's FP8 E4M3 KV cache, shared by the real code and the wrong fixtures
/// in tests/wrong: E4M3 decoding and encoding against an independent definition (every code; the
/// nearest value found by search, ties to the even code, saturation, NaN), the row quantizer's
/// scale and round trip, and FP8 decode within fp8_kv_output_bound (common/tolerance.h) of the
/// fp32 attention while matching the float64 decode of its own dequantized cache at fp32
/// tolerance. Shapes and the outlier data are chapter 04's INT8 ones (int8_check.h).

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <span>

#include "kernels/decode/decode.h"
#include "tests/support/int8_check.h"

namespace inferlab::testing {

/// The value of E4M3 @p code by the format's definition (NaN for S.1111.111), written apart from
/// kernels/kv/fp8_e4m3.h.
double e4m3_definition(uint8_t code);

/// All 256 codes: @p decode(code) must equal e4m3_definition(code) exactly (NaN for NaN, the
/// sign of ±0 kept).
::testing::AssertionResult fp8_decoder_matches_definition(const std::function<float(uint8_t)>& decode);

/// @p encode against the nearest E4M3 value found by searching all codes (ties to the even
/// code, |x| ≥ 448 and ±Inf saturate to ±448, NaN to a NaN code) on every code's value, every
/// midpoint between neighbours and one float step either side of it, tiny and huge values and
/// random values over the whole range.
::testing::AssertionResult fp8_encoder_matches_definition(const std::function<uint8_t(float)>& encode);

/// A row quantizer: returns the scale Δ and writes one code per element.
using Fp8RowQuantizer = std::function<float(std::span<const float> row, std::span<uint8_t> codes)>;

/// Random rows (with outliers, an all-zero row, tiny values): Δ = max|x|/448 (the largest
/// element stored as ±448, code 0x7E / 0xFE) and every element back within
/// fp8_e4m3_round_trip_bound of itself.
::testing::AssertionResult fp8_row_round_trip(const Fp8RowQuantizer& quantize);

/// The FP8 scale the chapter defines (kernels/kv/quantize.h) for a row whose largest magnitude
/// is @p max_abs, computed here apart from the quantizer: max_abs / 448 in fp32. The FP8 checks
/// derive every error ceiling from this scale of the unquantized data, never from a cache's own.
float defined_fp8_scale(float max_abs);

/// Replays generation for @p c (K scaling ignored: FP8 has per-token scales for K and V): prefill
/// length − steps tokens into an FP8 KvCache and an fp32 KvCache, then each step @p append one
/// token (FP8) / KvCache::append (fp32) and run @p decode (output poisoned with NaN first).
/// Every ceiling comes from the defined scales of the unquantized rows (defined_fp8_scale), not
/// from the scales the cache stored. Checks (e) every cached element within
/// fp8_e4m3_round_trip_bound of its input at its row's defined scale, then every output (a)
/// finite, (b) within attention_tolerance(fp32) of decode_reference over the dequantized cache,
/// (c) within fp8_kv_output_bound — per (sequence, head), from the defined scales — of
/// decode_reference over the fp32 data. @p errors receives the measured errors of the last step
/// (relative error, max |err|, softmax KL, each head's max |err| beside its own bound).
/// @p seed (when given) draws the data from that seed, as int8_decode_within_budget() does: one
/// seed gives the FP8 and the INT8 checks the same K, V and last-step queries.
::testing::AssertionResult fp8_decode_within_budget(const DecodeFn& decode, const KvAppendFn& append,
                                                    const Int8Case& c, Int8Errors* errors = nullptr,
                                                    std::optional<uint64_t> seed = std::nullopt);

/// fp8_decode_within_budget() with the CPU append (KvCache::append).
::testing::AssertionResult fp8_decode_within_budget(const DecodeFn& decode, const Int8Case& c,
                                                    Int8Errors* errors = nullptr);

/// The FP8 cache's scale definition: prefills a prompt per sequence (KvCache::prefill; a ragged
/// batch, one prompt empty), then appends @p tokens random tokens (with an outlier channel, an
/// all-zero row and tiny values) with @p append, and checks that every K and V row's stored
/// scale equals defined_fp8_scale(max|row|) exactly and every element is back within
/// fp8_e4m3_round_trip_bound of its input at that scale.
::testing::AssertionResult fp8_cache_scales_match_definition(const KvAppendFn& append, int64_t tokens);

/// The FP8 decode shapes: int8_decode_cases()'s per-token ones with fp32 scales (ragged, L = 1 … @p max_length,
/// head_dim 20 … 128, GQA 1 … 8, with and without outliers), plus head_dim 18 (off the 4-code
/// vectors) and 200 (several vectors per lane).
std::vector<Int8Case> fp8_decode_cases(int64_t max_length = 129);

}  // namespace inferlab::testing
