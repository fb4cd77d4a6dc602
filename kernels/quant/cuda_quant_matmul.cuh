#pragma once
/// @file cuda_quant_matmul.cuh
/// The device level of the quantized matmul (compiled for sim and cuda): device pointers in, each
/// function checks its sizes, queues its kernel on the default stream and returns without waiting.
/// The host-tensor entry points of cuda_quant_matmul.h wrap them (upload, call, wait, download);
/// a resident forward keeps the weight blocks on the device and chains them. Kernels and launch
/// shapes: cuda_quant_matmul.cu's file comment.
#include <cstdint>

#include "kernels/quant/block_formats.h"
#include "kernels/quant/quant_matmul_kernel.h"
#include "simt/simt.h"

namespace inferlab::INFERLAB_BACKEND_NS {

/// A block-quantized weight matrix in device memory (borrowed): @ref out rows of @ref in values,
/// row o at bytes + o · row_bytes(type, in) — the layout of quant::BlockMatrix and of a GGUF
/// tensor, uploaded as it is.
struct DeviceBlockMatrix {
  quant::GgmlType type = quant::GgmlType::q8_0;  ///< Q8_0, Q4_0 or Q4_1
  int64_t out = 0;                               ///< rows: output features
  int64_t in = 0;                                ///< values a row, a positive multiple of 32
  const uint8_t* bytes = nullptr;                ///< out · row_bytes(type, in) bytes, 4-byte aligned
};

using quant::QuantMatmulKernel;

/// Bytes of the quantized activations of @p rows rows of @p in values for weights of
/// @p weight_type: rows · row_bytes(activation_type(weight_type), in) — the scratch buffer that
/// quant_matmul_device() needs. Throws std::invalid_argument as activation_type() and row_bytes().
int64_t quant_activation_bytes(quant::GgmlType weight_type, int64_t rows, int64_t in);

/// Quantizes @p rows rows of @p in fp32 values at @p x into blocks of @p type (Q8_0 or Q8_1) at
/// @p blocks (rows · row_bytes(type, in) bytes, 4-byte aligned): row r's blocks are the bytes of
/// quant::quantize_row(type, row r). Throws std::invalid_argument naming type, in, rows or blocks.
void quantize_rows_device(quant::GgmlType type, const float* x, int64_t rows, int64_t in, uint8_t* blocks);

/// y [rows, w.out] (fp32) from activations already quantized by quantize_rows_device() into
/// activation_type(w.type) blocks at @p x_blocks: quant_matmul.h's arithmetic, so every element
/// equals quant_matmul_cpu()'s bit for bit. Throws std::invalid_argument naming w.type, w.in,
/// w.out, w.bytes, rows or x_blocks. @p kernel picks the version (all give the same bits).
void quant_matmul_blocks_device(const DeviceBlockMatrix& w, const uint8_t* x_blocks, int64_t rows, float* y,
                                QuantMatmulKernel kernel = QuantMatmulKernel::automatic);

/// Both steps: quantizes x [rows, w.in] into @p scratch (quant_activation_bytes(w.type, rows,
/// w.in) bytes, 4-byte aligned), then y [rows, w.out] = x · Wᵀ by quant_matmul_blocks_device().
void quant_matmul_device(const float* x, int64_t rows, const DeviceBlockMatrix& w, uint8_t* scratch, float* y,
                         QuantMatmulKernel kernel = QuantMatmulKernel::automatic);

}  // namespace inferlab::INFERLAB_BACKEND_NS
