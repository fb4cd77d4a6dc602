#pragma once
/// @file cuda_decode.h
/// The CUDA decode kernels of chapters 03 and 04 with host-tensor signatures (DecodeFn,
/// registry.h). Each .cu file is compiled twice: by g++ into namespace inferlab::sim (run by
/// the SIMT emulator) and, when nvcc is found, into inferlab::cuda (run on a GPU). Both
/// namespaces declare the same functions, listed once here.
///
/// Each entry point uploads the host KvCache (poisoned rows included), runs the device-level
/// function (kernels/decode/cuda_decode.cuh, what benchmarks time) and copies the result back.
/// A cache of a format the kernel does not read throws std::logic_error.

#include "kernels/decode/decode.h"
#include "kernels/kv/kv_cache.h"

/// Declares the CUDA decode entry points in namespace inferlab::NS.
#define INFERLAB_DECLARE_CUDA_DECODE(NS)                                                          \
  namespace inferlab::NS {                                                                        \
  /* cuda/decode (chapter 03): fp32 or fp16 cache. */                                             \
  void decode_cuda(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out);             \
  /* cuda/decode_int8 (chapter 04): INT8 cache, scales fp32 or fp16, per token or per channel. */ \
  void decode_int8_cuda(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out);        \
  /* cuda/decode_fp8 (chapter 04): FP8 E4M3 cache (hardware conversion under nvcc, software on   \
     sim). */                                                                                     \
  void decode_fp8_cuda(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out);         \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CUDA_DECODE(sim)
INFERLAB_DECLARE_CUDA_DECODE(cuda)
/// @endcond
