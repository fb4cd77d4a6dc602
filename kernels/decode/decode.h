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
/// (kernels/kv/kv_cache.h; quantized formats are dequantized, x̂ = scale · code). Layouts
/// (row-major): q and out are [batch, num_heads, head_dim]; the cache's rows are where its
/// layout puts them (kv_layout.h: [batch][num_kv_heads][max_seq_len][head_dim] when
/// contiguous). Decoding token t of a sequence gives row t of the chapter-02 causal prefill over
/// its first t+1 tokens.
///
/// Cost of one step (common/cost.h, per sequence with L = lengths[b]): 4·L·d FLOPs per query
/// head; K and V of every cached token are read once per KV head: e·(2·L·d·num_kv_heads +
/// 2·d·num_heads) bytes. Arithmetic intensity ≈ 1 FLOP/byte for an fp16 cache (× group_size
/// with GQA): decode is memory-bound everywhere.

#include <cstdint>
#include <vector>

#include "common/cost.h"
#include "common/tensor.h"
#include "kernels/kv/kv_cache.h"

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

/// Checks that @p out is [batch, num_heads, head_dim] (versions write into a caller-allocated
/// output).
void check_decode_output(const Tensor<float>& out, const DecodeShape& shape);

/// FLOPs and bytes of one decode step over the ragged batch of @p cache for @p num_heads query
/// heads. FLOPs: 4·L·d per query head (L = lengths[b]). Bytes, fp32/fp16: the sum over
/// sequences of decode_attention_cost() (K, V, q and out in the cache's element type).
/// Quantized (INT8, FP8): per sequence with L > 0, 2·num_kv_heads·L·d bytes of codes, their
/// scales (V and per-token K: one per row; per-channel K: head_dim per KV head; 4 or 2 bytes
/// each) and q and out in fp32.
Cost decode_step_cost(const KvCache& cache, int64_t num_heads);

/// The float64 oracle of one decode step: the definition above in double precision (max
/// subtracted before exp) over the cache's stored values (fp16 converted exactly, codes
/// dequantized: what an exact decode of this cache computes; the quantization error itself is
/// measured against the oracle over the unquantized data). It reads only the first
/// lengths[b] tokens of each sequence.
Tensor<double> decode_reference(const Tensor<float>& q, const KvCache& cache);

/// cpu/decode — chapter 03: the definition as three loops per (sequence, head): L scores,
/// softmax (max subtracted), then the weighted sum of V rows. fp32 arithmetic; an fp16 cache
/// is converted element by element. fp32 or fp16 cache (std::logic_error otherwise).
void decode_cpu_naive(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out);

/// cpu/decode_simd — chapter 03: OpenMP over (sequence, KV head); the group's query heads are
/// processed together so that every K and V row is read from memory once per step (the
/// cache is streamed once); vector dot products, vector exp and vector FMAs (AVX-512 / AVX2 /
/// scalar, cpu_simd.h; fp16 rows converted with F16C). fp32 arithmetic. fp32 or fp16 cache.
void decode_cpu_simd(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out);

/// cpu/decode_int8_simd — chapter 04: cpu/decode_simd's structure (OpenMP over (sequence, KV
/// head), 4 keys per step) reading int8 rows: 16 (AVX-512) or 8 (AVX2) bytes widened to floats
/// per load, the next rows prefetched, the scales (fp32 or fp16) folded in (per-token K: into
/// the score; per-channel K: into the query; V: into the probability). INT8 cache.
void decode_int8_cpu_simd(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out);

}  // namespace inferlab
