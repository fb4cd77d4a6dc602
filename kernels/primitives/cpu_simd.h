#pragma once
/// @file cpu_simd.h
/// The vector layer of the chapter-02 CPU attention versions: one float vector type and the
/// handful of operations the kernels need (load, store, broadcast, FMA, max, exp, reductions),
/// written once per instruction set. The build compiles with -march=native, so the widest set
/// the compiler is allowed to use is picked at compile time:
///
/// | macro        | vector      | lanes |
/// | ---          | ---         | ---   |
/// | `__AVX512F__` | `__m512`    | 16    |
/// | `__AVX2__` + `__FMA__` | `__m256` | 8 |
/// | neither      | one `float` | 1     |
///
/// The scalar fallback keeps every version correct (and slow) on any machine.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
// GCC 12 reports -Wmaybe-uninitialized (and, for some inlining contexts, -Wuninitialized)
// inside its own AVX-512 headers (the `__Y = __Y` undefined pass-through operand, GCC bug
// 105593); the warning is located in the header, so silence it there.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include "common/ceil_div.h"

namespace inferlab::simd {

/// exp() of a float below this underflows to (almost) 0; masked scores (-inf) land here.
inline constexpr float kExpLowest = -87.33654f;

// One line per operation and instruction set, side by side: kept as a table, not reformatted.
// clang-format off
#if defined(__AVX512F__)

inline constexpr int kLanes = 16;
inline constexpr const char* kIsa = "avx512";
using Vec = __m512;
inline Vec load(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, Vec x) { _mm512_storeu_ps(p, x); }
inline Vec broadcast(float x) { return _mm512_set1_ps(x); }
inline Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
inline Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
inline Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
inline float reduce_max(Vec x) { return _mm512_reduce_max_ps(x); }
inline float reduce_add(Vec x) { return _mm512_reduce_add_ps(x); }
// e^x: Cody–Waite range reduction x = n·ln2 + r (ln2 split in two constants so n·ln2 is exact
// enough), a degree-6 polynomial for e^r on |r| ≤ ln2/2 (Cephes' expf coefficients, ~2 ulp),
// then a scale by 2^n. Lanes below kExpLowest (masked scores, -inf) give exactly 0.
inline Vec exp(Vec x) {
  const Vec lowest = _mm512_set1_ps(kExpLowest);
  const __mmask16 keep = _mm512_cmp_ps_mask(x, lowest, _CMP_GE_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, lowest), _mm512_set1_ps(88.0f));
  const Vec n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  Vec r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  Vec p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
}

#elif defined(__AVX2__) && defined(__FMA__)

inline constexpr int kLanes = 8;
inline constexpr const char* kIsa = "avx2";
using Vec = __m256;
inline Vec load(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, Vec x) { _mm256_storeu_ps(p, x); }
inline Vec broadcast(float x) { return _mm256_set1_ps(x); }
inline Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
inline Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
inline float reduce_max(Vec x) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
inline float reduce_add(Vec x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline Vec exp(Vec x) {
  const Vec lowest = _mm256_set1_ps(kExpLowest);
  const Vec keep = _mm256_cmp_ps(x, lowest, _CMP_GE_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lowest), _mm256_set1_ps(88.0f));
  const Vec n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  Vec r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  Vec p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n built in the exponent field; n ∈ [-126, 127] after the clamp, so it is a normal float.
  const __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(keep, _mm256_mul_ps(p, _mm256_castsi256_ps(two_n)));
}

#else

// The scalar fallback. It is also what Doxygen reads, so the interface is documented here.

/// Floats per vector register.
inline constexpr int kLanes = 1;
/// The instruction set in use ("avx512", "avx2" or "scalar"), for messages and benchmark labels.
inline constexpr const char* kIsa = "scalar";
/// One vector register of floats.
using Vec = float;
/// Loads kLanes floats from @p p (no alignment required).
inline Vec load(const float* p) { return *p; }
/// Stores kLanes floats to @p p (no alignment required).
inline void store(float* p, Vec x) { *p = x; }
/// Every lane set to @p x.
inline Vec broadcast(float x) { return x; }
/// Lane-wise a·b + c with one rounding.
inline Vec fma(Vec a, Vec b, Vec c) { return std::fma(a, b, c); }
/// Lane-wise a·b.
inline Vec mul(Vec a, Vec b) { return a * b; }
/// Lane-wise a + b.
inline Vec add(Vec a, Vec b) { return a + b; }
/// Lane-wise a − b.
inline Vec sub(Vec a, Vec b) { return a - b; }
/// Lane-wise max(a, b).
inline Vec max(Vec a, Vec b) { return a > b ? a : b; }
/// The largest lane.
inline float reduce_max(Vec x) { return x; }
/// The sum of the lanes.
inline float reduce_add(Vec x) { return x; }
/// Lane-wise e^x; lanes below kExpLowest (masked scores, -inf) give exactly 0.
inline Vec exp(Vec x) { return x < kExpLowest ? 0.0f : std::exp(x); }

#endif
// clang-format on

/// @p n rounded up to a multiple of @p multiple.
constexpr int64_t round_up(int64_t n, int64_t multiple) {
  return ceil_div(n, multiple) * multiple;
}

/// A float buffer aligned to a 64-byte cache line, so that a vector load of a packed panel
/// never straddles two lines. Contents are uninitialised. Allocated with the aligned
/// operator new, so a test that replaces operator new (chapter 05's memory test) sees it.
class AlignedFloats {
 public:
  /// A buffer of @p count floats.
  explicit AlignedFloats(int64_t count)
      : data_(static_cast<float*>(::operator new(
            static_cast<size_t>(round_up(std::max<int64_t>(count, 1), 16)) * sizeof(float), kAlignment))) {}
  /// The first float.
  float* data() const { return data_.get(); }

 private:
  static constexpr std::align_val_t kAlignment{64};
  struct Free {
    void operator()(float* p) const { ::operator delete(p, kAlignment); }
  };
  std::unique_ptr<float, Free> data_;
};

/// Numerically stable softmax numerator of one score row, in place: row[j] ← exp(row[j] − max)
/// for j < @p valid (max taken over those), row[j] ← 0 for valid ≤ j < @p zero_to. Returns the
/// sum of the exponentials; the caller divides by it (the blocked version folds 1/sum into O).
/// @p row must have room for round_up(valid, kLanes) floats (lanes past @p valid are set to
/// -inf first so whole vectors can be used), and 1 ≤ @p valid ≤ @p zero_to.
/// The online softmax of chapter 05 (a row seen one key block at a time) passes the running
/// max as @p at_least — the max used is then max(at_least, max of the row) — and reads the
/// max used back through @p max_used.
inline float softmax_numerator(float* row, int64_t valid, int64_t zero_to,
                               float at_least = -std::numeric_limits<float>::infinity(),
                               float* max_used = nullptr) {
  const int64_t vector_end = round_up(valid, kLanes);
  for (int64_t j = valid; j < vector_end; ++j) row[j] = -std::numeric_limits<float>::infinity();
  Vec max_v = broadcast(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < vector_end; j += kLanes) max_v = max(max_v, load(row + j));
  const float row_max = std::max(at_least, reduce_max(max_v));
  if (max_used != nullptr) *max_used = row_max;
  const Vec max_score = broadcast(row_max);
  Vec sum_v = broadcast(0.0f);
  for (int64_t j = 0; j < vector_end; j += kLanes) {
    // exp(s − max) ≤ 1 never overflows; masked lanes (-inf) become exactly 0.
    const Vec e = exp(sub(load(row + j), max_score));
    store(row + j, e);
    sum_v = add(sum_v, e);
  }
  for (int64_t j = vector_end; j < zero_to; ++j) row[j] = 0.0f;
  return reduce_add(sum_v);
}

}  // namespace inferlab::simd
