// packed_matmul_cpu()'s AVX-VNNI version: the VEX-encoded ymm vpdpbusd of Intel's Alder Lake and
// later client cores (no AVX-512 there; AMD Zen 4 has only the EVEX form and runs the zmm version).
// ymm vectors of 8 outputs (half a packed group), tiles of 4 rows × 8 outputs in the 16 ymm
// registers. Compiled with -mavx2 -mfma -mf16c -mavxvnni (kernels/CMakeLists.txt), called only on a
// CPU that reports them (packed_matmul.cpp).
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 headers (the `__Y = __Y` undefined
// pass-through operand, GCC bug 105593), located in the header: silenced for this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "kernels/quant/cpu_packed_microkernel.h"
#include "kernels/quant/cpu_packed_ymm.h"

namespace inferlab::quant::packed {
namespace {

struct AvxVnni : YmmCommon {
  static I prepare_q8(I w_plus_128) { return w_plus_128; }  // stored unsigned: vpdpbusd's operand as it is
  static I dot_u8(I acc, I u, I x) { return _mm256_dpbusd_avx_epi32(acc, u, x); }
  static I dot_q8(I acc, I w_plus_128, I x) { return _mm256_dpbusd_avx_epi32(acc, w_plus_128, x); }
};

}  // namespace

void gemm_avx_vnni(const GemmArgs& args, int thread, int threads) {
  gemm<AvxVnni>(args, thread, threads);
}

}  // namespace inferlab::quant::packed
