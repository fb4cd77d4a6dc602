#pragma once
/// @file decode_fp8.h
/// Decode attention over an FP8 E4M3 KV cache (chapter 04): the chapter-03 contract (decode.h)
/// with K and V dequantized inside the kernel (x̂ = Δ · e4m3(code)); q and out stay fp32. The
/// oracle is decode_reference() over Fp8KvCache::dequantized() (what an exact FP8 decode
/// computes); the quantization error is measured against decode_reference() on the fp32 data.

#include <functional>

#include "common/tensor.h"
#include "kernels/decode/decode.h"
#include "kernels/quant/fp8_kv_cache.h"

namespace inferlab {

/// The signature of an FP8 decode version.
using Fp8DecodeFn = std::function<void(const Tensor<float>& q, const Fp8KvCache& cache, Tensor<float>& out)>;

}  // namespace inferlab

/// Declares the chapter-04 FP8 CUDA entry point in namespace inferlab::NS (sim and cuda).
#define INFERLAB_DECLARE_CUDA_FP8(NS)                                                           \
  namespace inferlab::NS {                                                                      \
  /* cuda/decode_fp8: Fp8DecodeFn (hardware E4M3 conversion under nvcc, software on sim). */    \
  void decode_fp8_cuda(const Tensor<float>& q, const Fp8KvCache& cache, Tensor<float>& out);    \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CUDA_FP8(sim)
INFERLAB_DECLARE_CUDA_FP8(cuda)
/// @endcond
