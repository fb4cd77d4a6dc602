#pragma once
/// @file cuda_prefill_with_cache.h
/// cuda/prefill_with_cache (chapter 06) with a host-tensor signature. The .cu file is compiled
/// twice: by g++ into namespace inferlab::sim (run by the SIMT emulator) and, when nvcc is found,
/// into inferlab::cuda.

#include <cstdint>
#include <vector>

#include "common/tensor.h"
#include "kernels/kv/kv_cache.h"

/// Declares the device prefill-with-cache entry point in namespace inferlab::NS.
#define INFERLAB_DECLARE_CUDA_PREFILL_WITH_CACHE(NS)                                                          \
  namespace inferlab::NS {                                                                                    \
  /* cuda/prefill_with_cache: chapter 03's decode kernel over the flattened query tokens — one block per     \
     (query head, query token), keys 0..position through the cache's layout. fp32 or fp16 cache. */          \
  void prefill_with_cache_cuda(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths,             \
                               const KvCache& cache, Tensor<float>& out);                                     \
  /* The same over layer `layer` of the cache (chapter 07's model, once per layer; the function above is     \
     layer 0). A name of its own, not an overload: registry rows (paged/versions.cpp) take the 4-argument    \
     function by name into a std::function, which an overload set would make ambiguous. */                  \
  void prefill_with_cache_layer_cuda(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths,       \
                                     const KvCache& cache, int64_t layer, Tensor<float>& out);                \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CUDA_PREFILL_WITH_CACHE(sim)
INFERLAB_DECLARE_CUDA_PREFILL_WITH_CACHE(cuda)
/// @endcond
