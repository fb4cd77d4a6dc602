#pragma once
/// @file packed_matmul.h
/// Chapter 11: the quantized linear layer built the GotoBLAS/BLIS way over the repacked weights of
/// packed_matrix.h — y[rows, out] = x[rows, in] · Wᵀ, the same product and the **same bits** as
/// chapter 08's quant_matmul_cpu() (quant_matmul.h's contract: exact int32 block sums, then per
/// block acc = fma(d_w·d_x, Σ, acc) and for Q4_1 acc = fma(m_w, s_x, acc), blocks in order), so a
/// token's result still does not depend on the batch.
///
/// The loops, outermost first (cpu_packed_microkernel.h):
///
///     quantize every row of x once (Q8_0, or Q8_1 for Q4_1), with each block's code sum Σq
///     threads:   contiguous ranges of output panels (NV vectors of 16 or 8 outputs)
///     MC:        rows in blocks whose quantized activations fit half the L2 cache (measured)
///     panel:     one panel of outputs: its weights stay in L1/L2 while the rows pass
///     MR:        a tile of MR rows × NV vectors: the micro-kernel, MR·NV int32 accumulators for
///                the block being summed and MR·NV fp32 accumulators for the chain over blocks
///
/// Inside the micro-kernel, for each block and each 4-value step: one load of the packed codes of
/// the panel's outputs, and per row one broadcast of 4 activation bytes and one `vpdpbusd` (u8 ×
/// s8, four products summed into each int32 lane). The unsigned operand must be the weights (they
/// are the vector; the broadcast activations are signed): Q4_0 and Q4_1 nibbles are unsigned
/// already; a Q8_0 code q is stored as q + 128 (q xor 0x80, once, when the matrix is packed), and
/// the offsets come back exactly through the activations' code sums — Σ(q + 128)·x = Σq·x + 128·Σx,
/// Σ(n − 8)·x = Σn·x − 8·Σx — by starting each block's int32 accumulator at −128·Σx (or −8·Σx),
/// worked out when the row is quantized, instead of 0.
///
/// The instructions are chosen when the program runs, from what the CPU reports, not from the
/// compiler's -march: each SIMD version is compiled in a file of its own for its instruction set
/// (CMake sets that file's flags) and is called only on a CPU that has it.

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/tensor.h"
#include "kernels/quant/packed_matrix.h"

namespace inferlab::quant {

/// The instructions of a packed_matmul_cpu() version.
enum class PackedKernel {
  scalar,       ///< plain C++ over the packed layout, one output at a time (every CPU)
  avx2,         ///< ymm, AVX2 vpmaddubsw + vpmaddwd (Q8_0 by the sign trick: |w| × sign(x, w))
  avx_vnni,     ///< ymm, AVX-VNNI vpdpbusd (VEX: Intel Alder Lake and later)
  avx512_vnni,  ///< zmm, AVX512-VNNI vpdpbusd (Ice Lake, Sapphire Rapids, AMD Zen 4)
};

/// "scalar", "avx2", "avx-vnni", "avx512-vnni".
std::string_view to_string(PackedKernel kernel);

/// The instruction that computes the block sums, as the roofline names it ("vpdpbusd zmm
/// (AVX512-VNNI)", ...; "scalar C++" for scalar).
std::string_view instruction(PackedKernel kernel);

/// True when this CPU can run @p kernel (CPUID at run time; scalar always).
bool cpu_has(PackedKernel kernel);

/// Every kernel this CPU can run, scalar first.
std::vector<PackedKernel> available_packed_kernels();

/// The widest kernel this CPU has: packed_matmul_cpu()'s default.
PackedKernel best_packed_kernel();

/// What the CPU linear layer (linear_cpu() over a Q8_0, Q4_0 or Q4_1 Weight) runs.
struct QuantGemmChoice {
  bool chapter08 = false;                     ///< chapter 08's quant_matmul_cpu() over GGUF's rows
  PackedKernel kernel = PackedKernel::scalar;  ///< otherwise this packed_matmul_cpu() kernel
};

/// The choice of linear_cpu(), read once from the environment variable INFERLAB_QUANT_GEMM: unset
/// or empty, best_packed_kernel(); "ch08", chapter 08's kernel (the previous rung of the version
/// ladder, to compare the whole model side by side); or a kernel's name ("avx2", "avx-vnni",
/// "avx512-vnni", "scalar") that this CPU has. Throws std::invalid_argument naming the variable and
/// the accepted values for another value.
QuantGemmChoice quant_gemm_choice();

/// y = x · Wᵀ (this file's comment): @p x [rows, in] fp32, @p w repacked, @p y [rows, out] fp32.
/// Throws std::invalid_argument naming the argument when a shape does not match or @p kernel is
/// not one this CPU has.
void packed_matmul_cpu(const Tensor<float>& x, const PackedMatrix& w, Tensor<float>& y,
                       PackedKernel kernel = best_packed_kernel());

}  // namespace inferlab::quant
