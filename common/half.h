#pragma once
/// @file half.h
/// Host conversions between float and the 16-bit formats (IEEE fp16, bfloat16), bit-exact and
/// rounding to nearest even — for .npy I/O and for preparing fp16/bf16 inputs on the host.
/// (Device code uses __half / __nv_bfloat16 from simt/simt.h.)

#include <cstdint>

namespace inferlab {

/// The fp16 bits nearest to @p value (round to nearest even; overflow gives ±Inf; NaN stays NaN).
uint16_t float_to_half_bits(float value);
/// The float value of fp16 @p bits (exact).
float half_bits_to_float(uint16_t bits);
/// The bfloat16 bits nearest to @p value (round to nearest even; NaN stays NaN).
uint16_t float_to_bfloat16_bits(float value);
/// The float value of bfloat16 @p bits (exact).
float bfloat16_bits_to_float(uint16_t bits);

}  // namespace inferlab
