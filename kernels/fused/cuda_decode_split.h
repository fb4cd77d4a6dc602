#pragma once
/// @file cuda_decode_split.h
/// cuda/decode_split (chapter 05) with host-tensor signatures (DecodeFn, kernels/registry.h).
/// cuda_decode_split.cu is compiled twice: by g++ into inferlab::sim (the SIMT emulator) and,
/// when nvcc is found, into inferlab::cuda. Both namespaces declare the same functions, listed
/// once here. Each entry point uploads the host KvCache (poisoned tail included), runs the
/// device level (kernels/fused/cuda_decode_split.cuh) and copies the output back.

#include "kernels/decode/decode.h"
#include "kernels/kv/kv_cache.h"

/// Declares the split-KV decode entry points in namespace inferlab::NS.
#define INFERLAB_DECLARE_CUDA_DECODE_SPLIT(NS)                                                                  \
  namespace inferlab::NS {                                                                                      \
  /* cuda/decode_split with num_splits ≥ 1 splits per sequence (else std::invalid_argument). */               \
  void decode_split_cuda(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out, int64_t num_splits); \
  /* cuda/decode_split as registered: S from choose_num_splits() and cuda_split_policy(). */                    \
  void decode_split_cuda(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out);                     \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CUDA_DECODE_SPLIT(sim)
INFERLAB_DECLARE_CUDA_DECODE_SPLIT(cuda)
/// @endcond
