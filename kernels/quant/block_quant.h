#pragma once
/// @file block_quant.h
/// ggml's four 32-value block formats as C++ structs (fp16 fields carried as their uint16_t bits),
/// the quantizers of an fp32 row into them, the dequantizers back to fp32, and the float64 oracle
/// the tests compare the quantized matmul with (quant_matmul.h). The layout table is in
/// block_formats.h; the quantizers behave as ggml's reference ones (`quantize_row_*_ref` in
/// ggml-quants.c: the same scale, the same reciprocal, the same rounding), per block of 32:
///
/// | type | scale d (fp32, stored as fp16)       | code of value x                               |
/// | ---- | ------------------------------------ | --------------------------------------------- |
/// | Q4_0 | max / −8, max the value of largest \|x\| | min(15, ⌊x·(1/d) + 8.5⌋): 0 … 15, value (q − 8)·d |
/// | Q4_1 | (max − min) / 15, m = min            | min(15, ⌊(x − min)·(1/d) + 0.5⌋), value q·d + m |
/// | Q8_0 | max\|x\| / 127                        | round(x·(1/d)) (half away from 0), value q·d   |
/// | Q8_1 | max\|x\| / 127, s = fp16(d·Σq)         | as Q8_0                                       |
///
/// 1/d is taken in fp32 from the fp32 d (0 when d is 0: an all-zero block codes to zeros), and d is
/// rounded to fp16 only when stored — so a decoded value is q·fp16(d), not q·d. The codes are the
/// nearest (Q8) or round-half-up (Q4) to x/d; the error bounds this gives, with the fp16 rounding
/// of d and m, are derived in tests/08-real-model/test_quant_cpu.cpp.
///
/// Nibble order (Q4_0, Q4_1): byte j holds value j in its low nibble and value j + 16 in its high
/// nibble — the first half of the block in the low nibbles, not adjacent pairs.

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/quant/block_formats.h"

namespace inferlab::quant {

/// Values in every block of the four formats.
inline constexpr int64_t kBlockValues = 32;

/// Q4_0: a scale and 32 4-bit codes centred on 8 (value (q − 8)·d).
struct BlockQ4_0 {
  uint16_t d;      ///< scale, fp16 bits
  uint8_t qs[16];  ///< byte j: value j (low nibble), value j + 16 (high nibble)
};
/// Q4_1: a scale, a minimum and 32 4-bit codes (value q·d + m).
struct BlockQ4_1 {
  uint16_t d;      ///< scale, fp16 bits
  uint16_t m;      ///< minimum, fp16 bits
  uint8_t qs[16];  ///< byte j: value j (low nibble), value j + 16 (high nibble)
};
/// Q8_0: a scale and 32 int8 codes (value q·d).
struct BlockQ8_0 {
  uint16_t d;     ///< scale, fp16 bits
  int8_t qs[32];  ///< value j is qs[j]·d
};
/// Q8_1: Q8_0 plus s = d·Σq (fp16), the term a Q4_1 weight's minimum multiplies (quant_matmul.h).
struct BlockQ8_1 {
  uint16_t d;     ///< scale, fp16 bits
  uint16_t s;     ///< fp16 bits of d·Σqs (d in fp32, before its rounding to fp16)
  int8_t qs[32];  ///< value j is qs[j]·d
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20, "ggml's Q4 block sizes");
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36, "ggml's Q8 block sizes");

/// Quantizes @p x (a multiple of 32 values) into @p y (x.size() / 32 blocks), as
/// quantize_row_q4_0_ref. Throws std::invalid_argument naming x.size() when it is not a multiple
/// of 32, or y.size() when it is not x.size() / 32.
void quantize_row_q4_0(std::span<const float> x, std::span<BlockQ4_0> y);
/// Quantizes @p x into Q4_1 blocks, as quantize_row_q4_1_ref; errors as quantize_row_q4_0().
void quantize_row_q4_1(std::span<const float> x, std::span<BlockQ4_1> y);
/// Quantizes @p x into Q8_0 blocks, as quantize_row_q8_0_ref; errors as quantize_row_q4_0().
void quantize_row_q8_0(std::span<const float> x, std::span<BlockQ8_0> y);
/// Quantizes @p x into Q8_1 blocks, as quantize_row_q8_1_ref; errors as quantize_row_q4_0().
void quantize_row_q8_1(std::span<const float> x, std::span<BlockQ8_1> y);
/// The one block of 32 values at @p x that quantize_row_q8_0() and quantize_row_q8_1() quantize
/// (the same code: the same codes and scale): d = max|x| / 127, qs[j] = round(x[j] / d) (half away
/// from zero) into @p qs, Σ qs[j] into @p sum; returns d in fp32, before its rounding to fp16 (Q8_1's
/// s is fp16(Σq · d) of this d). For a kernel that lays the blocks out its own way (packed_matmul.h).
float quantize_block_q8(const float* x, int8_t* qs, int& sum);

/// Decodes @p x into @p y (32 values a block): (q − 8)·d, exact in fp32. Throws
/// std::invalid_argument naming y.size() when it is not 32·x.size().
void dequantize_row_q4_0(std::span<const BlockQ4_0> x, std::span<float> y);
/// Decodes Q4_1 blocks: q·d + m, rounded once to fp32 (q·d is exact); errors as above.
void dequantize_row_q4_1(std::span<const BlockQ4_1> x, std::span<float> y);
/// Decodes Q8_0 blocks: q·d, exact in fp32; errors as above.
void dequantize_row_q8_0(std::span<const BlockQ8_0> x, std::span<float> y);
/// Decodes Q8_1 blocks: q·d, exact in fp32 (s is not needed to decode); errors as above.
void dequantize_row_q8_1(std::span<const BlockQ8_1> x, std::span<float> y);

/// Quantizes @p x into the bytes of a row of @p type (Q4_0, Q4_1, Q8_0 or Q8_1; @p bytes holds
/// row_bytes(type, x.size()) bytes, any alignment): the typed quantizer above, written bytewise.
/// Throws std::invalid_argument naming the type when it is not a block format, x.size() when it
/// is not a multiple of 32 and bytes.size() when it does not match.
void quantize_row(GgmlType type, std::span<const float> x, std::span<uint8_t> bytes);
/// Decodes a row of @p type stored in @p bytes (any alignment) into @p y — the typed dequantizers
/// above. Throws std::invalid_argument as quantize_row() (y.size() for the value count).
void dequantize_row(GgmlType type, std::span<const uint8_t> bytes, std::span<float> y);

/// The float64 oracle's decoder: the row's values in double — (q − 8)·d, q·d + m, q·d with d and m
/// widened from fp16, all exact in double. Throws std::invalid_argument as dequantize_row().
std::vector<double> dequantize_row_f64(GgmlType type, std::span<const uint8_t> bytes, int64_t values);

/// Σ a[i]·b[i] in double, in order. Throws std::invalid_argument naming b.size() when it is not
/// a.size().
double dot_f64(std::span<const double> a, std::span<const double> b);

/// The float64 oracle of one output of the quantized matmul, in the kernel's own terms: over the
/// blocks of a weight row @p w_bytes (@p w_type: Q8_0, Q4_0 or Q4_1) and an activation row
/// @p x_bytes (Q8_0 for Q8_0 and Q4_0 weights, Q8_1 for Q4_1; activation_type()), Σ_b d_w·d_x·Σ
/// q_w·q_x (+ m_w·s_x for Q4_1), every product and sum in double. It differs from
/// dot_f64(dequantize_row_f64(w), dequantize_row_f64(x)) only by s_x = fp16(d·Σq) standing in for
/// fp16(d)·Σq in the Q4_1 term. Throws std::invalid_argument for another pair of types or sizes
/// that do not match @p values.
double block_dot_f64(GgmlType w_type, std::span<const uint8_t> w_bytes, GgmlType x_type,
                     std::span<const uint8_t> x_bytes, int64_t values);

/// The activation format the matmul quantizes x into for weights of @p weight_type: Q8_0 for
/// Q8_0 and Q4_0, Q8_1 for Q4_1 (its s carries the minimum's term). Throws std::invalid_argument
/// for another type.
GgmlType activation_type(GgmlType weight_type);

/// True for the four block formats above (Q4_0, Q4_1, Q8_0, Q8_1).
bool is_block_format(GgmlType type);

}  // namespace inferlab::quant
