#pragma once
/// @file int8_check.h
/// The checks of chapter 04 (INT8 KV cache), shared by the real versions and the wrong fixtures
/// in tests/wrong: the quantizer saturates, quantize → dequantize stays within half a step,
/// non-finite input is refused, and INT8 decode stays within the bound derived from the
/// quantization steps (common/tolerance.h: int8_kv_output_bound) while matching the float64
/// oracle of its own dequantized cache within the fp32 tolerance.

#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/decode/decode.h"
#include "kernels/kv/quantize.h"
#include "kernels/registry.h"

namespace inferlab::testing {

/// One INT8 decode test shape, with the data's outlier channels in K.
struct Int8Case {
  std::vector<int64_t> lengths{1};                 ///< final length of each sequence
  int64_t steps = 1;                               ///< tokens appended (and decoded) one at a time at the end
  int64_t num_heads = 1;                           ///< query heads
  int64_t num_kv_heads = 1;                        ///< KV heads
  int64_t head_dim = 64;                           ///< d
  KeyScaling key_scaling = KeyScaling::per_token;  ///< K's scale granularity
  int64_t outlier_channels = 0;                    ///< channels of K with large magnitude (as real models have)
  float outlier_magnitude = 10.0f;                 ///< their scale relative to the other channels
  ScaleDtype scale_dtype = ScaleDtype::fp32;       ///< how the cache stores its scales

  /// "b2_L9-33_steps2_h8_kv2_d80_per_token_out3" (+ "_fp16scales").
  std::string name() const;
};

/// One registered quantized-cache decode version (an INT8 or FP8 row of decode_versions()) on
/// one test shape: the parameter of chapter 04's decode suites.
struct QuantizedVersionCase {
  const DecodeVersion* version = nullptr;  ///< the version under test
  Int8Case shape;                          ///< the shape it runs on
};

/// Every decode version registered for @p dtype caches on @p backend, crossed with @p shapes.
std::vector<QuantizedVersionCase> quantized_version_cases(KvDtype dtype, Backend backend,
                                                          const std::vector<Int8Case>& shapes);

/// Prints "cuda/decode_int8 (sim) b2_L9-33_steps2_…" in gtest messages.
void PrintTo(const QuantizedVersionCase& c, std::ostream* out);

/// "cuda_decode_int8_b2_L9_33_steps2_…": a gtest parameter name for @p info's case.
std::string quantized_version_case_name(const ::testing::TestParamInfo<QuantizedVersionCase>& info);

/// One (sequence, query head) of a quantized decode step: its largest error and its own bound.
struct HeadError {
  int64_t sequence = 0;  ///< b
  int64_t head = 0;      ///< query head h
  double max_abs = 0.0;  ///< max over the head's outputs of |ô − o| against the fp32 data's oracle
  double bound = 0.0;    ///< the derived per-element bound of this head (int8/fp8_kv_output_bound)
};

/// The measured error of one decode step against the unquantized attention.
struct Int8Errors {
  double rel_frobenius = 0.0;    ///< ‖ô − o‖/‖o‖ against the float64 oracle of the fp32 data
  double max_abs = 0.0;          ///< max |ô − o|
  double max_kl = 0.0;           ///< max over (sequence, head) of KL(p ‖ p̂) of the softmax weights
  int64_t saturated = 0;         ///< values the cache clamped (KvCache::saturated_count())
  std::vector<HeadError> heads;  ///< every (sequence, head): its error beside its own bound

  /// The largest max_abs / bound over the heads (≤ 1 when every head is within its bound).
  double worst_fraction_of_bound() const;
  /// "b0 h0 0.012 ≤ 0.57, b0 h1 …": each head's max |err| beside its bound.
  std::string per_head() const;
};

/// The INT8 quantization step the chapter defines (chapters/04-int8-kv-cache/README.md §1,
/// exercises/04-int8-kv-cache/ch04.h) for a group whose largest magnitude is @p max_abs — computed
/// here, apart from kernels/kv/quantize.cpp, so that a wrong quantizer cannot move its own
/// yardstick: max_abs / 127 in fp32; with fp16 scales the smallest fp16 ≥ that, capped at
/// 65504. The checks derive every INT8 error ceiling from this step of the unquantized data,
/// never from the step a cache stored.
float defined_int8_step(float max_abs, ScaleDtype scale_dtype);

/// The odd shapes: ragged batches, L = 1 … 129 (capped at @p max_length), head_dim 64/80/96/128
/// and 36/20 (off the vector path), GQA 1/2/4/8, both K scalings, with and without outliers,
/// fp32 and fp16 scales; every case but one appends (and decodes) its last tokens one at a time
/// after the prefill, so per-channel K scales calibrated on the prompt meet later tokens.
std::vector<Int8Case> int8_decode_cases(int64_t max_length = 129);

/// Replays generation for @p c: prefill length − steps tokens into an KvCache and an fp32
/// KvCache, then each step @p append (int8) / KvCache::append (fp32) one token and run @p decode.
/// Every error ceiling comes from the *defined* steps of the unquantized data
/// (defined_int8_step: max|x|/127 per group — a K or V row, or a per-channel K channel over
/// the prompt, over the first token when the prompt is empty), never from the steps the cache
/// stored. Checks every step: (e) every cached element within int8_element_error_bound of its
/// input at the defined step (half a step, or the clamped excess of a saturated value): a
/// cache whose steps are too coarse fails here; (d) the cache's saturated_count() equals the
/// number of values that had to be clamped at the defined steps; (a) every output finite;
/// (b) within attention_tolerance(fp32) of decode_reference over the INT8 cache (the exact
/// result over the dequantized values); (c) within int8_kv_output_bound — per (sequence, head),
/// its score error summed from the defined steps — of decode_reference over the fp32 data and of
/// the chapter-03 cpu/decode_simd. The message names the step; the NaN/Inf outputs first (how
/// many, the first as (sequence, head, channel)); the relative error, max-abs, softmax KL and
/// saturations over the finite outputs; the first few outputs that fail (b) or (c), each against
/// its bound, and how many more; and the seed. @p errors (when given) receives the
/// errors of the last step, each head's beside its own bound.
/// @p seed (when given) draws the data from that seed instead of a fresh one: K and V depend
/// only on the seed and the lengths, the last step's queries only on the seed
/// (replay_queries), so calls with one seed compare schemes (per-token or per-channel K, fp32 or
/// fp16 scales, steps appended past the prompt, FP8) on one dataset.
::testing::AssertionResult int8_decode_within_budget(const DecodeFn& decode, const KvAppendFn& append,
                                                     const Int8Case& c, Int8Errors* errors = nullptr,
                                                     std::optional<uint64_t> seed = std::nullopt);

/// Quantizes values in and beyond ±127·scale with @p quantize and compares each with
/// clamp(round(x / scale), −127, 127): fails on wrap-around (e.g. 128 → −128).
::testing::AssertionResult quantizer_saturates(const std::function<int8_t(float x, float scale)>& quantize);

/// Appends @p tokens random tokens (with outlier channels) with @p append to an empty cache of
/// @p key_scaling and @p scale_dtype and checks each element against the defined step Δ of its
/// group (defined_int8_step of the inputs; per-channel K: calibrated on the first token): within
/// int8_round_trip_bound(Δ) of its input when the input is inside ±127.5·Δ, else saturated to
/// ±127·Δ with the input's sign; no byte is −128; lengths advanced. Per-token scales (fp32, or
/// fp16 rounded up) must saturate nothing; per-channel K must report its saturations.
::testing::AssertionResult round_trip_within_half_step(const KvAppendFn& append, KeyScaling key_scaling,
                                                       int64_t tokens, ScaleDtype scale_dtype = ScaleDtype::fp32);

/// The scale definition: prefills @p prompt tokens per sequence (KvCache::prefill, the CPU
/// quantizer) into an empty cache of @p key_scaling and @p scale_dtype, then appends @p tokens
/// random tokens (with outlier channels) with @p append, and checks that every stored step equals
/// defined_int8_step of its group exactly: each V row's and (per-token) each K row's max|x|/127;
/// (per-channel) each K channel's max over the prompt's tokens, or over the first appended token
/// when @p prompt is 0. A ragged batch: the second sequence's prompt is one token longer.
::testing::AssertionResult int8_scales_match_definition(const KvAppendFn& append, KeyScaling key_scaling,
                                                        ScaleDtype scale_dtype, int64_t prompt, int64_t tokens);

/// scale_to_fp16_up on edge and random values: the result is an fp16 ≥ the scale, the fp16
/// just below it is < the scale, and scales past 65504 give 65504.
::testing::AssertionResult fp16_scales_round_up();

/// A NaN (and an Inf) in k_new / v_new of (sequence 1, KV head 2) must throw
/// std::invalid_argument naming "sequence 1" and "KV head 2", changing no byte and no length.
::testing::AssertionResult append_rejects_non_finite(const KvAppendFn& append);

}  // namespace inferlab::testing
