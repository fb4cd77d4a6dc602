#pragma once
/// @file cuda_decode.h
/// The CUDA code of chapter 03 with host-tensor signatures. Each .cu file is compiled twice: by
/// g++ into namespace inferlab::sim (run by the SIMT emulator) and, when nvcc is found, into
/// inferlab::cuda (run on a GPU). Both namespaces declare the same functions, listed once here.
///
/// Each entry point uploads the host KvCache (poisoned tail included), runs the device-level
/// function (kernels/decode/cuda_decode.cuh, what benchmarks time) and copies the result back.

#include "kernels/decode/decode.h"
#include "kernels/decode/kv_cache.h"

/// Declares the chapter-03 CUDA entry points in namespace inferlab::NS.
#define INFERLAB_DECLARE_CUDA_DECODE(NS)                                                        \
  namespace inferlab::NS {                                                                      \
  /* cuda/decode: DecodeFn (registry.h); fp32 or fp16 cache, whichever @p cache holds. */       \
  void decode_cuda(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out);           \
  /* cuda/append: KvAppendFn (registry.h); checks capacity, runs the append kernel, commits. */ \
  void kv_append_cuda(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new);  \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CUDA_DECODE(sim)
INFERLAB_DECLARE_CUDA_DECODE(cuda)
/// @endcond
