#pragma once
/// @file cuda_attention.h
/// The CUDA versions of prefill attention (chapter 02). Each .cu file is compiled twice: by g++
/// into namespace inferlab::sim (run by the SIMT emulator) and, when nvcc is found, into
/// inferlab::cuda (run on a GPU). Both namespaces declare the same functions, listed once here.
///
/// Every entry point has the host-tensor signature of AttentionFn (copy in, run, copy out),
/// so tests and the CLI treat them like the CPU versions. Each is a thin wrapper over a
/// device-level function on device-resident data with caller-provided scratch
/// (kernels/attention/cuda_prefill.cuh), which is what benchmarks time (cuda_timing.h).

#include "kernels/attention/attention.h"

/// Declares the chapter-02 CUDA entry points in namespace inferlab::NS.
#define INFERLAB_DECLARE_CUDA_ATTENTION(NS)                                                                  \
  namespace inferlab::NS {                                                                                 \
  void attention_cuda_naive(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,        \
                            bool causal, Tensor<float>& out);                                              \
  void attention_cuda_tiled(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,        \
                            bool causal, Tensor<float>& out);                                              \
  void attention_cuda_cublas(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,       \
                             bool causal, Tensor<float>& out);                                             \
  void attention_cuda_cublas_fp16(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,  \
                                  bool causal, Tensor<float>& out);                                        \
  void attention_cuda_cublas_bf16(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,  \
                                  bool causal, Tensor<float>& out);                                        \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CUDA_ATTENTION(sim)
INFERLAB_DECLARE_CUDA_ATTENTION(cuda)
/// @endcond
