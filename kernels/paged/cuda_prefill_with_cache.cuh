#pragma once
// The device level of cuda/prefill_with_cache (compiled for sim and cuda): device pointers in,
// the kernel queued on the default stream, no wait — what the resident model runner
// (runtime/model/device_runner.cu) calls on its resident cache, whose lengths and block tables
// the step set (DeviceKvCache::set_tables). prefill_with_cache_layer_cuda()
// (cuda_prefill_with_cache.h) is the host-tensor wrapper around the same launch.
#include <cstdint>

#include "kernels/kv/cuda_kv_cache.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

// The rows a flattened token batch attends to: query token i belongs to cache row
// token_sequence[i] and sees its keys 0 … token_length[i] − 1 (its position + 1).
struct ChunkTokens {
  const int* token_sequence = nullptr;  // [num_tokens], device
  const int* token_length = nullptr;    // [num_tokens], device: position + 1
  int64_t num_tokens = 0;               // ≤ 65535 (grid.y)
  int max_length = 0;                   // the largest token_length (bounds the scores' shared memory)
};

// out [num_tokens, num_heads, head_dim] = attention of q [num_tokens, num_heads, head_dim] over
// layer @p layer of @p cache (fp32 or fp16; std::logic_error for another format), token i seeing
// the keys @p tokens says. @p out is written entirely (every (token, head) row).
void prefill_with_cache_device(const float* q, const ChunkTokens& tokens, int64_t num_heads,
                               const DeviceKvCache& cache, int64_t layer, float* out);

}  // namespace inferlab::INFERLAB_BACKEND_NS
