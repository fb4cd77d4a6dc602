#pragma once
/// @file quantize.h
/// The quantization rules of chapter 04's KV formats, one row (or one value) at a time. The
/// cache (kv_cache.h) applies them on prefill and append; the device appends apply the same
/// rules in their kernels.
///
/// INT8, symmetric: for a group x (a row, or one channel over the prompt's tokens) with scale
/// Δ = max|x| / 127: q = clamp(round(x / Δ), −127, 127) — rounded, then clamped, never wrapped;
/// x̂ = Δ·q, so |x̂ − x| ≤ Δ/2 inside the range. fp16 scales are rounded *up* to the next fp16
/// (scale_to_fp16_up), so max|x|/Δ ≤ 127 still holds; the step is then up to 2⁻¹⁰ larger. A group
/// whose Δ exceeds the largest fp16 (max|x| > 65504·127 ≈ 8.3e6) gets Δ = 65504 and saturates.
///
/// FP8 E4M3 (fp8_e4m3.h), per row: Δ = max|x| / 448, code = e4m3(x / Δ) (round to nearest even,
/// saturating), x̂ = Δ·value(code). The row's largest element maps to 448 exactly; every element
/// is stored within a relative 1/16 of itself (normals).

#include <cstdint>
#include <span>

namespace inferlab {

/// The fp16 bits of the smallest fp16 ≥ @p scale (a non-negative finite float), capped at the
/// largest finite fp16, 65504: rounding a scale up keeps |x| / scale ≤ 127 for every x of its group.
uint16_t scale_to_fp16_up(float scale);

/// The INT8 scale of a group whose largest magnitude is @p max_abs: max_abs / 127 (0 for 0).
float int8_scale(float max_abs);
/// clamp(round(x / scale), −127, 127) (round half away from zero); 0 when scale is 0.
int8_t quantize_int8(float x, float scale);
/// scale · q.
inline float dequantize_int8(int8_t q, float scale) {
  return scale * float(q);
}

/// Quantizes one row to FP8: Δ = max|x|/448 (0 for an all-zero row, whose codes are then 0),
/// codes[c] = float_to_fp8_e4m3(row[c]/Δ); returns Δ. The row must be finite (the cache checks
/// first) and @p codes as long as @p row. Adds to @p saturated the elements whose |x|/Δ rounded
/// past 448 (with Δ from the row's own maximum: none, up to fp32 rounding of the division).
float quantize_row_fp8(std::span<const float> row, std::span<uint8_t> codes, int64_t& saturated);

}  // namespace inferlab
