// Weight storage and format conversions (weight.h).
#include "kernels/layers/weight.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "common/half.h"

namespace inferlab {

std::string_view to_string(WeightFormat format) {
  switch (format) {
    case WeightFormat::f32:
      return "f32";
    case WeightFormat::f16:
      return "f16";
    case WeightFormat::bf16:
      return "bf16";
  }
  return "?";
}

WeightFormat parse_weight_format(std::string_view name) {
  for (const WeightFormat f : {WeightFormat::f32, WeightFormat::f16, WeightFormat::bf16})
    if (name == to_string(f)) return f;
  require(false, "weight format", std::string(name), "is not one of f32, f16, bf16");
  return WeightFormat::f32;
}

int64_t bytes_per_weight(WeightFormat format) {
  return format == WeightFormat::f32 ? 4 : 2;
}

Weight::Weight(Tensor<float> w) {
  check_rank(w, 2, "weight");
  out_ = w.dim(0);
  in_ = w.dim(1);
  f32_ = std::move(w);
}

Weight Weight::convert(const Tensor<float>& w, WeightFormat format) {
  check_rank(w, 2, "weight");
  if (format == WeightFormat::f32) return Weight(w);
  Weight out;
  out.format_ = format;
  out.out_ = w.dim(0);
  out.in_ = w.dim(1);
  out.bits16_ = Tensor<uint16_t>(w.shape());
  const auto to_bits = format == WeightFormat::f16 ? float_to_half_bits : float_to_bfloat16_bits;
  for (int64_t i = 0; i < w.size(); ++i) out.bits16_.data()[i] = to_bits(w.data()[i]);
  return out;
}

const Tensor<float>& Weight::f32() const {
  if (format_ != WeightFormat::f32)
    throw std::logic_error("Weight::f32(): the weight is stored as " + std::string(to_string(format_)));
  return f32_;
}

const Tensor<uint16_t>& Weight::bits16() const {
  if (format_ == WeightFormat::f32) throw std::logic_error("Weight::bits16(): the weight is stored as f32");
  return bits16_;
}

float Weight::at(int64_t row, int64_t col) const {
  const int64_t i = row * in_ + col;
  switch (format_) {
    case WeightFormat::f32:
      return f32_.data()[i];
    case WeightFormat::f16:
      return half_bits_to_float(bits16_.data()[i]);
    case WeightFormat::bf16:
      return bfloat16_bits_to_float(bits16_.data()[i]);
  }
  return 0.0f;
}

Tensor<float> Weight::to_f32() const {
  if (format_ == WeightFormat::f32) return f32_;
  Tensor<float> out({out_, in_});
  for (int64_t r = 0; r < out_; ++r)
    for (int64_t c = 0; c < in_; ++c) out.data()[r * in_ + c] = at(r, c);
  return out;
}

void Weight::row_to_f32(int64_t row, std::span<float> out) const {
  if (row < 0 || row >= out_)  // checked per call: the message is built only for a bad row
    require(false, "row", row, "must be in [0, out_features = " + std::to_string(out_) + ")");
  if (int64_t(out.size()) != in_)
    require(false, "out.size()", out.size(), "must equal in_features = " + std::to_string(in_));
  const int64_t first = row * in_;
  switch (format_) {
    case WeightFormat::f32:
      std::copy_n(f32_.data() + first, in_, out.data());
      return;
    case WeightFormat::f16:
      for (int64_t c = 0; c < in_; ++c) out[size_t(c)] = half_bits_to_float(bits16_.data()[first + c]);
      return;
    case WeightFormat::bf16:
      for (int64_t c = 0; c < in_; ++c) out[size_t(c)] = bfloat16_bits_to_float(bits16_.data()[first + c]);
      return;
  }
}

}  // namespace inferlab
