#pragma once
/// @file packed_matrix.h
/// Chapter 11: a block-quantized weight matrix repacked once, at load, for the GEMM of
/// packed_matmul.h. GGUF stores each output row's blocks one after another (row-major); a SIMD
/// kernel over that layout computes one output's block sum across a vector's lanes and then has to
/// add the lanes together (a horizontal sum) before the scale's fma. Repacked, the blocks of
/// **16 output rows are interleaved** so that one vector holds 4 codes of each of 16 outputs, one
/// broadcast of 4 activation bytes meets all of them, and each int32 lane is one output's partial
/// sum: no horizontal sum anywhere (ggml's "repack" buffer types and llamafile's tinyBLAS use the
/// same idea with their own layouts).
///
/// The outputs are cut into groups of 16 (the last one padded with zero codes and zero scales,
/// computed and never stored). Group g's blocks are contiguous, block b after block b − 1; one
/// packed block holds block b of the group's 16 rows:
///
/// | format | packed block                                         | bytes           |
/// | ------ | ---------------------------------------------------- | --------------- |
/// | Q8_0   | d[16] (fp16), then chunks j = 0…7 of 64 bytes         | 32 + 512 = 544  |
/// | Q4_0   | d[16] (fp16), then chunks j = 0…3 of 64 bytes         | 32 + 256 = 288  |
/// | Q4_1   | d[16], m[16] (fp16), then chunks j = 0…3 of 64 bytes  | 64 + 256 = 320  |
///
/// Byte 4·o + t of chunk j (o = the output within the group, t = 0…3) is, for Q8_0, the code q of
/// value 4j + t of output o stored as the unsigned byte q + 128 (q xor 0x80: `vpdpbusd` takes its
/// weights operand unsigned, so the conversion is done once here instead of in every GEMM); for
/// Q4_0 and Q4_1 it is byte 4j + t of output o's qs[16] as GGUF has it — its low nibble value
/// 4j + t, its high nibble value 16 + 4j + t (nibbles are unsigned already). So a 64-byte chunk is
/// one zmm register (16 outputs × 4 codes, or two nibble planes of them), and its first and last 32
/// bytes are two ymm registers of 8 outputs each. The matrix takes exactly as many bytes as the
/// original (plus the padding of the last group: zero scales, and codes that decode to 0).

#include <cstdint>
#include <memory>
#include <span>

#include "kernels/quant/block_formats.h"
#include "kernels/quant/quant_matmul.h"

namespace inferlab::quant {

/// Outputs a packed group interleaves: one zmm's 16 int32 lanes.
inline constexpr int64_t kPackedGroup = 16;

/// Bytes of one packed block (16 rows' block b) of @p type: 544, 288 or 320. Throws
/// std::invalid_argument naming the type for another than Q8_0, Q4_0 or Q4_1.
int64_t packed_block_bytes(GgmlType type);

/// Bytes of the scales at the start of a packed block: 32 (d[16]), or 64 for Q4_1 (d[16], m[16]).
int64_t packed_scale_bytes(GgmlType type);

/// A weight matrix in the interleaved layout of this file's comment, owning its bytes (64-byte
/// aligned, so every chunk is one aligned zmm load).
class PackedMatrix {
 public:
  /// An empty matrix.
  PackedMatrix() = default;
  /// Repacks @p w (GGUF's row-major blocks). Throws std::invalid_argument, naming the argument, for
  /// a type other than Q8_0, Q4_0 or Q4_1, an input size that is not a positive multiple of 32, or
  /// w.bytes.size() ≠ out · row_bytes(type, in).
  explicit PackedMatrix(const BlockMatrix& w);

  /// Q8_0, Q4_0 or Q4_1.
  GgmlType type() const { return type_; }
  /// Output features (rows of the original matrix).
  int64_t out() const { return out_; }
  /// Input features, a multiple of 32.
  int64_t in() const { return in_; }
  /// Blocks a row: in / 32.
  int64_t blocks() const { return in_ / 32; }
  /// Groups of 16 outputs: ⌈out / 16⌉.
  int64_t groups() const { return (out_ + kPackedGroup - 1) / kPackedGroup; }
  /// The packed block of group @p group, block @p block (unchecked).
  const uint8_t* block(int64_t group, int64_t block) const {
    return bytes_.get() + (group * blocks() + block) * packed_block_bytes(type_);
  }
  /// Every packed byte, group after group.
  std::span<const uint8_t> bytes() const { return {bytes_.get(), size_t(size_)}; }

  /// The code of value @p value (0 … in − 1) of output @p row as GGUF stores it (Q8_0 −128 … 127,
  /// the packed byte minus 128; Q4_0 and Q4_1 the nibble 0 … 15), read from the packed layout: what the scalar kernel
  /// and the tests use to check the layout value by value. Unchecked indices.
  int code(int64_t row, int64_t value) const;
  /// fp16 bits of the scale d of @p row's block @p block (unchecked).
  uint16_t scale_bits(int64_t row, int64_t block) const;
  /// fp16 bits of the minimum m of @p row's block @p block; 0 for Q8_0 and Q4_0 (unchecked).
  uint16_t min_bits(int64_t row, int64_t block) const;

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  GgmlType type_ = GgmlType::q8_0;
  int64_t out_ = 0, in_ = 0, size_ = 0;
  std::unique_ptr<uint8_t[], Free> bytes_;
};

}  // namespace inferlab::quant
