// cuda/prefill_with_cache — chapter 06: a chunk of new tokens attends to the cached prefix and
// causally to itself (the contract: prefill_with_cache.h), on the device, either cache layout.
//
// The kernel is chapter 03's decode kernel (decode_rows_kernel, cuda_decode.cuh) unchanged: its
// grid's y index names "the query being decoded", its Rows policy says how many keys that query
// sees and where key j of it lives. ChunkRows below makes the y index a query *token* of the
// flattened batch: it sees keys 0 … its position of its own sequence, through the cache's
// layout. So the launch is grid (num_heads, num_tokens), block 128; each block computes one
// (token, head) row exactly as a decode step would, and the causal mask is nothing but the
// per-token key count.
//
// Cost: the FLOPs of prefill_with_cache_cost(); but every query re-reads its keys from memory
// (L2 may catch the reuse between neighbouring tokens) — a chunk of n tokens reads the prefix n
// times, arithmetic intensity ≈ 1 as in decode. A kernel that keeps a tile of the chunk's
// queries in shared memory (FlashAttention's loop over a paged K/V, as FlashInfer and vLLM's
// varlen kernels do) reads it n / tile times; cpu/prefill_with_cache does that on the CPU.
// The key count per token also bounds the shared memory of its scores: the longest position + 1.
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/decode/cuda_decode.cuh"
#include "kernels/decode/cuda_decode_host.cuh"
#include "kernels/paged/cuda_prefill_with_cache.cuh"
#include "kernels/paged/cuda_prefill_with_cache.h"
#include "kernels/paged/prefill_with_cache.h"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

// decode_rows_kernel's Rows over query tokens: "sequence" i of the kernel is query token i,
// which sees token_length[i] = position + 1 keys of sequence token_sequence[i].
template <class Base>
struct ChunkRows : Base {
  const int* token_sequence = nullptr;  // [num_tokens]
  const int* token_length = nullptr;    // [num_tokens]: position + 1
  __device__ int length(int i) const { return token_length[i]; }
  __device__ size_t row(int i, int g, int j) const { return Base::row(token_sequence[i], g, j); }
};

// Queues the kernel for element type T over the cache's own layout.
template <class T>
void launch_prefill(const float* q, const ChunkTokens& tokens, int64_t num_heads, const DeviceKvCache& cache,
                    int64_t layer, float* out) {
  const KvCacheShape& c = cache.shape();
  // The decode kernel's view of the problem: num_tokens "sequences" of one query each.
  const DecodeShape as_decode{tokens.num_tokens, num_heads, c.num_kv_heads, c.max_seq_len, c.head_dim};
  constexpr int kVectorWidth = sizeof(T) == 4 ? 4 : 8;  // 16-byte loads
  cache.with_rows<T>(layer, [&](const auto& cache_rows) {
    using Layout = std::decay_t<decltype(cache_rows.layout)>;
    using Rows = ChunkRows<CachedRows<T, Layout>>;
    Rows rows;
    rows.cache = cache_rows;
    rows.token_sequence = tokens.token_sequence;
    rows.token_length = tokens.token_length;
    launch_decode_rows<Rows, kVectorWidth>(rows, q, out, as_decode, tokens.max_length, nullptr,
                                           "cuda/prefill_with_cache");
  });
}

void prefill_host(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths, const KvCache& cache,
                  int64_t layer, Tensor<float>& out) {
  const ChunkShape s = chunk_shape(q, chunk_lengths, cache);
  check_shape(out, q.shape(), "out");
  if (s.num_tokens == 0) return;
  require(s.num_tokens <= 65535, "q.shape[0] (num_tokens)", s.num_tokens, "must be ≤ 65535 (grid.y)");
  std::vector<int> sequence(s.token_sequence.begin(), s.token_sequence.end()), length(s.token_position.size());
  int max_length = 0;
  for (size_t i = 0; i < length.size(); ++i) {
    length[i] = s.token_position[i] + 1;
    max_length = std::max(max_length, length[i]);
  }
  const DeviceKvCache device_cache(cache);
  DeviceBuffer<int> sequence_device(sequence), length_device(length);
  const ChunkTokens tokens{sequence_device.data(), length_device.data(), s.num_tokens, max_length};
  decode_on_host_tensors(q, out, "cuda/prefill_with_cache", [&](const float* q_device, float* out_device) {
    prefill_with_cache_device(q_device, tokens, s.num_heads, device_cache, layer, out_device);
  });
}

}  // namespace

void prefill_with_cache_device(const float* q, const ChunkTokens& tokens, int64_t num_heads, const DeviceKvCache& cache,
                               int64_t layer, float* out) {
  if (tokens.num_tokens == 0) return;
  require(tokens.num_tokens <= 65535, "tokens.num_tokens", tokens.num_tokens, "must be ≤ 65535 (grid.y)");
  if (cache.format().dtype == KvDtype::fp16) {
    launch_prefill<__half>(q, tokens, num_heads, cache, layer, out);
  } else {
    launch_prefill<float>(q, tokens, num_heads, cache, layer, out);  // rows<float>() refuses any other format
  }
}

void prefill_with_cache_layer_cuda(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths,
                                   const KvCache& cache, int64_t layer, Tensor<float>& out) {
  require(layer >= 0 && layer < cache.shape().num_layers, "layer", layer,
          "must be in [0, num_layers = " + std::to_string(cache.shape().num_layers) + ")");
  prefill_host(q, chunk_lengths, cache, layer, out);
}

void prefill_with_cache_cuda(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths, const KvCache& cache,
                             Tensor<float>& out) {
  prefill_with_cache_layer_cuda(q, chunk_lengths, cache, 0, out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
