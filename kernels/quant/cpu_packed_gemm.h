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
/// s) already widened to fp32 — exact, they are fp16 values — and the codes' sum, which brings back
/// the offset of the unsigned weight codes (packed_matmul.h). A plain aggregate (no constructor: the
/// files compiled for wider instruction sets must not emit a shared copy of one).
struct Activation {
  float d;        ///< the block's scale, fp32 of the fp16 d
  float s;        ///< Q8_1: fp32 of the fp16 s = d·Σq (Q4_1's minimum term); 0 for Q8_0
  int32_t sum;    ///< Σ qs[j]: exact
  int8_t qs[32];  ///< the codes
};

/// What a version computes: y[rows, out] = act · Wᵀ.
struct GemmArgs {
  const Activation* act = nullptr;  ///< rows × w->blocks() blocks, row after row
  int64_t rows = 0;                 ///< rows of x
  const PackedMatrix* w = nullptr;  ///< the repacked weights
  float* y = nullptr;               ///< [rows, w->out()], row-major
  bool parallel = false;            ///< whether to spread the output panels over the OpenMP threads
  size_t l2_bytes = 0;              ///< the L2 cache a core has (sets MC, the rows kept in L2)
};

/// The AVX512-VNNI version (zmm, 4 rows × 32 outputs a tile).
void gemm_avx512_vnni(const GemmArgs& args);
/// The AVX-VNNI version (ymm, VEX encoding, 4 rows × 8 outputs a tile).
void gemm_avx_vnni(const GemmArgs& args);
/// The AVX2 version (ymm, vpmaddubsw + vpmaddwd, 4 rows × 8 outputs a tile).
void gemm_avx2(const GemmArgs& args);

}  // namespace inferlab::quant::packed
