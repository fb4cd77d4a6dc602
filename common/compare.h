#pragma once
/// @file compare.h
/// Comparison of an implementation's output with a float64 oracle.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "common/tolerance.h"

namespace inferlab {

/// One element that failed: its flat index, multi-index, value and the oracle's value.
struct Mismatch {
  int64_t index;               ///< flat (C order) index
  Shape position;              ///< multi-index, when the shape is known
  double value;                ///< what the implementation wrote
  double expected;             ///< what the oracle computed
};

/// The result of compare_to_oracle().
struct Comparison {
  double rel_frobenius = 0.0;        ///< ‖out − ref‖ / ‖ref‖ (‖out − ref‖ when ‖ref‖ = 0)
  double max_abs_error = 0.0;        ///< max |out − ref|
  double max_abs_reference = 0.0;    ///< max |ref| (the scale of the absolute bound)
  int64_t non_finite = 0;            ///< how many outputs are NaN or ±Inf
  int64_t mismatches = 0;            ///< how many elements are outside the bound (NaN included)
  std::vector<Mismatch> first;       ///< the first few mismatching elements
  Tolerance tolerance{};             ///< the tolerance applied
  bool ok = false;                   ///< true when every criterion of the tolerance holds
  /// A multi-line human-readable report: the errors, the bounds and the first mismatches.
  std::string report() const;
};

/// Compares @p out with the oracle @p ref (same length) under @p tolerance. @p shape, when
/// given, is used to print mismatches as multi-indices. NaN/Inf in @p out never pass.
Comparison compare_to_oracle(std::span<const float> out, std::span<const double> ref, Tolerance tolerance,
                             const Shape& shape = {});

/// compare_to_oracle() for tensors; throws std::invalid_argument when the shapes differ.
Comparison compare_to_oracle(const Tensor<float>& out, const Tensor<double>& ref, Tolerance tolerance);

/// @p x rounded to the input type of @p precision, as an implementation computing in it receives
/// its inputs: fp32 unchanged; fp16 and bf16 to nearest, ties to even (common/half.h: the host
/// conversion the device wrappers use; overflow gives ±Inf); tf32 to 10 mantissa bits, to
/// nearest, ties away from zero (PTX cvt.rna.tf32.f32). NaN stays NaN.
float round_to_precision(float x, Precision precision);

/// Every element of @p x rounded by round_to_precision(): the inputs on which the float64 oracle
/// of an fp16 / bf16 / tf32 implementation is computed (tolerance.h: attention_tolerance()).
Tensor<float> round_to_precision(const Tensor<float>& x, Precision precision);

}  // namespace inferlab
