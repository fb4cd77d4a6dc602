#pragma once
/// @file quant_matmul.h
/// The linear layer over block-quantized weights on the CPU (chapter 08): y[rows, out] = x[rows, in]
/// · Wᵀ with W [out, in] in Q8_0, Q4_0 or Q4_1 — row-major blocks, each output row in / 32 blocks,
/// GGUF's layout — computed as llama.cpp's CPU backend does it: each activation row is quantized
/// once per call (Q8_0 for Q8_0 and Q4_0 weights, Q8_1 for Q4_1: activation_type(), block_quant.h)
/// and every output is a sum over blocks of integer dot products,
///
///     y[r][o] = Σ_b  d_w·d_x · Σ_j q_w[j]·q_x[j]   (+ m_w·s_x for Q4_1),
///
/// the inner sums in int8 × int8 → int32 SIMD instructions. So the result is *not* x · dequant(W)ᵀ:
/// it carries the activations' rounding to 8 bits (|x − x̂| ≤ ~d_x/2 a value; the tests derive the
/// bound on y).
///
/// The arithmetic of one output, the same in every kernel and every tile (the contract that makes
/// the kernels bit-identical to each other and the layer batch-invariant): the integer sum of a
/// block is exact (|Σ| < 2^24, so its float conversion is too), d_w·d_x is an exact fp32 product of
/// two fp16 values, and the blocks are accumulated in order, acc = fma(d_w·d_x, Σ, acc) and for Q4_1
/// then acc = fma(m_w, s_x, acc), from acc = 0. The SIMD kernels vectorize over outputs — a vector
/// holds 8 (row, output) pairs, each lane running that chain — never over the blocks of one sum, so
/// a row's bits depend only on that row and W, whatever the number of rows in the call or where the
/// row sits.
///
/// Cost: 2·rows·out·in FLOPs; W's real bytes (out · row_bytes(type, in)) read once, x read and y
/// written once in fp32 (quant_matmul_cost()). At batch 1 the weight bytes are the whole cost:
/// Q4_1 reads 0.625 bytes a weight, 6.4× fewer than fp32.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/cost.h"
#include "common/tensor.h"
#include "kernels/quant/block_formats.h"

namespace inferlab::quant {

/// A weight matrix of block-quantized rows, borrowed (no ownership): @ref out rows of @ref in
/// values, row o at bytes[o · row_bytes(type, in)], blocks in order — a GGUF tensor's data.
struct BlockMatrix {
  GgmlType type = GgmlType::q8_0;  ///< Q8_0, Q4_0 or Q4_1
  int64_t out = 0;                 ///< rows: output features
  int64_t in = 0;                  ///< values a row: input features, a multiple of 32
  std::span<const uint8_t> bytes;  ///< out · row_bytes(type, in) bytes, any alignment
};

/// Which instructions compute the integer block sums. All give the same bits (the file comment's
/// contract); they differ in speed.
enum class QuantKernel {
  scalar,  ///< plain C++ loops, one (row, output) at a time: the reference the others equal
  avx2,    ///< AVX2: `maddubs` (u8 × s8 → pairs of int16) then `madd` with ones (→ int32)
  vnni,    ///< AVX-VNNI or AVX512-VNNI (256-bit): `dpbusd` (u8 × s8, 4 products summed into int32)
};

/// "scalar", "avx2", "vnni".
std::string_view to_string(QuantKernel kernel);

/// True when this build has @p kernel: scalar always; avx2 when the compiler targets AVX2, FMA
/// and F16C; vnni when it targets AVX-VNNI or AVX512-VNNI with AVX512VL as well (the build uses
/// -march=native).
bool is_available(QuantKernel kernel);

/// The fastest available kernel: vnni, else avx2, else scalar.
QuantKernel best_quant_kernel();

/// Every available kernel, scalar first.
std::vector<QuantKernel> available_quant_kernels();

/// y = x · Wᵀ: @p x is [rows, in] fp32, @p w [out, in] block-quantized, @p y [rows, out] fp32
/// (the file comment's arithmetic). Each activation row is quantized once (activation_type());
/// OpenMP threads take chunks of 32 outputs; rows go in tiles of 4 rows × 4 outputs (prefill: each
/// weight block loaded and unpacked once for the tile's 4 rows), the rows left over — all of them in
/// a decode call — in tiles of 1 row × 8 outputs (the GEMV); both give the same bits. Throws
/// std::invalid_argument naming the argument when w.type is not Q8_0, Q4_0 or Q4_1, w.in is not a
/// positive multiple of 32, w.bytes.size() is not out · row_bytes(type, in), a shape does not
/// match, or @p kernel is not available.
void quant_matmul_cpu(const Tensor<float>& x, const BlockMatrix& w, Tensor<float>& y,
                      QuantKernel kernel = best_quant_kernel());

/// FLOPs and bytes of quant_matmul_cpu() on @p rows rows of a [@p out, @p in] matrix of @p type:
/// 2·rows·out·in FLOPs; out · row_bytes(type, in) weight bytes read once, x read and y written once
/// (fp32). Throws std::invalid_argument as row_bytes() does.
Cost quant_matmul_cost(int64_t rows, GgmlType type, int64_t out, int64_t in);

}  // namespace inferlab::quant
