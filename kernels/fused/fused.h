#pragma once
/// @file fused.h
/// Fused attention (chapter 05): FlashAttention-style prefill and split-KV (flash-decoding)
/// decode. The L×L score matrix never reaches memory: keys and values are visited tile by tile,
/// and each query row keeps a running max m, a running sum l and an unnormalised output
/// accumulator, rescaled by exp(m_old − m_new) whenever the max grows (online softmax).
///
/// Prefill versions keep the contract of kernels/attention/attention.h (AttentionFn) and are
/// registered in kernels/fused/versions.cpp: cpu/flash, cuda/flash (SIMT, fp32) and
/// cuda/flash_tc (tensor cores, fp16 inputs, fp32 accumulation). The CUDA entry points are
/// declared in kernels/fused/cuda_fused.h. Split-KV decode (cpu/decode_split,
/// cuda/decode_split) is declared in kernels/fused/split_kv.h and kernels/fused/cuda_decode_split.h.
///
/// Memory: a fused prefill needs Q, K, V and O and nothing of size L×L; on a device it
/// allocates exactly fused_prefill_device_bytes().

#include <cstdint>
#include <string>

#include "common/check.h"
#include "kernels/attention/attention.h"

namespace inferlab {

/// The head_dim granularity of cuda/flash_tc: its products run on 16×16×16 tensor-core tiles,
/// so head_dim must be a multiple of this.
constexpr int64_t kFlashTcHeadDimMultiple = 16;

/// The largest head_dim cuda/flash and cuda/flash_tc accept: their per-thread accumulators and
/// shared-memory tiles are sized for it (every head_dim of the models the lessons use).
constexpr int64_t kFlashMaxHeadDim = 128;

/// Throws std::invalid_argument naming head_dim unless cuda/flash can run it
/// (1 ≤ head_dim ≤ kFlashMaxHeadDim).
inline void require_flash_head_dim(int64_t head_dim) {
  require(head_dim >= 1 && head_dim <= kFlashMaxHeadDim, "head_dim", head_dim,
          "cuda/flash supports 1.." + std::to_string(kFlashMaxHeadDim));
}

/// Throws std::invalid_argument naming head_dim unless cuda/flash_tc can run it: a multiple of
/// kFlashTcHeadDimMultiple, at most kFlashMaxHeadDim.
inline void require_flash_tc_head_dim(int64_t head_dim) {
  require(head_dim >= 1 && head_dim <= kFlashMaxHeadDim && head_dim % kFlashTcHeadDimMultiple == 0, "head_dim",
          head_dim,
          "cuda/flash_tc needs a multiple of " + std::to_string(kFlashTcHeadDimMultiple) + " in 16.." +
              std::to_string(kFlashMaxHeadDim) + " (16×16×16 tensor-core tiles)");
}

/// Device bytes a fused prefill of @p shape allocates when its inputs are stored with
/// @p input_bytes bytes per element (4 for fp32, 2 for fp16/bf16) and O is fp32: Q + K + V + O,
/// O(L·d) — no score matrix. The memory test checks the emulator's allocation peak against it.
inline int64_t fused_prefill_device_bytes(const AttentionShape& shape, int64_t input_bytes) {
  const int64_t q_elements = shape.num_heads * shape.seq_len * shape.head_dim;
  const int64_t kv_elements = shape.num_kv_heads * shape.seq_len * shape.head_dim;
  return input_bytes * (q_elements + 2 * kv_elements) + 4 * q_elements;
}

/// cpu/flash — chapter 05: FlashAttention on the CPU (kernels/fused/cpu_flash.cpp). OpenMP over
/// (query head, block of query rows); each block walks the key blocks with the online softmax
/// (running max and sum per row, the output rescaled when the max grows), the two products on
/// cpu/blocked's register-tiled micro-kernel (cpu_micro_tile.h); causal key blocks above the
/// diagonal skipped; GQA; any seq_len and head_dim; fp32. Scratch O(block²) floats per thread
/// plus the packed K and V (O(L·d)): no L×L buffer.
void attention_cpu_flash(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                         Tensor<float>& out);

}  // namespace inferlab
