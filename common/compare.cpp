#include "common/compare.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <sstream>

#include "common/half.h"

namespace inferlab {

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::fp16: return "fp16";
    case Precision::bf16: return "bf16";
  }
  return "?";
}

Shape unflatten(int64_t index, const Shape& shape) {
  Shape position(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    position[d] = shape[d] == 0 ? 0 : index % shape[d];
    index = shape[d] == 0 ? 0 : index / shape[d];
  }
  return position;
}

std::string format_position(const Shape& position, const AxisNames& axes) {
  if (axes.empty() || axes.size() != position.size()) return to_string(position);
  std::string text = "(";
  for (size_t d = 0; d < position.size(); ++d) text += (d ? ", " : "") + axes[d] + " " + std::to_string(position[d]);
  return text + ")";
}

std::string Comparison::position_of(int64_t index) const {
  if (shape.empty()) return "element " + std::to_string(index);
  return format_position(unflatten(index, shape), axes);
}

Comparison compare_to_oracle(std::span<const float> out, std::span<const double> ref, Tolerance tolerance,
                             const Shape& shape, const AxisNames& axes) {
  require(out.size() == ref.size(), "out.size()", out.size(),
          "must equal the oracle's size " + std::to_string(ref.size()));
  Comparison result;
  result.tolerance = tolerance;
  result.size = int64_t(out.size());
  result.shape = shape;
  result.axes = axes;
  double diff_sq = 0.0;
  double ref_sq = 0.0;
  double finite_ref_sq = 0.0;
  for (double r : ref) result.max_abs_reference = std::max(result.max_abs_reference, std::abs(r));
  const double element_bound = tolerance.max_abs * std::max(1.0, result.max_abs_reference);
  for (size_t i = 0; i < out.size(); ++i) {
    const double value = out[i];
    const double diff = std::abs(value - ref[i]);
    const bool finite = std::isfinite(value);
    if (!finite) {
      if (result.non_finite++ == 0) result.first_non_finite = int64_t(i);
      if (std::isnan(value)) ++result.nan_count;
    } else {
      diff_sq += diff * diff;
      finite_ref_sq += ref[i] * ref[i];
      result.max_abs_error = std::max(result.max_abs_error, diff);
    }
    ref_sq += ref[i] * ref[i];
    if (!finite || diff > element_bound) {
      ++result.mismatches;
      if (result.first.size() < kReportedMismatches) {
        result.first.push_back({static_cast<int64_t>(i), shape.empty() ? Shape{} : unflatten(int64_t(i), shape),
                                value, ref[i]});
      }
    }
  }
  const double ref_norm = std::sqrt(ref_sq), finite_ref_norm = std::sqrt(finite_ref_sq);
  result.rel_frobenius = ref_norm > 0.0 ? std::sqrt(diff_sq) / ref_norm : std::sqrt(diff_sq);
  result.finite_rel_frobenius = finite_ref_norm > 0.0 ? std::sqrt(diff_sq) / finite_ref_norm : std::sqrt(diff_sq);
  if (result.non_finite > 0) result.rel_frobenius = std::numeric_limits<double>::infinity();
  result.ok = result.non_finite == 0 && result.mismatches == 0 && result.rel_frobenius <= tolerance.rel_frobenius;
  return result;
}

Comparison compare_to_oracle(std::span<const float> out, std::span<const double> ref, Tolerance tolerance,
                             const Shape& shape) {
  return compare_to_oracle(out, ref, tolerance, shape, AxisNames{});
}

float round_to_precision(float x, Precision precision) {
  switch (precision) {
    case Precision::fp32: return x;
    case Precision::fp16: return half_bits_to_float(float_to_half_bits(x));
    case Precision::bf16: return bfloat16_bits_to_float(float_to_bfloat16_bits(x));
    case Precision::tf32: {
      if (!std::isfinite(x)) return x;
      uint32_t bits = std::bit_cast<uint32_t>(x);
      bits = (bits + 0x1000u) & ~0x1FFFu;  // add half of the 13 dropped bits: to nearest, ties away
      return std::bit_cast<float>(bits);   // (a carry into the exponent is the correct result; ±Inf past the top)
    }
  }
  return x;
}

Tensor<float> round_to_precision(const Tensor<float>& x, Precision precision) {
  Tensor<float> rounded = x;
  if (precision == Precision::fp32) return rounded;
  for (int64_t i = 0; i < rounded.size(); ++i) rounded[i] = round_to_precision(rounded[i], precision);
  return rounded;
}

Comparison compare_to_oracle(const Tensor<float>& out, const Tensor<double>& ref, Tolerance tolerance,
                             const AxisNames& axes) {
  require(out.shape() == ref.shape(), "out.shape", to_string(out.shape()),
          "must equal the oracle's shape " + to_string(ref.shape()));
  return compare_to_oracle(out.span(), ref.span(), tolerance, out.shape(), axes);
}

std::string non_finite_summary(int64_t non_finite, int64_t nan_count, int64_t size) {
  std::string text =
      std::to_string(non_finite) + " of " + std::to_string(size) + (non_finite == 1 ? " outputs is " : " outputs are ");
  const int64_t inf_count = non_finite - nan_count;
  if (inf_count == 0) return text + "NaN";
  if (nan_count == 0) return text + "Inf";
  return text + "NaN or Inf (" + std::to_string(nan_count) + " NaN, " + std::to_string(inf_count) + " Inf)";
}

std::string Comparison::report() const {
  std::ostringstream text;
  text << std::setprecision(4);
  const double abs_bound = tolerance.max_abs * std::max(1.0, max_abs_reference);
  text << (ok ? "matches" : "DOES NOT MATCH") << " the float64 oracle: ";
  if (non_finite > 0) {
    // The NaN first: beside it, errors over every element would read "max abs error 0".
    const int64_t finite = size - non_finite, finite_out_of_bounds = mismatches - non_finite;
    text << non_finite_summary(non_finite, nan_count, size) << ", first at " << position_of(first_non_finite) << "\n  ";
    if (finite == 0) {
      text << "no output is finite";
    } else {
      text << "over the " << finite << " finite outputs: rel. Frobenius error " << finite_rel_frobenius << " (bound "
           << tolerance.rel_frobenius << "), max abs error " << max_abs_error << " (bound " << abs_bound << "), "
           << finite_out_of_bounds << " of them out of bounds";
    }
  } else {
    text << "rel. Frobenius error " << rel_frobenius << " (bound " << tolerance.rel_frobenius << "), max abs error "
         << max_abs_error << " (bound " << abs_bound << "), no NaN/Inf, " << mismatches << " of " << size
         << (size == 1 ? " element" : " elements") << " out of bounds";
  }
  for (const Mismatch& m : first)
    text << "\n  at " << position_of(m.index) << ": got " << m.value << ", expected " << m.expected;
  if (mismatches > int64_t(first.size()))
    text << "\n  … and " << mismatches - int64_t(first.size()) << " more out of bounds";
  return text.str();
}

}  // namespace inferlab
