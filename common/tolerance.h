#pragma once
/// @file tolerance.h
/// The one place where numerical tolerances live. Every test compares with a float64 oracle
/// using the tolerance of the precision the implementation computes in; no test picks its own
/// number.

#include <algorithm>
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

/// The tolerance for @p precision:
/// fp32 1e-5 (rel) / 1e-4 (abs); tf32 5e-4 / 5e-3; fp16 1e-2 / 2e-2; bf16 2e-2 / 5e-2.
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

/// The tolerance for attention whose largest |logit| (scaled score) is @p max_abs_logit.
/// Softmax is ill-conditioned at large logits: rounding a logit of size s perturbs its weight
/// by a relative s·u (u = unit roundoff), so the bound grows with s. This widens the base
/// tolerance by 8·s·u (8 covers the dot product and the exponent); for ordinary data (s of a
/// few units) it changes nothing.
constexpr Tolerance attention_tolerance(Precision precision, double max_abs_logit) {
  const Tolerance base = tolerance_for(precision);
  const double conditioning = 8.0 * std::max(1.0, max_abs_logit) * unit_roundoff(precision);
  return {std::max(base.rel_frobenius, conditioning), std::max(base.max_abs, conditioning)};
}

/// The tolerance for a product or sum of products (a GEMM, dot-product scores) whose condition
/// number is @p condition = ‖Σ|a·b|‖ / ‖Σ a·b‖ (the size of the summed terms against the size
/// of the result). Rounding errors scale with the terms, so a result that cancels to near zero
/// (a 1×1 product, say) has a large relative error however well it is computed: the relative
/// Frobenius bound is widened by max(1, condition); the absolute bound stays.
constexpr Tolerance product_tolerance(Precision precision, double condition) {
  Tolerance tolerance = tolerance_for(precision);
  tolerance.rel_frobenius *= std::max(1.0, condition);
  return tolerance;
}

}  // namespace inferlab
