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

/// Names of a tensor's dimensions in the lesson's words, outermost first — {"head", "query",
/// "channel"} for a prefill output [num_heads, seq_len, head_dim]: a report then names an element
/// "(head 1, query 3, channel 17)" instead of by its flat index.
using AxisNames = std::vector<std::string>;

/// The multi-index of the flat (C order) index @p index in @p shape.
Shape unflatten(int64_t index, const Shape& shape);

/// "(head 1, query 3, channel 17)": @p position with one name of @p axes per dimension; "[1, 3,
/// 17]" when @p axes is empty or does not have one name per dimension.
std::string format_position(const Shape& position, const AxisNames& axes = {});

/// "2 of 4096 outputs are NaN", "1 of 33 outputs is Inf", "3 of 64 outputs are NaN or Inf (2 NaN,
/// 1 Inf)": how a report counts @p non_finite NaN/Inf outputs, @p nan_count of them NaN, among @p size.
std::string non_finite_summary(int64_t non_finite, int64_t nan_count, int64_t size);

/// One element that failed: its flat index, multi-index, value and the oracle's value.
struct Mismatch {
  int64_t index;               ///< flat (C order) index
  Shape position;              ///< multi-index, when the shape is known
  double value;                ///< what the implementation wrote
  double expected;             ///< what the oracle computed
};

/// The result of compare_to_oracle().
struct Comparison {
  double rel_frobenius = 0.0;  ///< ‖out − ref‖ / ‖ref‖ (‖out − ref‖ when ‖ref‖ = 0); ∞ with any NaN/Inf
  double finite_rel_frobenius = 0.0;  ///< the same over the finite outputs only (printed beside a NaN count)
  double max_abs_error = 0.0;         ///< max |out − ref| over the finite outputs
  double max_abs_reference = 0.0;    ///< max |ref| (the scale of the absolute bound)
  int64_t size = 0;                  ///< how many elements were compared
  int64_t non_finite = 0;            ///< how many outputs are NaN or ±Inf
  int64_t nan_count = 0;             ///< how many of those are NaN (the rest are ±Inf)
  int64_t first_non_finite = -1;     ///< flat index of the first NaN/Inf output, −1 when none
  int64_t mismatches = 0;            ///< how many elements are outside the bound (NaN included)
  std::vector<Mismatch> first;       ///< the first few mismatching elements (at most kReportedMismatches)
  Shape shape;                       ///< the outputs' shape, when known (positions are printed in it)
  AxisNames axes;                    ///< the names of its dimensions, when given
  Tolerance tolerance{};             ///< the tolerance applied
  bool ok = false;                   ///< true when every criterion of the tolerance holds
  /// A human-readable report. When outputs are NaN/Inf it says so first — "DOES NOT MATCH the
  /// float64 oracle: 2 of 4096 outputs are NaN, first at (row 3, col 17)" — and then gives the
  /// errors over the finite outputs; else the errors and their bounds. Then the first
  /// mismatches (at most kReportedMismatches, positions named by @ref axes) and how many more.
  std::string report() const;
  /// How to name element @p index: format_position() of its multi-index, or "element N" when the
  /// shape is unknown.
  std::string position_of(int64_t index) const;
};

/// How many mismatching elements a Comparison keeps and its report prints.
inline constexpr size_t kReportedMismatches = 3;

/// Compares @p out with the oracle @p ref (same length) under @p tolerance. @p shape, when
/// given, is used to print mismatches as multi-indices, named by @p axes when given. NaN/Inf in
/// @p out never pass.
Comparison compare_to_oracle(std::span<const float> out, std::span<const double> ref, Tolerance tolerance,
                             const Shape& shape, const AxisNames& axes);

/// compare_to_oracle() with positions printed as multi-indices of @p shape (when given), unnamed.
Comparison compare_to_oracle(std::span<const float> out, std::span<const double> ref, Tolerance tolerance,
                             const Shape& shape = {});

/// compare_to_oracle() for tensors, positions named by @p axes (one name per dimension, e.g.
/// {"sequence", "head", "channel"}); throws std::invalid_argument when the shapes differ.
Comparison compare_to_oracle(const Tensor<float>& out, const Tensor<double>& ref, Tolerance tolerance,
                             const AxisNames& axes = {});

/// @p x rounded to the input type of @p precision, as an implementation computing in it receives
/// its inputs: fp32 unchanged; fp16 and bf16 to nearest, ties to even (common/half.h: the host
/// conversion the device wrappers use; overflow gives ±Inf); tf32 to 10 mantissa bits, to
/// nearest, ties away from zero (PTX cvt.rna.tf32.f32). NaN stays NaN.
float round_to_precision(float x, Precision precision);

/// Every element of @p x rounded by round_to_precision(): the inputs on which the float64 oracle
/// of an fp16 / bf16 / tf32 implementation is computed (tolerance.h: attention_tolerance()).
Tensor<float> round_to_precision(const Tensor<float>& x, Precision precision);

}  // namespace inferlab
