#pragma once
/// @file prefill_with_cache.h
/// Prefill with a cache (chapter 06, used by chapter 07's chunked prefill) — the contract every
/// version implements.
///
/// A batch of *chunks*: sequence b brings chunk_lengths[b] new tokens (0: not in this batch; 1:
/// a decode step), whose K and V are already written to the cache (KvCache::store_slots), so
/// the cache holds lengths[b] tokens and the chunk is its last chunk_lengths[b] of them. Query i
/// of the chunk sits at position p = lengths[b] − chunk_lengths[b] + i and attends causally to
/// the cached prefix and to the chunk's tokens up to itself:
///
///     out[token][h] = softmax(q[token][h] · K[b][g][0..p]ᵀ / √head_dim) · V[b][g][0..p],
///     g = h / group_size
///
/// Layout (row-major): q and out are [num_tokens, num_heads, head_dim] with the chunks one after
/// another in sequence order (num_tokens = Σ chunk_lengths, vLLM's flattened token batch); the
/// cache's rows are where its layout puts them (contiguous or paged). A decode step is the case
/// chunk_lengths = 1 for every sequence; a whole-prompt prefill is chunk_lengths = lengths.
///
/// Cost (per query head, chunk of n tokens after a prefix of P): 4·d·(n·P + n(n+1)/2) FLOPs;
/// the K and V rows of P + n tokens are needed once per chunk — a version that keeps the
/// chunk's queries together reads them once (cpu/prefill_with_cache), one that runs a query at
/// a time reads them n times (cuda/prefill_with_cache, a decode kernel over the tokens).

#include <cstdint>
#include <vector>

#include "common/cost.h"
#include "common/tensor.h"
#include "kernels/kv/kv_cache.h"

namespace inferlab {

/// The sizes of one prefill-with-cache call, and where each query token sits.
struct ChunkShape {
  int64_t num_tokens = 0;    ///< Σ chunk_lengths: rows of q and out
  int64_t num_heads = 0;     ///< query heads
  int64_t num_kv_heads = 0;  ///< key/value heads; divides num_heads
  int64_t head_dim = 0;      ///< d
  std::vector<int32_t> token_sequence;  ///< the sequence of each query token
  std::vector<int32_t> token_position;  ///< the position p of each query token (it sees keys 0..p)

  /// Query heads per KV head.
  int64_t group_size() const { return num_heads / num_kv_heads; }
};

/// Checks @p q ([num_tokens, num_heads, head_dim]) and @p chunk_lengths (one per sequence, each in
/// [0, lengths[b]], summing to num_tokens) against @p cache and returns the shape. Throws
/// std::invalid_argument naming the offending argument.
ChunkShape chunk_shape(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths, const KvCache& cache);

/// The float64 oracle: the definition above in double precision over the cache's stored values
/// (key() / value(): fp16 converted exactly, codes dequantized), max subtracted before exp.
Tensor<double> prefill_with_cache_reference(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths,
                                            const KvCache& cache);

/// FLOPs and bytes of one call: 4·d per (query head, visible key); the K and V rows of every
/// sequence with a chunk read once (in the cache's element type), q and out in fp32.
Cost prefill_with_cache_cost(const std::vector<int64_t>& chunk_lengths, const KvCache& cache, int64_t num_heads);

/// cpu/prefill_with_cache — chapter 06: fused (online softmax, no P×n score matrix kept), OpenMP
/// over (sequence, KV head, tile of the chunk's queries). Each tile's queries — all its tokens ×
/// the GQA group — stream the cached prefix together through chapter 03's two SIMD passes
/// (attend_keys(), run by run, so a paged cache is read block by block), a prefix of any length
/// in pieces whose partial results are merged exactly; then each token attends to the chunk's
/// keys up to itself; the partials are merged. Either layout; an fp32, fp16, INT8 (per-token K
/// scales, or per-channel on a contiguous cache; fp32 or fp16 scales) or FP8 E4M3 cache, the
/// quantized ones read as codes with their scales folded into the scores and the probabilities
/// (chapter 04's QuantizedScales): the result is attention over the cache's dequantized values
/// (KvCache::dequantized()), to fp32 rounding.
void prefill_with_cache_cpu(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths, const KvCache& cache,
                            Tensor<float>& out);

/// cpu/prefill_with_cache over layer @p layer of @p cache (chapter 07's model calls it once per
/// layer). A query's output depends only on its position and the cached values (codes and
/// scales, for a quantized cache), never on the chunking, the rest of the batch or the layout:
/// bit-identical whether it is computed in a prompt chunk of any size or as a decode step (the
/// comment at the top of cpu_prefill_with_cache.cpp says how).
void prefill_with_cache_cpu(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths, const KvCache& cache,
                            int64_t layer, Tensor<float>& out);

}  // namespace inferlab
