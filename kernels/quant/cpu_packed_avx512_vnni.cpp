// packed_matmul_cpu()'s AVX512-VNNI version: zmm vectors of 16 outputs, tiles of 4 rows × 32 outputs
// (8 int32 block sums + 8 fp32 chains + the chunks in 32 registers). Compiled with -mavx512f
// -mavx512bw -mavx512vl -mavx512vnni -mfma -mf16c (kernels/CMakeLists.txt) and called only on a CPU
// that reports them (packed_matmul.cpp).
//
// Per block and 4-value step a tile does 2 loads of codes and 4 × 2 vpdpbusd, each with its row's
// 4 activation bytes broadcast from memory ({1to16}): for Q8_0 a 544-byte packed block gives 64
// vpdpbusd a tile against 4 cvt + 4 mul + 4 fma for the scales, so the int8 units are busy ~80% of
// the instructions. Q4's nibble planes cost 2 ands and a shift a chunk, shared by the 4 rows.
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 headers (the `__Y = __Y` undefined
// pass-through operand, GCC bug 105593), located in the header: silenced for this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstring>

#include "kernels/quant/cpu_packed_microkernel.h"

namespace inferlab::quant::packed {
namespace {

struct Avx512Vnni {
  using I = __m512i;
  using F = __m512;
  static constexpr int kLanes = 16, kMR = 4, kNV = 2;
  static I zero() { return _mm512_setzero_si512(); }
  static I set1(int32_t v) { return _mm512_set1_epi32(v); }
  static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static I bcast4(const int8_t* p) {
    int32_t four;
    std::memcpy(&four, p, 4);
    return _mm512_set1_epi32(four);
  }
  static I low_nibbles(I raw) { return _mm512_and_si512(raw, _mm512_set1_epi8(15)); }
  static I high_nibbles(I raw) { return _mm512_and_si512(_mm512_srli_epi16(raw, 4), _mm512_set1_epi8(15)); }
  static I prepare_q8(I w_plus_128) { return w_plus_128; }  // stored unsigned: vpdpbusd's operand as it is
  static I dot_u8(I acc, I u, I x) { return _mm512_dpbusd_epi32(acc, u, x); }
  static I dot_q8(I acc, I w_plus_128, I x) { return _mm512_dpbusd_epi32(acc, w_plus_128, x); }
  static F fzero() { return _mm512_setzero_ps(); }
  static F halves(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F set1f(float v) { return _mm512_set1_ps(v); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F cvt(I v) { return _mm512_cvtepi32_ps(v); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void store_first(float* p, F v, int n) { _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), v); }
  static F loadf(const float* p) { return _mm512_loadu_ps(p); }
  static F loadf_first(const float* p, int n) { return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p); }
};

}  // namespace

void gemm_avx512_vnni(const GemmArgs& args, int thread, int threads) {
  gemm<Avx512Vnni>(args, thread, threads);
}

}  // namespace inferlab::quant::packed
