#pragma once
/// @file attention.h
/// Prefill attention — the contract every version implements.
///
/// Layout (row-major): Q and O are [num_heads, seq_len, head_dim]; K and V are
/// [num_kv_heads, seq_len, head_dim]. Query head h reads KV head h / (num_heads / num_kv_heads)
/// (grouped-query attention; num_kv_heads = num_heads is ordinary multi-head attention).
///
///     O_h = softmax(Q_h · K_gᵀ / √head_dim  [+ causal mask]) · V_g,   g = h / group_size
///
/// With the causal mask, query i attends to keys 0..i only.

#include <cstdint>

#include "common/cost.h"
#include "common/tensor.h"

namespace inferlab {

/// The sizes of one prefill attention problem, read off (and checked against) its tensors.
struct AttentionShape {
  int64_t num_heads = 0;     ///< query heads
  int64_t num_kv_heads = 0;  ///< key/value heads; divides num_heads
  int64_t seq_len = 0;       ///< tokens L
  int64_t head_dim = 0;      ///< d
  bool causal = false;       ///< whether query i sees only keys 0..i

  /// Query heads per KV head.
  int64_t group_size() const { return num_heads / num_kv_heads; }
  /// The same sizes for cost accounting.
  AttentionDims dims() const { return {num_heads, num_kv_heads, seq_len, head_dim}; }
};

/// Checks @p q, @p k, @p v and returns their shape. Throws std::invalid_argument naming the
/// offending tensor when a rank is not 3, a size is zero, K and V differ, Q's seq_len/head_dim
/// differ from K's, or num_heads is not a multiple of num_kv_heads.
AttentionShape attention_shape(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal);

/// Checks that @p out has Q's shape (versions write into a caller-allocated output).
void check_attention_output(const Tensor<float>& out, const AttentionShape& shape);

/// The float64 oracle: the definition above computed in double precision, with the max
/// subtracted before exp. Every test compares with it.
Tensor<double> attention_reference(const Tensor<double>& q, const Tensor<double>& k, const Tensor<double>& v,
                                   bool causal);

/// attention_reference() of float inputs (converted exactly to double).
Tensor<double> attention_reference(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                   bool causal);

/// cpu/naive — chapter 01: for each head, materialise the L×L score matrix S = Q·Kᵀ/√d,
/// apply the mask, softmax each row (subtracting its max), then O = P·V; fp32 throughout.
/// FLOPs 4·L²·d per head; the score matrix costs L² floats of memory per head.
void attention_cpu_naive(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                         Tensor<float>& out);

/// cpu/blocked — chapter 02: the same unfused computation, cache-blocked, vectorised (AVX-512,
/// AVX2 or scalar, picked at compile time) and parallel over (head, block of query rows) with
/// OpenMP. A block's scores are materialised in full (in L2), softmaxed, then multiplied by V.
/// Register-tiled micro-kernels do both products; with the causal mask, key blocks wholly above
/// the diagonal are skipped. fp32 throughout. Any seq_len and head_dim; GQA.
void attention_cpu_blocked(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                           Tensor<float>& out);

/// cpu/openblas — chapter 02: the unfused baseline a CPU user would write. Per KV head, S = Q·Kᵀ
/// for the whole GQA group as one OpenBLAS sgemm (the G·L × L scores in memory), a row softmax,
/// then O = P·V as a second sgemm. The GEMM computes masked scores too (then zeroed), so the
/// causal mask saves no time. fp32 throughout.
void attention_cpu_openblas(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                            Tensor<float>& out);

}  // namespace inferlab
