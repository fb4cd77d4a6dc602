#pragma once
/// @file decode_int8.h
/// Decode attention over an INT8 KV cache (chapter 04): the chapter-03 contract (decode.h) with
/// K and V dequantized inside the kernel (x̂ = scale · q). q and out stay fp32.

#include <functional>

#include "common/cost.h"
#include "common/tensor.h"
#include "kernels/decode/decode.h"
#include "kernels/quant/int8_kv_cache.h"

namespace inferlab {

/// FLOPs and bytes of one INT8 decode step over @p cache for @p num_heads query heads: FLOPs as
/// decode_step_cost (4·L·d per query head); bytes = per sequence with L > 0 cached tokens,
/// 2·num_kv_heads·L·d bytes of int8 K and V, their scales (V and per-token K: one per row;
/// per-channel K: head_dim per KV head; 4 or 2 bytes each), and q and out in fp32.
Cost decode_int8_step_cost(const Int8KvCache& cache, int64_t num_heads);

/// The float64 oracle over the *dequantized* cache: what an exact INT8 decode computes. (The
/// quantization error itself is measured against decode_reference on the unquantized data.)
Tensor<double> decode_int8_reference(const Tensor<float>& q, const Int8KvCache& cache);

/// cpu/decode_int8_simd — chapter 04: cpu/decode_simd's structure (OpenMP over (sequence, KV
/// head), 4 keys per step) reading int8 rows: 16 (AVX-512) or 8 (AVX2) bytes widened to floats
/// per load, the next rows prefetched, the scales (fp32 or fp16) folded in (per-token K: into
/// the score; per-channel K: into the query; V: into the probability).
void decode_int8_cpu_simd(const Tensor<float>& q, const Int8KvCache& cache, Tensor<float>& out);

/// The signature of an INT8 decode version.
using Int8DecodeFn = std::function<void(const Tensor<float>& q, const Int8KvCache& cache, Tensor<float>& out)>;
/// The signature of an INT8 quantize-on-append version (Int8KvCache::append's contract).
using Int8AppendFn = std::function<void(Int8KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new)>;

}  // namespace inferlab

/// Declares the chapter-04 CUDA entry points in namespace inferlab::NS (sim and cuda).
#define INFERLAB_DECLARE_CUDA_INT8(NS)                                                               \
  namespace inferlab::NS {                                                                           \
  /* cuda/decode_int8: Int8DecodeFn. */                                                              \
  void decode_int8_cuda(const Tensor<float>& q, const Int8KvCache& cache, Tensor<float>& out);       \
  /* cuda/append_int8: Int8AppendFn; a non-finite value throws naming sequence and KV head. */       \
  void int8_append_cuda(Int8KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new); \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CUDA_INT8(sim)
INFERLAB_DECLARE_CUDA_INT8(cuda)
/// @endcond
