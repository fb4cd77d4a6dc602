#pragma once
/// @file cost.h
/// FLOP and byte accounting: the arithmetic every benchmark prints beside its timer.
///
/// Per head, with sequence length L and head dimension d (see chapters/01-naive-cpu-attention):
///  - FLOPs of prefill attention: Q·Kᵀ is 2·L²·d, P·V is 2·L²·d, total 4·L²·d (dense count;
///    a causal mask leaves 2·d·L·(L+1) useful FLOPs).
///  - Bytes under three traffic models, e = bytes per element:
///     - article: read Q, K, V, write the L×L scores once, write O: e·(L² + 4·L·d);
///     - unfused: scores written, read+written by softmax, read by P·V: e·(4·L² + 4·L·d);
///     - fused:   only Q, K, V and O move: e·4·L·d.
///  - Decode (one query, L cached tokens): FLOPs 4·L·d; bytes e·(2·L·d + 2·d) (K and V of every
///    cached token, the query and the output).
/// With grouped-query attention K and V are counted once per KV head.

#include <cstdint>
#include <string_view>

namespace inferlab {

/// FLOPs and bytes of one piece of work, and their ratio.
struct Cost {
  double flops = 0.0;  ///< floating-point operations (a fused multiply-add counts 2)
  double bytes = 0.0;  ///< bytes moved to or from main memory under the stated model
  /// FLOPs per byte; 0 when no bytes move.
  double arithmetic_intensity() const { return bytes > 0.0 ? flops / bytes : 0.0; }
};

/// How the bytes of prefill attention are counted.
enum class TrafficModel {
  article,  ///< the source article's model: the L×L scores written once
  unfused,  ///< a real unfused pipeline: ~4·L² score elements of traffic
  fused,    ///< FlashAttention-style: only Q, K, V and O
};

/// "article", "unfused", "fused".
std::string_view to_string(TrafficModel model);

/// How causal attention's FLOPs are counted.
enum class FlopConvention {
  dense,          ///< 4·L²·d per head whether or not a mask is applied (the usual convention)
  causal_useful,  ///< only the unmasked scores: 2·d·L·(L+1) per head
};

/// The shape of one attention problem (one layer, one sequence).
struct AttentionDims {
  int64_t num_heads = 1;     ///< query heads
  int64_t num_kv_heads = 1;  ///< key/value heads (num_heads is a multiple of it)
  int64_t seq_len = 1;       ///< L
  int64_t head_dim = 1;      ///< d
};

/// FLOPs and bytes of prefill attention over @p dims, @p bytes_per_element bytes per element
/// (4 for fp32, 2 for fp16), under @p model and @p flops convention.
Cost prefill_attention_cost(const AttentionDims& dims, TrafficModel model, double bytes_per_element,
                            FlopConvention flops = FlopConvention::dense);

/// FLOPs and bytes of one decode step: one new query per head attending to @p dims.seq_len
/// cached tokens.
Cost decode_attention_cost(const AttentionDims& dims, double bytes_per_element);

}  // namespace inferlab
