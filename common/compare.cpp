#include "common/compare.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <iomanip>
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

namespace {

Shape unflatten(int64_t index, const Shape& shape) {
  Shape position(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    position[d] = shape[d] == 0 ? 0 : index % shape[d];
    index = shape[d] == 0 ? 0 : index / shape[d];
  }
  return position;
}

}  // namespace

Comparison compare_to_oracle(std::span<const float> out, std::span<const double> ref, Tolerance tolerance,
                             const Shape& shape) {
  require(out.size() == ref.size(), "out.size()", out.size(),
          "must equal the oracle's size " + std::to_string(ref.size()));
  constexpr size_t kReported = 8;
  Comparison result;
  result.tolerance = tolerance;
  double diff_sq = 0.0;
  double ref_sq = 0.0;
  for (double r : ref) result.max_abs_reference = std::max(result.max_abs_reference, std::abs(r));
  const double element_bound = tolerance.max_abs * std::max(1.0, result.max_abs_reference);
  for (size_t i = 0; i < out.size(); ++i) {
    const double value = out[i];
    const double diff = std::abs(value - ref[i]);
    const bool finite = std::isfinite(value);
    if (!finite) ++result.non_finite;
    if (finite) {
      diff_sq += diff * diff;
      result.max_abs_error = std::max(result.max_abs_error, diff);
    }
    ref_sq += ref[i] * ref[i];
    if (!finite || diff > element_bound) {
      ++result.mismatches;
      if (result.first.size() < kReported) {
        result.first.push_back({static_cast<int64_t>(i), shape.empty() ? Shape{} : unflatten(int64_t(i), shape),
                                value, ref[i]});
      }
    }
  }
  const double ref_norm = std::sqrt(ref_sq);
  result.rel_frobenius = ref_norm > 0.0 ? std::sqrt(diff_sq) / ref_norm : std::sqrt(diff_sq);
  if (result.non_finite > 0) result.rel_frobenius = std::numeric_limits<double>::infinity();
  result.ok = result.non_finite == 0 && result.mismatches == 0 && result.rel_frobenius <= tolerance.rel_frobenius;
  return result;
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

Comparison compare_to_oracle(const Tensor<float>& out, const Tensor<double>& ref, Tolerance tolerance) {
  require(out.shape() == ref.shape(), "out.shape", to_string(out.shape()),
          "must equal the oracle's shape " + to_string(ref.shape()));
  return compare_to_oracle(out.span(), ref.span(), tolerance, out.shape());
}

std::string Comparison::report() const {
  std::ostringstream text;
  text << std::setprecision(4);
  text << (ok ? "matches" : "DOES NOT MATCH") << " the float64 oracle: rel. Frobenius error " << rel_frobenius
       << " (bound " << tolerance.rel_frobenius << "), max abs error " << max_abs_error << " (bound "
       << tolerance.max_abs * std::max(1.0, max_abs_reference) << "), " << non_finite << " NaN/Inf, "
       << mismatches << " elements out of bounds";
  for (const Mismatch& m : first) {
    text << "\n  at " << (m.position.empty() ? std::to_string(m.index) : to_string(m.position)) << ": got "
         << m.value << ", expected " << m.expected;
  }
  return text.str();
}

}  // namespace inferlab
