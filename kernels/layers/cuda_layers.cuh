#pragma once
// The device level of the Llama layers (compiled for sim and cuda): each function takes device
// pointers, checks its sizes, queues its kernel on the default stream and returns without
// waiting — the resident model runner (runtime/model/device_runner.cu) chains them over buffers
// that stay on the device, and the host-tensor entry points of cuda_layers.h wrap them (upload,
// call, wait, download). Kernels and launch shapes: cuda_layers.cu's file comment.
#include <cstdint>

#include "kernels/layers/layers.h"
#include "simt/cublas.h"

namespace inferlab::INFERLAB_BACKEND_NS {

// y [rows, out] = x [rows, in] · wᵀ (w [out, in]), row-major fp32, by cublasSgemm on @p handle.
void linear_device(cublasHandle_t handle, const float* x, int64_t rows, const float* w, int64_t out, int64_t in,
                   float* y);
// RMSNorm of each of @p rows rows of @p dim floats: y = w ⊙ x / √(mean(x²) + eps). y may alias x.
void rms_norm_device(const float* x, const float* weight, float eps, int64_t rows, int64_t dim, float* y);
// RoPE in place on the first @p heads heads of each row of @p x ([rows][row_stride]), row r at
// position positions[r], pairs as @p style says, angles from the (cos, sin) table of rope_table().
void rope_device(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, const int64_t* positions,
                 const float* cos_sin, RopeStyle style);
// SwiGLU's gate: out [rows, hidden] = silu(gate_up[:, :hidden]) ⊙ gate_up[:, hidden:].
void swiglu_device(const float* gate_up, int64_t rows, int64_t hidden, float* out);
// x += y, @p count floats (the residual stream).
void add_device(float* x, const float* y, int64_t count);
// out[i] = row rows[i] of @p table ([?, width] floats), @p count rows: the embedding lookup (rows
// = token ids) and the logit tokens' gather (rows = token indices).
void gather_rows_device(const float* table, int64_t width, const int32_t* rows, int64_t count, float* out);
// out[r][0, cols) = in[r][offset, offset + cols) for @p rows rows of @p in_stride floats: one
// part of each row (the queries of a qkv row) made contiguous.
void copy_columns_device(const float* in, int64_t in_stride, int64_t offset, int64_t rows, int64_t cols, float* out);

}  // namespace inferlab::INFERLAB_BACKEND_NS
