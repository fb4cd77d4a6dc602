#pragma once
/// @file tolerance.h
/// The one place where numerical tolerances live. Every test compares with a float64 oracle
/// using the tolerance of the precision the implementation computes in; no test picks its own
/// number. For 16-bit precisions the oracle is computed on the inputs rounded to that type
/// (round_to_precision(), common/compare.h), and every bound is capped (kMaxRelFrobenius,
/// kMaxAbs) so that no tolerance can pass an all-zero, constant or permuted output.

#include <algorithm>
#include <cmath>
#include <string_view>

namespace inferlab {

/// The arithmetic an implementation uses (inputs / accumulation).
enum class Precision {
  fp32,  ///< fp32 inputs, fp32 accumulation
  tf32,  ///< fp32 inputs rounded to TF32 by tensor cores, fp32 accumulation
  fp16,  ///< fp16 inputs, fp32 accumulation
  bf16,  ///< bf16 inputs, fp32 accumulation
};

/// "fp32", "tf32", "fp16", "bf16".
std::string_view to_string(Precision precision);

/// Pass criteria against a float64 oracle. An output passes when it has no NaN/Inf, its
/// relative Frobenius error ‖out − ref‖/‖ref‖ is at most @ref rel_frobenius, and every element
/// is within @ref max_abs × max(1, max|ref|) of the oracle.
struct Tolerance {
  double rel_frobenius;  ///< bound on ‖out − ref‖ / ‖ref‖
  double max_abs;        ///< bound on |out − ref| per element, relative to max(1, max|ref|)
};

/// @name The caps: no tolerance of this header admits an output that computes nothing
/// Every bound returned below is at most kMaxRelFrobenius (relative Frobenius) and kMaxAbs (per
/// element, relative to max(1, max|ref|)). Why a cap, and why 1/8. Take an oracle `ref` of n
/// elements with mean μ and spread σ (‖ref‖² = n·(σ² + μ²)) and a bound τ on ‖out − ref‖/‖ref‖:
///   - all zeros: ‖0 − ref‖/‖ref‖ = 1 exactly, so any τ < 1 rejects it;
///   - a constant c: ‖c − ref‖² = n·(σ² + (c − μ)²) ≥ n·σ² (least at c = μ), a relative error of at
///     least σ/√(σ² + μ²). A constant passes only when |μ|/σ ≥ √(1 − τ²)/τ — for τ = 1/8, when the
///     oracle's own mean is ≥ 7.9 times its spread, i.e. when the right answer is itself nearly
///     constant;
///   - a permutation π of the correct output: ‖π(ref) − ref‖² = 2‖ref‖² − 2⟨π(ref), ref⟩, so it
///     passes only when ⟨π(ref), ref⟩/‖ref‖² ≥ 1 − τ²/2 (0.992 for τ = 1/8): when it moves almost
///     nothing that differs.
/// The per-element bound a·max(1, max|ref|) with a ≤ 1/8 admits a constant only when every
/// element of the oracle lies within 2a·max(1, max|ref|) of every other (a quarter of the largest).
/// The tests' data (fresh N(0, 1) inputs, never zeros or ramps) gives outputs with |μ| ≪ σ and
/// permutations that are uncorrelated, so all three are rejected with a wide margin — proved on
/// every shared check by tests/common/test_checks_reject.cpp. Every base tolerance is far below
/// the caps (bf16: 2e-2 / 5e-2, 6× and 2.5× below), so the caps bind only the widenings
/// (attention_tolerance's logit term, product_tolerance's conditioning): an input so
/// ill-conditioned that its widening would reach 1/8 cannot be checked in that precision, and
/// the check then fails instead of passing everything.
///@{
inline constexpr double kMaxRelFrobenius = 0.125;  ///< the largest relative Frobenius bound of any tolerance
inline constexpr double kMaxAbs = 0.125;           ///< the largest per-element bound (× max(1, max|ref|))
///@}

/// The tolerance for @p precision:
/// fp32 1e-5 (rel) / 1e-4 (abs); tf32 5e-4 / 5e-3; fp16 1e-2 / 2e-2; bf16 2e-2 / 5e-2.
/// For fp16 / bf16 / tf32 the oracle is computed on the inputs rounded to that type
/// (round_to_precision() in common/compare.h): rounding the inputs is the caller's choice of
/// precision, not an error of the implementation, and is not part of these budgets.
constexpr Tolerance tolerance_for(Precision precision) {
  switch (precision) {
    case Precision::fp32: return {1e-5, 1e-4};
    case Precision::tf32: return {5e-4, 5e-3};
    case Precision::fp16: return {1e-2, 2e-2};
    case Precision::bf16: return {2e-2, 5e-2};
  }
  return {0.0, 0.0};
}

/// The unit roundoff of @p precision's inputs (2^-24 fp32, 2^-11 tf32/fp16, 2^-8 bf16).
constexpr double unit_roundoff(Precision precision) {
  switch (precision) {
    case Precision::fp32: return 0x1p-24;
    case Precision::tf32: return 0x1p-11;
    case Precision::fp16: return 0x1p-11;
    case Precision::bf16: return 0x1p-8;
  }
  return 0.0;
}

/// The unit roundoff of the accumulation every precision of this lab uses: fp32, 2^-24.
inline constexpr double kAccumulationRoundoff = 0x1p-24;

/// @p tolerance with both bounds limited to the caps (kMaxRelFrobenius, kMaxAbs).
constexpr Tolerance capped(Tolerance tolerance) {
  return {std::min(tolerance.rel_frobenius, kMaxRelFrobenius), std::min(tolerance.max_abs, kMaxAbs)};
}

/// The tolerance for attention computed in @p precision whose largest |logit| (scaled score
/// q·k/√d) is @p max_abs_logit, against the float64 oracle **computed on the inputs rounded to
/// @p precision** (round_to_precision(); for fp32 the inputs themselves).
///
/// Why the rounded inputs. Softmax is ill-conditioned at large logits: perturbing q and k by a
/// relative u moves a logit s by up to about 2·s·u and its weight by a factor up to e^{2su}. At
/// s = 400 that is e^{0.39} for fp16 (u = 2^-11) and e^{3.1} for bf16 (u = 2^-8): the rounded
/// inputs define a different distribution, and a tolerance wide enough to cover that (this
/// function used to add 8·s·u) is wide enough to pass an all-zero output (8·400·2^-11 = 1.56 > 1).
/// Against the rounded inputs, what is left is the implementation's arithmetic:
///   1. the scores, accumulated in fp32 from exact products of 16-bit inputs: a logit error of a
///      few d·2^-24 of Σ_c|q_c·k_c|/√d, below 8·s·2^-24 on the tests' data — the widening below,
///      the same as for fp32 (it binds fp32 past s ≈ 21, fp16 and bf16 only past s ≈ 2·10^4);
///   2. P rounded to 16 bits for the P·V product (cuBLAS GemmEx, WMMA), exp() in fp32: each
///      weight off by a relative u, so |δo| ≤ u·Σ_j p_j·|v_j| ≤ u·max|v| whatever the logits,
///      and the normalising sum off by at most the same relative u: together inside the base
///      max_abs (fp16: 2e-2 against 2·2^-11 ≈ 1e-3; bf16: 5e-2 against 2·2^-8 ≈ 8e-3, for
///      max|v| of a few units).
/// So: tolerance_for(@p precision), both bounds widened to 8·max(1, s)·2^-24 where that is
/// larger, then capped (kMaxRelFrobenius, kMaxAbs) — never wide enough to pass a zero or
/// constant output. For ordinary data (s of a few units) it is tolerance_for(@p precision).
/// tf32 (no version computes in it yet) follows the same rule against round_to_precision(tf32).
constexpr Tolerance attention_tolerance(Precision precision, double max_abs_logit) {
  const Tolerance base = tolerance_for(precision);
  const double conditioning = 8.0 * std::max(1.0, max_abs_logit) * kAccumulationRoundoff;
  return capped({std::max(base.rel_frobenius, conditioning), std::max(base.max_abs, conditioning)});
}

/// The tolerance for a product or sum of products (a GEMM, dot-product scores) whose condition
/// number is @p condition = ‖Σ|a·b|‖ / ‖Σ a·b‖ (the size of the summed terms against the size
/// of the result). Rounding errors scale with the terms, so a result that cancels to near zero
/// (a 1×1 product, say) has a large relative error however well it is computed: the relative
/// Frobenius bound is widened by max(1, condition); the absolute bound stays. Capped at
/// kMaxRelFrobenius: a product so ill-conditioned (condition ≥ 12500 in fp32) that its result is
/// mostly cancellation is not a usable test input, and is failed rather than accepted whatever
/// it is (random N(0, 1) inputs give conditions of a few units).
constexpr Tolerance product_tolerance(Precision precision, double condition) {
  Tolerance tolerance = tolerance_for(precision);
  tolerance.rel_frobenius *= std::max(1.0, condition);
  return capped(tolerance);
}

static_assert(tolerance_for(Precision::bf16).rel_frobenius < kMaxRelFrobenius &&
                  tolerance_for(Precision::bf16).max_abs < kMaxAbs,
              "the base tolerances must sit below the caps");
static_assert(attention_tolerance(Precision::bf16, 1e30).rel_frobenius <= kMaxRelFrobenius &&
                  attention_tolerance(Precision::fp16, 1e30).max_abs <= kMaxAbs,
              "no logit size widens a tolerance past the caps");

/// INT8 KV cache (chapter 04): the bound on one output element of decode attention over a
/// quantized cache, against the exact attention over the unquantized K and V, derived from the
/// quantization steps (no tuned number). Each group (a K row or channel, a V row) is stored as
/// x̂ = Δ·clamp(round(x/Δ)) with Δ = max|x|/127 over the group, so |x̂ − x| ≤ Δ/2 per element.
///   1. Scores: s_j = q·k_j/√d, so |ŝ_j − s_j| ≤ Σ_c |q_c|·Δk_{j,c} / (2√d) ≤ E, where the caller
///      takes E = @p score_error, the max of that sum over the keys j (per-token K: Δk_{j,c} = Δk_j;
///      per-channel: Δk_c).
///   2. Softmax: p̂_j = p_j·e^{e_j} / Σ_k p_k·e^{e_k} with |e_j| ≤ E, so p̂_j/p_j ∈ [e^{−2E}, e^{2E}]
///      and |p̂_j − p_j| ≤ (e^{2E} − 1)·p_j.
///   3. Output: ô − o = Σ_j (p̂_j − p_j)·v_j + Σ_j p̂_j·(v̂_j − v_j), so per element
///      |ô − o| ≤ (e^{2E} − 1)·max_j|v_j| + max_j Δv_j / 2
///      with @p max_abs_value = max|v| and @p max_value_step = max Δv over the sequence.
/// The fp32 arithmetic of the kernel adds attention_tolerance(fp32, @p max_abs_logit).max_abs ×
/// max(1, @p max_abs_value). The bound is worst-case (every rounding error aligned); measured
/// errors are far below it (the rounding errors are independent), which is why the tests also
/// report the relative error and the KL divergence of the softmax weights.
inline double int8_kv_output_bound(double score_error, double max_abs_value, double max_value_step,
                                   double max_abs_logit) {
  const double quantization = std::expm1(2.0 * score_error) * max_abs_value + 0.5 * max_value_step;
  return quantization + attention_tolerance(Precision::fp32, max_abs_logit).max_abs * std::max(1.0, max_abs_value);
}

/// The round-trip bound of one INT8 element quantized with step @p step: half a step, widened
/// by fp32 rounding of x/Δ and of Δ·q (a few ulps of 127·Δ).
inline double int8_round_trip_bound(double step) {
  return step * (0.5 + 127.0 * 4.0 * 0x1p-24);
}

/// The quantization error of INT8 element @p x stored with step @p step, saturation included:
/// int8_round_trip_bound(step) when x is inside the range (|x| ≤ 127.5·step), else the clamped
/// excess |x| − 127·step (per-channel K scales are calibrated on the prompt; a later token can
/// exceed them and is clamped to ±127·step), widened by the same fp32 rounding.
inline double int8_element_error_bound(double x, double step) {
  const double magnitude = x < 0.0 ? -x : x;
  if (magnitude <= 127.5 * step) return int8_round_trip_bound(step);
  return magnitude - 127.0 * step + step * 127.0 * 4.0 * 0x1p-24;
}

/// FP8 E4M3 KV cache (chapter 04): the round-trip bound of one element @p x stored with scale
/// @p scale (Δ = max|x|/448 over its row) as Δ·e4m3(x/Δ) — derived from the format, not tuned.
/// E4M3 keeps 3 mantissa bits: a scaled magnitude y = |x|/Δ in [2^e, 2^(e+1)), e ≥ −6, is
/// rounded to a multiple of 2^(e−3), so the error is at most half of that, 2^(e−4) ≤ y/16; below
/// 2^−6 (subnormals) the step is 2^−9 and the error at most 2^−10. Times Δ, plus the fp32
/// rounding of x/Δ and of Δ·value (a few ulps of 448·Δ). Unlike INT8's Δ/2, the bound shrinks
/// with |x|: the small elements of a row with an outlier keep their relative precision.
inline double fp8_e4m3_round_trip_bound(double x, double scale) {
  if (scale == 0.0) return 0.0;
  const double y = std::fabs(x) / scale;
  const double half_step = y >= 0x1p-6 ? std::ldexp(1.0, std::ilogb(y) - 4) : 0x1p-10;
  return scale * (half_step + 448.0 * 4.0 * 0x1p-24);
}

/// FP8 E4M3 KV cache: the bound on one output element of decode attention over the quantized
/// cache against the exact attention over the fp32 K and V — int8_kv_output_bound's derivation
/// with each element's own error in place of half a fixed step: with @p score_error
/// E = max_j Σ_c |q_c|·fp8_e4m3_round_trip_bound(k_{j,c}, Δk_j)/√d, @p max_abs_value = max|v| and
/// @p max_value_error = max over j, c of fp8_e4m3_round_trip_bound(v_{j,c}, Δv_j),
///     |ô − o| ≤ (e^{2E} − 1)·max|v| + max_value_error,
/// plus attention_tolerance(fp32, @p max_abs_logit).max_abs × max(1, max|v|) for the kernel's fp32
/// arithmetic. Worst case; the tests also report the measured relative error and softmax KL.
inline double fp8_kv_output_bound(double score_error, double max_abs_value, double max_value_error,
                                  double max_abs_logit) {
  return std::expm1(2.0 * score_error) * max_abs_value + max_value_error +
         attention_tolerance(Precision::fp32, max_abs_logit).max_abs * std::max(1.0, max_abs_value);
}

}  // namespace inferlab
