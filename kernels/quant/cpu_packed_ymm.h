#pragma once
/// @file cpu_packed_ymm.h
/// The ymm operations the AVX2 and the AVX-VNNI versions of packed_matmul_cpu() share
/// (cpu_packed_microkernel.h lists what a vector type provides): loads, broadcasts, nibbles, the
/// scales' fp16 widening, fp32 arithmetic and stores of 8 lanes. Each of the two files includes it
/// and adds its dot products. Everything here is in an anonymous namespace on purpose: each file
/// compiles its own copy for its own instruction set, so no copy built with AVX-VNNI enabled can be
/// the one an AVX2-only CPU runs.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace inferlab::quant::packed {
namespace {

/// 8 int32 or fp32 lanes: a ymm register (half a packed group of 16 outputs).
struct YmmCommon {
  using I = __m256i;  ///< int32 lanes
  using F = __m256;   ///< fp32 lanes
  static constexpr int kLanes = 8, kMR = 4, kNV = 1;  ///< lanes; rows × vectors a tile (16 registers)
  static I zero() { return _mm256_setzero_si256(); }
  static I set1(int32_t v) { return _mm256_set1_epi32(v); }
  static I load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static I bcast4(const int8_t* p) {
    int32_t four;
    std::memcpy(&four, p, 4);
    return _mm256_set1_epi32(four);
  }
  static I low_nibbles(I raw) { return _mm256_and_si256(raw, _mm256_set1_epi8(15)); }
  static I high_nibbles(I raw) { return _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(15)); }
  static F fzero() { return _mm256_setzero_ps(); }
  static F halves(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F set1f(float v) { return _mm256_set1_ps(v); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F cvt(I v) { return _mm256_cvtepi32_ps(v); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void store_first(float* p, F v, int n) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    for (int i = 0; i < n; ++i) p[i] = lanes[i];
  }
  static F loadf(const float* p) { return _mm256_loadu_ps(p); }
  static F loadf_first(const float* p, int n) {
    alignas(32) float lanes[8] = {};
    for (int i = 0; i < n; ++i) lanes[i] = p[i];
    return _mm256_load_ps(lanes);
  }
};

}  // namespace
}  // namespace inferlab::quant::packed
