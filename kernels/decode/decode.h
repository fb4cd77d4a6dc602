#pragma once
/// @file decode.h
/// Decode attention — the contract every version implements (chapter 03).
///
/// One decode step: each sequence b of the batch has one new query token per head, and it
/// attends to every token its KV cache holds (lengths[b] of them, the new token's K and V
/// already appended, so no mask is needed beyond the length):
///
///     out[b][h] = softmax(q[b][h] · K[b][g]ᵀ / √head_dim) · V[b][g],   g = h / group_size
///
/// where K[b][g] and V[b][g] are the first lengths[b] rows of KV head g of sequence b
/// (kv_cache.h). Layouts (row-major): q and out are [batch, num_heads, head_dim]; the cache is
/// [batch][num_kv_heads][max_seq_len][head_dim]. Decoding token t of a sequence gives row t of
/// the chapter-02 causal prefill over its first t+1 tokens.
///
/// Cost of one step (common/cost.h, per sequence with L = lengths[b]): 4·L·d FLOPs per query
/// head; K and V of every cached token are read once per KV head: e·(2·L·d·num_kv_heads +
/// 2·d·num_heads) bytes. Arithmetic intensity ≈ 1 FLOP/byte for an fp16 cache (× group_size
/// with GQA): decode is memory-bound everywhere.

#include <cstdint>
#include <vector>

#include "common/cost.h"
#include "common/tensor.h"
#include "kernels/decode/kv_cache.h"

namespace inferlab {

/// The sizes of one decode step, read off (and checked against) the query and the cache.
struct DecodeShape {
  int64_t batch = 0;         ///< sequences
  int64_t num_heads = 0;     ///< query heads
  int64_t num_kv_heads = 0;  ///< key/value heads; divides num_heads
  int64_t max_seq_len = 0;   ///< the cache's capacity per sequence
  int64_t head_dim = 0;      ///< d

  /// Query heads per KV head.
  int64_t group_size() const { return num_heads / num_kv_heads; }
  /// The shape of q and of out: {batch, num_heads, head_dim}.
  Shape query_shape() const { return {batch, num_heads, head_dim}; }
};

/// Checks @p q against @p cache and returns the shape. Throws std::invalid_argument naming
/// the offending argument when q is not [batch, num_heads, head_dim] with the cache's batch
/// and head_dim, num_heads is not a multiple of num_kv_heads, or a sequence is empty
/// ("lengths[b] = 0": decode needs the new token appended first).
DecodeShape decode_shape(const Tensor<float>& q, const KvCache& cache);

/// The check behind every decode_shape() overload (this cache's, and chapter 04's quantized
/// caches'): @p q against a cache of sizes @p cache whose sequences hold @p lengths tokens.
DecodeShape decode_shape(const Tensor<float>& q, const KvCacheShape& cache, const std::vector<int32_t>& lengths);

/// Checks that @p out is [batch, num_heads, head_dim] (versions write into a caller-allocated
/// output).
void check_decode_output(const Tensor<float>& out, const DecodeShape& shape);

/// FLOPs and bytes of one decode step over the ragged batch of @p cache (the sum over
/// sequences of decode_attention_cost() with seq_len = lengths[b], elements of the cache's
/// dtype) for @p num_heads query heads.
Cost decode_step_cost(const KvCache& cache, int64_t num_heads);

/// The float64 oracle of one decode step: the definition above in double precision (max
/// subtracted before exp) over the cache's stored values (fp16 converted exactly). It reads
/// only the first lengths[b] tokens of each sequence.
Tensor<double> decode_reference(const Tensor<float>& q, const KvCache& cache);

/// cpu/decode — chapter 03: the definition as three loops per (sequence, head): L scores,
/// softmax (max subtracted), then the weighted sum of V rows. fp32 arithmetic; an fp16 cache
/// is converted element by element.
void decode_cpu_naive(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out);

/// cpu/decode_simd — chapter 03: OpenMP over (sequence, KV head); the group's query heads are
/// processed together so that every K and V row is read from memory once per step (the
/// cache is streamed once); vector dot products, vector exp and vector FMAs (AVX-512 / AVX2 /
/// scalar, cpu_simd.h; fp16 rows converted with F16C). fp32 arithmetic.
void decode_cpu_simd(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out);

}  // namespace inferlab
