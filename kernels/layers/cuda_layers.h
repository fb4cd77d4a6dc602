#pragma once
/// @file cuda_layers.h
/// The CUDA twins of layers.h (chapter 07's model on the sim and cuda backends) with host-tensor
/// signatures — the same arguments and the same meaning as linear_cpu(), rms_norm_cpu(),
/// rope_cpu() and swiglu_cpu(), so the model's forward can call either set through one table.
/// The .cu file is compiled twice: by g++ into namespace inferlab::sim (run by the SIMT emulator)
/// and, when nvcc is found, into inferlab::cuda.
///
/// Each entry point uploads its inputs, runs on the device and downloads its output (poisoned on
/// the device before the kernel runs). That keeps them interchangeable with the CPU functions; a
/// production forward would keep the weights and activations resident instead.
///
/// Not batch-invariant in general: linear_cuda() is cuBLAS's GEMM, which (like OpenBLAS,
/// layers.h) may pick its algorithm, and so its summation order, by the matrix sizes. The others
/// are: one row's result depends only on that row.

#include <cstdint>
#include <span>

#include "common/tensor.h"

/// Declares the device layer entry points in namespace inferlab::NS.
#define INFERLAB_DECLARE_CUDA_LAYERS(NS)                                                                    \
  namespace inferlab::NS {                                                                                  \
  /* y = x · wᵀ through cublasSgemm (fp32): x [rows, in], w [out, in], y [rows, out], row-major. */         \
  void linear_cuda(const Tensor<float>& x, const Tensor<float>& w, Tensor<float>& y);                       \
  /* RMSNorm of each row, one block per row (block reduction of Σx²). y may alias x. */                     \
  void rms_norm_cuda(const Tensor<float>& x, std::span<const float> weight, float eps, Tensor<float>& y);    \
  /* RoPE in place on host memory, as rope_cpu (same (cos, sin) table): one thread per rotated pair. */     \
  void rope_cuda(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim,               \
                 std::span<const int64_t> positions, std::span<const float> cos_sin);                       \
  /* SwiGLU's gate, as swiglu_cpu: one thread per output element. */                                       \
  void swiglu_cuda(const Tensor<float>& gate_up, Tensor<float>& out);                                       \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CUDA_LAYERS(sim)
INFERLAB_DECLARE_CUDA_LAYERS(cuda)
/// @endcond
