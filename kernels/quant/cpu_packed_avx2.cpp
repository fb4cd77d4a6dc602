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

#include "kernels/quant/cpu_packed_microkernel.h"
#include "kernels/quant/cpu_packed_ymm.h"

namespace inferlab::quant::packed {
namespace {

struct Avx2 : YmmCommon {
  static I prepare_q8(I w_plus_128) { return _mm256_xor_si256(w_plus_128, _mm256_set1_epi8(char(0x80))); }  // q again
  static I dot_u8(I acc, I u, I x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1)));
  }
  static I dot_q8(I acc, I w, I x) {
    return dot_u8(acc, _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  }
};

}  // namespace

void gemm_avx2(const GemmArgs& args, int thread, int threads) {
  gemm<Avx2>(args, thread, threads);
}

}  // namespace inferlab::quant::packed
