#pragma once
/// @file tensor_parallel.h
/// Megatron-LM's tensor parallelism (Shoeybi et al. 2019) for the Llama model (chapter 10):
/// which rows and columns of every matrix rank r of p holds, and the shard that holds them.
///
///     attention  wq, wk, wv  column-parallel: rank r computes its query heads and their KV heads
///                wo          row-parallel: its heads' columns → a partial sum  ─┐ all-reduce
///     MLP        w1, w3      column-parallel: its slice of the hidden width     │ (two a layer)
///                w2          row-parallel: that slice's columns → a partial sum ─┘
///     embedding  rows of its vocabulary range (other ids look up zeros) → all-reduce
///     head       its vocabulary's logits → all-gather
///
/// GQA (vLLM's QKVParallelLinear rule): with p ≤ n_kv_heads the KV heads are split evenly
/// (n_kv_heads % p == 0); with p > n_kv_heads each rank keeps the one KV head its query heads
/// read, replicated on p / n_kv_heads ranks (p % n_kv_heads == 0). Query heads are always split
/// (n_heads % p == 0), and so is the hidden width (hidden_dim % p == 0). Block formats (Q8_0,
/// Q4_0, Q4_1) are cut between blocks only: the row-parallel matrices' column slices — a rank's
/// query width and its hidden slice — must be multiples of 32. SmolLM2-135M (9 query heads, 3
/// KV heads, hidden 1536) splits over 1 or 3 ranks.
///
/// Every rank keeps the whole residual stream and the norms (a few kilobytes); the KV cache of a
/// rank holds only its KV heads (LlamaModel::kv_shape() of its shard).

#include <cstdint>

#include "runtime/model/llama_weights.h"

namespace inferlab::parallel {

/// What rank @ref rank of @ref ranks holds (see the file comment).
struct TensorSplit {
  int rank = 0;                  ///< this rank
  int ranks = 1;                 ///< p
  int64_t q_head_begin = 0;      ///< the first of its query heads
  int64_t q_heads = 0;           ///< n_heads / p
  int64_t kv_head_begin = 0;     ///< the first of its KV heads
  int64_t kv_heads = 0;          ///< n_kv_heads / p, or 1 when replicated
  int64_t kv_replicas = 1;       ///< ranks holding each KV head: 1 when split, p / n_kv_heads when replicated
  int64_t hidden_begin = 0;      ///< the first of its SwiGLU hidden features
  int64_t hidden = 0;            ///< hidden_dim / p
  int64_t vocab_begin = 0;       ///< the first token id of its vocabulary rows
  int64_t vocab_rows = 0;        ///< its vocabulary rows (the last rank's may be fewer)
  int64_t vocab_stride = 0;      ///< ⌈vocab_size / p⌉
};

/// The split of a model of @p config (the whole model's) for rank @p rank of @p ranks. Throws
/// std::invalid_argument naming "tp" and the rule when @p ranks does not divide the heads or
/// the hidden width (see the file comment), and naming "rank" when it is outside [0, ranks).
TensorSplit tensor_split(const model::LlamaConfig& config, int rank, int ranks);

/// Checks that @p weights (the whole model) can be split over @p ranks: tensor_split()'s rules
/// and, for block-quantized matrices, column slices that are whole blocks. Throws
/// std::invalid_argument naming "tp".
void check_tensor_split(const model::LlamaWeights& weights, int ranks);

/// Rank @p rank's shard of @p weights (the whole model): its rows of wq/wk/wv, w1/w3, the
/// embedding and an untied classifier, its columns of wo and w2 (copied out: the whole model can
/// be dropped afterwards), the norms whole, and a config of its own heads and hidden width
/// (head_dim stated, dim and vocab_size the model's; TensorShard says which vocabulary ids it
/// holds). For @p ranks = 1 the shard is the model. Throws as check_tensor_split().
model::LlamaWeights shard_weights(const model::LlamaWeights& weights, int rank, int ranks);

}  // namespace inferlab::parallel
