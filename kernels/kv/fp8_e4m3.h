#pragma once
/// @file fp8_e4m3.h
/// The FP8 E4M3 format (chapter 04) in software: one byte, 1 sign bit, 4 exponent bits (bias 7)
/// and 3 mantissa bits (the "FN" variant of the OCP FP8 standard, __NV_E4M3 in CUDA):
///
///     exponent 1…15: (−1)^s · (1 + m/8) · 2^(e − 7)      normal, 2^−6 … 448
///     exponent 0:    (−1)^s · (m/8) · 2^−6               subnormal, 2^−9 … 7·2^−9, and ±0
///     S.1111.111:    NaN (the only one; there is no infinity, so 1111.111 is not 480)
///
/// 3 mantissa bits: between 2^e and 2^(e+1) the spacing is 2^(e−3), a relative step of 1/8 to
/// 1/16, the same everywhere in the range — unlike INT8, whose step is fixed in absolute terms.
///
/// These are the host conversions and the SIMT twin of the GPU's: cuda/decode_fp8 converts
/// with cuda_fp8.h's __nv_cvt_fp8x2_to_halfraw2 under nvcc (one cvt.rn.f16x2.e4m3x2 instruction
/// on sm_89+, the header's software path before) and with fp8_e4m3_to_float() on the emulator.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace inferlab {

/// The largest finite E4M3 magnitude: 1.75 · 2^8 = 448 (code 0x7E).
inline constexpr float kFp8E4M3Max = 448.0f;
/// The NaN code (sign bit clear).
inline constexpr uint8_t kFp8E4M3NaN = 0x7F;

/// The value of E4M3 @p code (exact in float; NaN for S.1111.111).
inline float fp8_e4m3_to_float(uint8_t code) {
  const uint32_t exponent = (code >> 3) & 0xFu, mantissa = code & 0x7u;
  if (exponent == 0xFu && mantissa == 0x7u) return std::numeric_limits<float>::quiet_NaN();
  const float magnitude = exponent == 0 ? static_cast<float>(mantissa) * 0x1p-9f  // (m/8)·2^−6
                                        // (1 + m/8)·2^(e − 7): float exponent field e − 7 + 127
                                        : std::bit_cast<float>(((exponent + 120u) << 23) | (mantissa << 20));
  return (code & 0x80u) != 0 ? -magnitude : magnitude;
}

/// The E4M3 code nearest to @p x, ties to even (an even mantissa), saturating: |x| ≥ 448 (±Inf
/// included) gives ±448, never NaN; NaN gives kFp8E4M3NaN. (CUDA's __NV_SATFINITE conversion.)
inline uint8_t float_to_fp8_e4m3(float x) {
  if (std::isnan(x)) return kFp8E4M3NaN;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= kFp8E4M3Max) return sign | 0x7E;
  // Below the smallest normal 2^−6 the step is 2^−9: the code is the count of steps (a·2^9 is
  // exact; nearbyint rounds ties to even). A count of 8 is code 0x08 = 2^−6, the smallest normal.
  if (a < 0x1p-6f) return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9f));
  int e = 0;
  std::frexp(a, &e);  // a = f·2^e, f ∈ [0.5, 1): a ∈ [2^(e−1), 2^e), e − 1 ∈ [−6, 8]
  const int exponent = e - 1;
  // The mantissa in eighths, rounded (exact arithmetic until nearbyint); 8 carries into the
  // exponent, which the sum below does by itself. a < 448 keeps the result ≤ 0x7E.
  const int mantissa = static_cast<int>(std::nearbyint(std::ldexp(a, -exponent) * 8.0f - 8.0f));
  return sign | static_cast<uint8_t>(((exponent + 7) << 3) + mantissa);
}

}  // namespace inferlab
