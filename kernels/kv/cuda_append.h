#pragma once
/// @file cuda_append.h
/// The device appends and slot writes of the KV cache (kv/cuda_append.cu) with host-tensor
/// signatures. The .cu
/// file is compiled twice: by g++ into namespace inferlab::sim (run by the SIMT emulator) and,
/// when nvcc is found, into inferlab::cuda. Each entry point checks the append on the host
/// (KvCache::check_append: capacity, shapes, finiteness), uploads the cache, runs its kernel,
/// downloads the cache and commits the append.

#include <cstdint>
#include <span>

#include "common/tensor.h"
#include "kernels/kv/kv_cache.h"

/// Declares the device append entry points in namespace inferlab::NS.
#define INFERLAB_DECLARE_CUDA_APPEND(NS)                                                            \
  namespace inferlab::NS {                                                                          \
  /* cuda/append (chapter 03): fp32 or fp16 cache; std::logic_error for another format. */         \
  void kv_append_cuda(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new);     \
  /* cuda/append_int8 (chapter 04): INT8 cache; a non-finite value throws naming sequence and KV  \
     head, nothing written. */                                                                      \
  void int8_append_cuda(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new);   \
  /* cuda/write_slots (chapter 06, vLLM's reshape_and_cache): token i of k, v [num_tokens,        \
     num_kv_heads, head_dim] into slot slots[i] (−1: skipped) of layer `layer` (chapter 07's      \
     model: one call per layer) of an fp32, fp16 or INT8 cache, either layout; lengths unchanged.  \
     Checked by KvCache::check_slots first. */                                                     \
  void kv_write_slots_cuda(KvCache& cache, const Tensor<float>& k, const Tensor<float>& v,         \
                           std::span<const int64_t> slots, int64_t layer = 0);                     \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CUDA_APPEND(sim)
INFERLAB_DECLARE_CUDA_APPEND(cuda)
/// @endcond
