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
/// The block-quantized formats of chapter 08 — ggml's Q8_0, Q4_0 and Q4_1, 32 weights a block with
/// an fp16 scale (and Q4_1 an fp16 minimum; kernels/quant/block_formats.h) — are stored as their
/// block bytes, row by row (each row in_features / 32 blocks, GGUF's layout), owned or borrowed
/// (view(): a memory-mapped file's tensor, without a copy); the linear layer multiplies them with
/// kernels/quant/quant_matmul.h. Their bytes a weight are fractional (Q8_0 1.0625, Q4_0 0.5625,
/// Q4_1 0.625): count bytes with bytes() / row_bytes() / weight_row_bytes(), exactly. A block
/// weight is also repacked once, when it is made, into chapter 11's interleaved layout
/// (kernels/quant/packed_matrix.h), which the CPU linear layer multiplies; the GGUF bytes stay for
/// lookups, the GPU and the shards.

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include "common/tensor.h"
#include "kernels/quant/block_formats.h"
#include "kernels/quant/packed_matrix.h"
#include "kernels/quant/quant_matmul.h"

namespace inferlab {

/// How a weight matrix is stored.
enum class WeightFormat {
  f32,   ///< IEEE fp32, 4 bytes a weight
  f16,   ///< IEEE fp16, 2 bytes a weight
  bf16,  ///< bfloat16 (fp32's exponent, 8 bits of mantissa), 2 bytes a weight
  q8_0,  ///< ggml Q8_0: blocks of 32 int8 codes and an fp16 scale, 34 bytes a block
  q4_0,  ///< ggml Q4_0: blocks of 32 4-bit codes (centred on 8) and an fp16 scale, 18 bytes a block
  q4_1,  ///< ggml Q4_1: blocks of 32 4-bit codes, an fp16 scale and an fp16 minimum, 20 bytes a block
};

/// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1".
std::string_view to_string(WeightFormat format);

/// The format named @p name ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1"). Throws
/// std::invalid_argument naming @p name and the known formats.
WeightFormat parse_weight_format(std::string_view name);

/// True for the block-quantized formats (q8_0, q4_0, q4_1).
bool is_block_format(WeightFormat format);

/// The ggml tensor type of @p format (F32, F16, BF16, Q8_0, Q4_0, Q4_1).
quant::GgmlType ggml_type(WeightFormat format);

/// Bytes of one weight in @p format, for the element formats f32 (4), f16 and bf16 (2). Throws
/// std::invalid_argument for a block format, whose bytes a weight are not whole: use
/// weight_row_bytes() (or Weight::bytes()) instead.
int64_t bytes_per_weight(WeightFormat format);

/// Exact bytes of a row of @p in weights in @p format: in · 4 or in · 2, or in / 32 blocks of 34,
/// 18 or 20 bytes. Throws std::invalid_argument when @p in is negative or, for a block format, not
/// a multiple of 32.
int64_t weight_row_bytes(WeightFormat format, int64_t in);

/// A weight matrix [out_features, in_features] in one format.
class Weight {
 public:
  /// An empty weight (no rows, no columns), fp32.
  Weight() = default;
  /// Takes @p w ([out_features, in_features], rank 2) as an fp32 weight, without a copy. Throws
  /// std::invalid_argument when @p w is not of rank 2.
  explicit Weight(Tensor<float> w);
  /// @p w converted to @p format: round to nearest even for f16 and bf16 (fp32 is a copy); for a
  /// block format each row quantized as ggml's reference quantizer does (kernels/quant/block_quant.h).
  /// Throws std::invalid_argument when @p w is not of rank 2, or for a block format when its rows
  /// are not a multiple of 32 weights.
  static Weight convert(const Tensor<float>& w, WeightFormat format);
  /// A weight [@p out, @p in] in @p format over @p bytes stored elsewhere (a GGUF file's tensor:
  /// rows of weight_row_bytes(format, in) bytes, little-endian), which @p keep_alive keeps alive
  /// for as long as the weight or a copy of it lives. Block formats are wrapped without a copy;
  /// f32, f16 and bf16 are copied into the weight's own storage (@p keep_alive is then not held).
  /// Throws std::invalid_argument when @p out or @p in is negative, @p in is not a multiple of 32
  /// for a block format, or bytes.size() is not out · weight_row_bytes(format, in).
  static Weight view(WeightFormat format, int64_t out, int64_t in, std::span<const uint8_t> bytes,
                     std::shared_ptr<const void> keep_alive);

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
  /// Bytes of the stored weights, exact in every format: what a linear layer over them reads.
  int64_t bytes() const { return out_ * row_bytes(); }

  /// The fp32 storage. Throws std::logic_error for another format.
  const Tensor<float>& f32() const;
  /// The 16-bit storage (fp16 or bf16 bits), [out_features, in_features]. Throws
  /// std::logic_error for another format.
  const Tensor<uint16_t>& bits16() const;
  /// The block bytes of a block format: out_features rows of row_bytes() bytes. Throws
  /// std::logic_error for f32, f16 and bf16.
  std::span<const uint8_t> block_bytes() const;
  /// The block bytes as the quantized matmul's matrix (quant_matmul.h). Throws std::logic_error
  /// for f32, f16 and bf16.
  quant::BlockMatrix block_matrix() const;
  /// The blocks repacked for chapter 11's GEMM (packed_matrix.h), made when the weight was. Throws
  /// std::logic_error for f32, f16 and bf16.
  const quant::PackedMatrix& packed() const;
  /// The weight at (@p row, @p col) as a float: exact for f32, f16, bf16, Q8_0 (q·d) and Q4_0
  /// ((q − 8)·d); Q4_1's q·d + m is rounded once to fp32, as ggml's dequantizer does. Unchecked
  /// indices.
  float at(int64_t row, int64_t col) const;
  /// Every weight as fp32 (as at()), [out_features, in_features].
  Tensor<float> to_f32() const;
  /// Bytes of one stored row (one output feature's weights), exact: what a lookup of one row reads.
  int64_t row_bytes() const { return weight_row_bytes(format_, in_); }
  /// Row @p row widened (or dequantized, as at()) to fp32 into @p out (in_features floats): a table
  /// lookup, as the token embedding is read (one row per token). Throws std::invalid_argument when
  /// @p row is outside [0, out_features) or @p out has another size.
  void row_to_f32(int64_t row, std::span<float> out) const;
  /// The stored bytes, row after row (rows of row_bytes(), little-endian): the fp32 or 16-bit
  /// storage seen as bytes, or the blocks.
  std::span<const uint8_t> stored_bytes() const;

  /// The rows [begin, end) of each of @p row_ranges, one range after another, as a new weight in
  /// the same format (a shard of the output features: chapter 10's column-parallel split). The
  /// rows are copied into storage of the new weight's own. Throws std::invalid_argument for a
  /// range outside [0, out_features) or with begin > end, naming it.
  Weight take_rows(std::span<const std::pair<int64_t, int64_t>> row_ranges) const;
  /// The columns [@p begin, @p end) of every row, as a new weight in the same format (a shard of
  /// the input features: chapter 10's row-parallel split), copied. A block format is cut between
  /// blocks only: @p begin and @p end must be multiples of 32. Throws std::invalid_argument
  /// naming the bad bound.
  Weight take_columns(int64_t begin, int64_t end) const;

 private:
  WeightFormat format_ = WeightFormat::f32;
  int64_t out_ = 0, in_ = 0;
  Tensor<float> f32_;
  Tensor<uint16_t> bits16_;
  std::span<const uint8_t> blocks_;   // block formats: the rows' blocks, owned by keep_
  std::shared_ptr<const void> keep_;  // block formats: what keeps blocks_ alive
  std::shared_ptr<const quant::PackedMatrix> packed_;  // block formats: blocks_ repacked
};

}  // namespace inferlab
