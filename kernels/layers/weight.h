#pragma once
/// @file weight.h
/// A weight matrix as the linear layer reads it: a format, a shape [out_features, in_features]
/// (each output feature's weights contiguous, llama2.c's layout) and the bytes of that format.
/// A decode step at batch 1 reads every weight once and does 2 FLOPs per weight, so its time is
/// the weights' bytes over the bandwidth: the format, not the parameter count, sets the floor —
/// which is why cost accounting takes bytes() from here and never assumes 4 bytes a weight.
///
/// Formats: fp32, fp16 (IEEE half) and bf16 (bfloat16), converted from fp32 by rounding to nearest
/// even; the linear layer widens 16-bit weights to fp32 in registers and accumulates in fp32.
/// Block-quantized formats (chapter 08: Q8_0, Q4_1, … with a scale per block of 32) join this
/// enum with their own storage and kernels.

#include <cstdint>
#include <span>
#include <string_view>

#include "common/tensor.h"

namespace inferlab {

/// How a weight matrix is stored.
enum class WeightFormat {
  f32,   ///< IEEE fp32, 4 bytes a weight
  f16,   ///< IEEE fp16, 2 bytes a weight
  bf16,  ///< bfloat16 (fp32's exponent, 8 bits of mantissa), 2 bytes a weight
};

/// "f32", "f16", "bf16".
std::string_view to_string(WeightFormat format);

/// The format named @p name ("f32", "f16", "bf16"). Throws std::invalid_argument naming
/// @p name and the known formats.
WeightFormat parse_weight_format(std::string_view name);

/// Bytes of one weight in @p format.
int64_t bytes_per_weight(WeightFormat format);

/// A weight matrix [out_features, in_features] in one format.
class Weight {
 public:
  /// An empty weight (no rows, no columns), fp32.
  Weight() = default;
  /// Takes @p w ([out_features, in_features], rank 2) as an fp32 weight, without a copy. Throws
  /// std::invalid_argument when @p w is not of rank 2.
  explicit Weight(Tensor<float> w);
  /// @p w converted to @p format (round to nearest even; fp32 is a copy). Throws
  /// std::invalid_argument when @p w is not of rank 2.
  static Weight convert(const Tensor<float>& w, WeightFormat format);

  /// The storage format.
  WeightFormat format() const { return format_; }
  /// Rows: one per output feature.
  int64_t out_features() const { return out_; }
  /// Columns: one per input feature.
  int64_t in_features() const { return in_; }
  /// [out_features, in_features].
  Shape shape() const { return {out_, in_}; }
  /// True when the weight has no elements.
  bool empty() const { return out_ * in_ == 0; }
  /// Bytes of the stored weights: what a linear layer over them reads.
  int64_t bytes() const { return out_ * in_ * bytes_per_weight(format_); }

  /// The fp32 storage. Throws std::logic_error for another format.
  const Tensor<float>& f32() const;
  /// The 16-bit storage (fp16 or bf16 bits), [out_features, in_features]. Throws
  /// std::logic_error for fp32.
  const Tensor<uint16_t>& bits16() const;
  /// The weight at (@p row, @p col) as a float (exact: every format here widens exactly).
  /// Unchecked indices.
  float at(int64_t row, int64_t col) const;
  /// Every weight as fp32, [out_features, in_features].
  Tensor<float> to_f32() const;
  /// Bytes of one stored row (one output feature's weights): what a lookup of one row reads.
  int64_t row_bytes() const { return in_ * bytes_per_weight(format_); }
  /// Row @p row widened to fp32 into @p out (in_features floats): a table lookup, as the token
  /// embedding is read (one row per token), exact in every format here. Throws
  /// std::invalid_argument when @p row is outside [0, out_features) or @p out has another size.
  void row_to_f32(int64_t row, std::span<float> out) const;

 private:
  WeightFormat format_ = WeightFormat::f32;
  int64_t out_ = 0, in_ = 0;
  Tensor<float> f32_;
  Tensor<uint16_t> bits16_;
};

}  // namespace inferlab
