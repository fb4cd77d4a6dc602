#pragma once
/// @file cpu_simd_widen.h
/// Loads that widen 16-bit floats (IEEE fp16, bfloat16) to a vector of fp32 lanes (cpu_simd.h's
/// Vec), exactly: every fp16 and bf16 value is an fp32 value. The linear layer reads 16-bit
/// weights through these, so its arithmetic stays fp32 while it reads half the bytes.
///
/// | set | fp16 | bf16 |
/// | --- | --- | --- |
/// | AVX-512 | `vcvtph2ps` (16 lanes) | zero-extend to 32 bits, shift left 16 |
/// | AVX2 | `vcvtph2ps` (F16C, 8 lanes) | the same shift |
/// | scalar | common/half.h | common/half.h |

#include <cstdint>

#include "common/half.h"
#include "kernels/primitives/cpu_simd.h"

namespace inferlab::simd {

// clang-format off
#if defined(__AVX512F__)
/// kLanes fp16 values from @p p (no alignment required) as fp32 lanes.
inline Vec load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
/// kLanes bfloat16 values from @p p (no alignment required) as fp32 lanes.
inline Vec load_bf16(const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
#elif defined(__AVX2__) && defined(__FMA__)
/// kLanes fp16 values from @p p (no alignment required) as fp32 lanes.
inline Vec load_f16(const uint16_t* p) {
#if defined(__F16C__)
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
  alignas(32) float lanes[kLanes];
  for (int i = 0; i < kLanes; ++i) lanes[i] = half_bits_to_float(p[i]);
  return _mm256_load_ps(lanes);
#endif
}
/// kLanes bfloat16 values from @p p (no alignment required) as fp32 lanes.
inline Vec load_bf16(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
#else
/// kLanes fp16 values from @p p as fp32 lanes.
inline Vec load_f16(const uint16_t* p) { return half_bits_to_float(*p); }
/// kLanes bfloat16 values from @p p as fp32 lanes.
inline Vec load_bf16(const uint16_t* p) { return bfloat16_bits_to_float(*p); }
#endif
// clang-format on

}  // namespace inferlab::simd
