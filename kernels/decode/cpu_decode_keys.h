#pragma once
// The 4-keys-at-a-time SIMD steps shared by the CPU decode kernels (cpu/decode_simd for fp32
// and fp16 caches, cpu/decode_int8_simd for the INT8 cache): loading kLanes cached elements as
// floats, prefetching the next rows, the K pass (4 dot products, 4 independent FMA chains, one
// shared horizontal reduction) and the V pass (4 p·v products per accumulator load/store).
// See cpu_decode_simd.cpp for why each step is shaped this way and what it measured.
#include <cstdint>

#include "common/half.h"
#include "kernels/attention/cpu_simd.h"

namespace inferlab::decode_keys {

using simd::kLanes;
using simd::Vec;

constexpr int64_t kKeys = 4;  // keys per step of both passes (independent chains)

// kLanes cached elements at @p p as floats: a plain load, or one conversion of 16 (AVX-512)
// or 8 (F16C) halves — 32 or 16 bytes of cache become one float vector.
inline Vec load_floats(const float* p) { return simd::load(p); }
inline Vec load_floats(const uint16_t* p) {
#if defined(__AVX512F__)
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
  float f[kLanes];
  for (int i = 0; i < kLanes; ++i) f[i] = half_bits_to_float(p[i]);
  return simd::load(f);
#endif
}

// kLanes int8 at @p p widened to floats.
inline Vec load_floats(const int8_t* p) {
#if defined(__AVX512F__)
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#elif defined(__AVX2__) && defined(__FMA__)
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#else
  float f[kLanes];
  for (int i = 0; i < kLanes; ++i) f[i] = float(p[i]);
  return simd::load(f);
#endif
}

// Asks for the lines of @p bytes bytes at @p p (contiguous rows) to be brought into the caches.
inline void prefetch(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(c + i, 0, 3);
}

// The four horizontal sums of a0 … a3 at once, into out[0 … 3]: add the halves of all four
// registers together and finish with two rounds of pairwise adds (hadd) that mix the four, so
// the 4 keys share one short reduction instead of paying four.
inline void reduce_add4(Vec a0, Vec a1, Vec a2, Vec a3, float* out) {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#if defined(__AVX512F__)
  // 16 → 8 lanes: low half + high half (shuffle_f32x4 moves the upper 256 bits down).
  const auto half = [](__m512 x) {
    return _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_castps512_ps256(_mm512_shuffle_f32x4(x, x, 0xEE)));
  };
  const __m256 b0 = half(a0), b1 = half(a1), b2 = half(a2), b3 = half(a3);
#else
  const __m256 b0 = a0, b1 = a1, b2 = a2, b3 = a3;
#endif
  // hadd(b0, b1) = [b0 pairs, b1 pairs] per 128-bit half; a second hadd gives each 128-bit half
  // the partial sums (s0, s1, s2, s3); the two halves added make the four sums.
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(b0, b1), _mm256_hadd_ps(b2, b3));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
#else
  out[0] = simd::reduce_add(a0);
  out[1] = simd::reduce_add(a1);
  out[2] = simd::reduce_add(a2);
  out[3] = simd::reduce_add(a3);
#endif
}

// Pass 1 for kKeys keys: scores[i] = q · row_i for i < kKeys, over d_pad elements (whole
// vectors). Four accumulators, one per key: four independent FMA chains instead of one.
template <class T>
void dot_keys(const float* q, const T* const row[kKeys], int64_t d_pad, float* scores) {
  Vec acc0 = simd::broadcast(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (int64_t c = 0; c < d_pad; c += kLanes) {
    const Vec qc = simd::load(q + c);
    acc0 = simd::fma(qc, load_floats(row[0] + c), acc0);
    acc1 = simd::fma(qc, load_floats(row[1] + c), acc1);
    acc2 = simd::fma(qc, load_floats(row[2] + c), acc2);
    acc3 = simd::fma(qc, load_floats(row[3] + c), acc3);
  }
  reduce_add4(acc0, acc1, acc2, acc3, scores);
}

// Pass 2 for kKeys rows: a[c] += Σ_i p[i] · row_i[c] over d_pad elements (whole vectors), one
// load and store of each accumulator vector per kKeys rows.
template <class T>
void accumulate_keys(const float p[kKeys], const T* const row[kKeys], int64_t d_pad, float* a) {
  const Vec p0 = simd::broadcast(p[0]), p1 = simd::broadcast(p[1]), p2 = simd::broadcast(p[2]),
            p3 = simd::broadcast(p[3]);
  for (int64_t c = 0; c < d_pad; c += kLanes) {
    Vec x = simd::load(a + c);
    x = simd::fma(p0, load_floats(row[0] + c), x);
    x = simd::fma(p1, load_floats(row[1] + c), x);
    x = simd::fma(p2, load_floats(row[2] + c), x);
    x = simd::fma(p3, load_floats(row[3] + c), x);
    simd::store(a + c, x);
  }
}

}  // namespace inferlab::decode_keys
