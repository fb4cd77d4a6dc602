#pragma once
/// @file quant_matmul_kernel.h
/// Which device kernel of the quantized matmul runs (kernels/quant/cuda_quant_matmul.cu's version
/// ladder): every one gives the same bits as quant_matmul_cpu(), so the choice is speed only.

namespace inferlab::quant {

/// The device kernel of the quantized matmul.
enum class QuantMatmulKernel {
  automatic,  ///< per_row for one row (a decode step), tiled for more
  per_row,    ///< chapter 08's: one thread a (row, output), a warp's weight chunk staged for 4 rows
  tiled,      ///< chapter 11's: 64 outputs × 16 rows a thread block, each weight chunk staged once for 16 rows
};

}  // namespace inferlab::quant
