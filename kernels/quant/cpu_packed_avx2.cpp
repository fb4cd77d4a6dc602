// packed_matmul_cpu()'s AVX2 version, for CPUs without VNNI: vpmaddubsw multiplies unsigned by
// signed bytes and adds adjacent pairs into int16 (saturating), vpmaddwd with ones adds the int16
// pairs into int32 — three instructions for one vpdpbusd. Saturation never happens here: Q4 nibbles
// (≤ 15) times codes (|x| ≤ 127) give pairs ≤ 3810; Q8_0 goes by the sign trick, |w| ≤ 128 times
// x with w's sign, pairs ≤ 32512 < 32767 (the q + 128 trick of the VNNI versions would reach 64770
// and saturate). ymm vectors of 8 outputs, tiles of 4 rows × 8 outputs. Compiled with -mavx2 -mfma
// -mf16c (kernels/CMakeLists.txt), called only on a CPU that reports them (packed_matmul.cpp).
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 headers (the `__Y = __Y` undefined
// pass-through operand, GCC bug 105593), located in the header: silenced for this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstring>

#include "kernels/quant/cpu_packed_microkernel.h"

namespace inferlab::quant::packed {
namespace {

struct Avx2 {
  using I = __m256i;
  using F = __m256;
  static constexpr int kLanes = 8, kMR = 4, kNV = 1;
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
  static I prepare_q8(I w_plus_128) { return _mm256_xor_si256(w_plus_128, _mm256_set1_epi8(char(0x80))); }  // q again
  static I dot_u8(I acc, I u, I x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1)));
  }
  static I dot_q8(I acc, I w, I x) {
    return dot_u8(acc, _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  }
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

void gemm_avx2(const GemmArgs& args, int thread, int threads) {
  gemm<Avx2>(args, thread, threads);
}

}  // namespace inferlab::quant::packed
