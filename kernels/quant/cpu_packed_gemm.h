#pragma once
/// @file cpu_packed_gemm.h
/// Inside packed_matmul_cpu() (packed_matmul.h): the quantized activations the kernels read and the
/// entry point of each instruction set's version, each defined in a file compiled for that set
/// (cpu_packed_avx512_vnni.cpp, cpu_packed_avx_vnni.cpp, cpu_packed_avx2.cpp) and called only on a
/// CPU that has it. Not part of the public API.

#include <cstddef>
#include <cstdint>

#include "kernels/quant/packed_matrix.h"

namespace inferlab::quant::packed {

/// One block of one quantized activation row, as the micro-kernel reads it: the scale (and Q8_1's
/// s) already widened to fp32 — exact, they are fp16 values — and the value the block's int32 sums
/// start from, −offset·Σq, which takes back the offset of the unsigned weight codes (packed_matmul.h:
/// 128 for Q8_0 under vpdpbusd, 8 for Q4_0, 0 otherwise), worked out once per GEMM so that the
/// micro-kernel only broadcasts it. A plain aggregate (no constructor: the files compiled for wider
/// instruction sets must not emit a shared copy of one).
struct Activation {
  float d;        ///< the block's scale, fp32 of the fp16 d
  float s;        ///< Q8_1: fp32 of the fp16 s = d·Σq (Q4_1's minimum term); 0 for Q8_0
  int32_t start;  ///< −offset · Σ qs[j]: exact
  int8_t qs[32];  ///< the codes
};

/// What a version computes: y[rows, out] = act · Wᵀ, in the share of one thread of a parallel region
/// the caller has opened (a contiguous range of the output panels).
struct GemmArgs {
  const Activation* act = nullptr;  ///< rows × w->blocks() blocks, row after row
  int64_t rows = 0;                 ///< rows of x
  const PackedMatrix* w = nullptr;  ///< the repacked weights
  float* y = nullptr;               ///< [rows, w->out()], row-major
  size_t l2_bytes = 0;              ///< the L2 cache a core has (sets MC, the rows kept in L2)
  size_t l1_bytes = 0;              ///< the L1 data cache a core has (sets KC, the blocks kept in L1)
};

/// The offset of @p type's unsigned weight codes in the kernel that computes its sums with
/// vpdpbusd (@p vnni) or vpmaddubsw: Q8_0's q + 128 under VNNI (AVX2 multiplies the signed codes
/// by the sign trick: 0), Q4_0's nibble n = q + 8, Q4_1's none (its minimum is a separate term).
constexpr int32_t code_offset(GgmlType type, bool vnni) {
  return type == GgmlType::q8_0 ? (vnni ? 128 : 0) : type == GgmlType::q4_0 ? 8 : 0;
}

/// The AVX512-VNNI version (zmm, 4 rows × 32 outputs a tile): thread @p thread's share of @p threads.
void gemm_avx512_vnni(const GemmArgs& args, int thread, int threads);
/// The AVX-VNNI version (ymm, VEX encoding, 4 rows × 8 outputs a tile).
void gemm_avx_vnni(const GemmArgs& args, int thread, int threads);
/// The AVX2 version (ymm, vpmaddubsw + vpmaddwd, 4 rows × 8 outputs a tile).
void gemm_avx2(const GemmArgs& args, int thread, int threads);

}  // namespace inferlab::quant::packed
