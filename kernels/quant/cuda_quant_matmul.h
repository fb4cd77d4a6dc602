#pragma once
/// @file cuda_quant_matmul.h
/// The quantized matmul of quant_matmul.h on the sim and cuda backends (chapter 08), with
/// host-tensor signatures: the same arguments, the same checks and — the point of the file — the
/// same bits as quant_matmul_cpu(), whatever the number of rows in the call. The .cu file is
/// compiled twice: by g++ into namespace inferlab::sim (run by the SIMT emulator) and, when nvcc
/// is found, into inferlab::cuda.
///
/// Two kernels (cuda_quant_matmul.cu's file comment maps them onto the code):
/// - the activation quantizer: each fp32 row into Q8_0 blocks (Q8_0 and Q4_0 weights) or Q8_1
///   blocks (Q4_1 weights), one warp a 32-value block, the same d, codes and s as
///   quantize_row_q8_0() / quantize_row_q8_1() byte for byte;
/// - the matmul: one thread a (row, output) — the lanes of a warp over 32 consecutive outputs —
///   summing each block with __dp4a and accumulating the blocks in order,
///   acc = fma(d_w·d_x, Σ, acc) (+ fma(m_w, s_x, acc) for Q4_1): quant_matmul.h's contract.
///
/// Each entry point uploads its inputs, runs on the device and downloads its output (poisoned on
/// the device first). A resident forward calls the device level instead (cuda_quant_matmul.cuh:
/// device pointers, queued without a wait).

#include <cstdint>
#include <span>

#include "common/tensor.h"
#include "kernels/quant/quant_matmul.h"
#include "kernels/quant/quant_matmul_kernel.h"

/// Declares the device quantized-matmul entry points in namespace inferlab::NS.
#define INFERLAB_DECLARE_CUDA_QUANT_MATMUL(NS)                                                                  \
  namespace inferlab::NS {                                                                                      \
  /* y = x · Wᵀ over Q8_0 / Q4_0 / Q4_1 blocks, bit-identical to quant_matmul_cpu() (any kernel):            \
     x [rows, in] fp32, w [out, in] blocks (host bytes, any alignment), y [rows, out]. Throws                \
     std::invalid_argument naming w.type, w.in, w.out, w.bytes.size(), x.shape[1] or y, as the cpu one. */   \
  void quant_matmul_cuda(const Tensor<float>& x, const quant::BlockMatrix& w, Tensor<float>& y,              \
                         quant::QuantMatmulKernel kernel = quant::QuantMatmulKernel::automatic);             \
  /* Quantizes each row of x [rows, in] on the device into @p type blocks (Q8_0 or Q8_1), written to         \
     @p blocks (rows · row_bytes(type, in) bytes, the rows one after another): the bytes of                  \
     quantize_row(type, row). Throws std::invalid_argument naming type, x.shape[1] or blocks.size(). */      \
  void quantize_rows_cuda(quant::GgmlType type, const Tensor<float>& x, std::span<uint8_t> blocks);           \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CUDA_QUANT_MATMUL(sim)
INFERLAB_DECLARE_CUDA_QUANT_MATMUL(cuda)
/// @endcond
