#pragma once
/// @file cuda_fused.h
/// The CUDA fused-attention prefill versions of chapter 05 with host-tensor signatures
/// (AttentionFn, kernels/registry.h). Each .cu file is compiled twice: by g++ into
/// namespace inferlab::sim (run by the SIMT emulator) and, when nvcc is found, into
/// inferlab::cuda (run on a GPU). Both namespaces declare the same functions, listed once here.
///
/// Each entry point copies Q, K, V in, runs the device-level function
/// (kernels/fused/cuda_fused.cuh, what benchmarks time) and copies O out. Neither allocates
/// anything but Q, K, V and O (fused_prefill_device_bytes() in kernels/fused/fused.h).

#include "kernels/attention/attention.h"

/// Declares the chapter-05 CUDA prefill entry points in namespace inferlab::NS.
#define INFERLAB_DECLARE_CUDA_FUSED(NS)                                                                             \
  namespace inferlab::NS {                                                                                          \
  /* cuda/flash: SIMT FlashAttention, fp32; head_dim 1..kFlashMaxHeadDim. */                                        \
  void attention_cuda_flash(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,    \
                            Tensor<float>& out);                                                                    \
  /* cuda/flash_tc: WMMA tensor cores, fp16 in, fp32 accumulation; head_dim a multiple of 16. */                    \
  void attention_cuda_flash_tc(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal, \
                               Tensor<float>& out);                                                                 \
  /* cuda/flash_tc_bf16: the same kernel with bf16 inputs. */                                                       \
  void attention_cuda_flash_tc_bf16(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,         \
                                    bool causal, Tensor<float>& out);                                               \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CUDA_FUSED(sim)
INFERLAB_DECLARE_CUDA_FUSED(cuda)
/// @endcond
