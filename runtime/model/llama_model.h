#pragma once
/// @file llama_model.h
/// A Llama-architecture forward over a *flattened token batch* (chapter 07): one call serves a
/// mixed batch in which some sequences bring a prompt chunk and others one decode token, as
/// vLLM runs it. Every layer but attention treats the batch as rows of tokens (kernels/layers);
/// attention is chapter 06's prefill-with-cache, whose chunks of length 1 are decode steps; the
/// K and V of every layer live in one KvCache — paged (chapter 06's pool, the engine's) or
/// contiguous (the single-request reference). A token's result is bit-identical whatever else
/// is in the batch and however its sequence was cut into chunks: every kernel it goes through is
/// batch-invariant (layers.h, cpu_prefill_with_cache.cpp).

#include <cstdint>
#include <vector>

#include "common/backend.h"
#include "common/cost.h"
#include "common/tensor.h"
#include "kernels/kv/kv_cache.h"
#include "runtime/model/llama_weights.h"

namespace inferlab::model {

/// One forward call's tokens and where they go.
struct ForwardBatch {
  /// Token ids, flattened: the chunks of the cache's sequences (rows) one after another, in
  /// increasing row order.
  std::vector<int32_t> tokens;
  /// Per cache row (size = the cache's batch): how many of @ref tokens belong to it (0: not in
  /// this call, 1: a decode step). They sum to tokens.size().
  std::vector<int64_t> chunk_lengths;
  /// Per cache row: the tokens its sequence has in the cache *after* this call (the chunk is the
  /// last chunk_lengths[b] of them, so token i of the chunk sits at position lengths[b] −
  /// chunk_lengths[b] + i). A row not in this call keeps its length (its rows stay visible);
  /// a row that holds no sequence has 0.
  std::vector<int64_t> lengths;
  /// Per token: the cache slot where its K and V go (KvCache::slot()).
  std::vector<int64_t> slots;
  /// Indices into @ref tokens whose logits are wanted (a chunk's last token when the sequence
  /// samples next), in the order the logits rows come out.
  std::vector<int64_t> logit_tokens;
};

/// The model: weights plus the RoPE table, and the forward.
class LlamaModel {
 public:
  /// Takes the weights (their config is validated).
  explicit LlamaModel(LlamaWeights weights);

  /// The model's shape.
  const LlamaConfig& config() const { return weights_.config; }
  /// The weights.
  const LlamaWeights& weights() const { return weights_; }

  /// The KV cache shape for @p batch sequences of up to @p max_seq_len tokens (≤ the model's).
  KvCacheShape kv_shape(int64_t batch, int64_t max_seq_len) const;

  /// Runs @p batch through the model: sets the cache's lengths, writes each token's K and V (all
  /// layers) at its slot, and returns the logits of the tokens in batch.logit_tokens as
  /// [logit_tokens.size(), vocab_size]. The cache's block tables must map every position up to
  /// the new lengths (the engine's job). Throws std::invalid_argument naming a bad field: sizes
  /// that disagree, a token id outside the vocabulary, a position past max_seq_len, a cache of
  /// another shape.
  ///
  /// @p backend picks the layer functions, not the structure (one forward for all): cpu runs
  /// layers.h's batch-invariant CPU layers and cpu/prefill_with_cache; sim and cuda run their
  /// CUDA twins — linear_cuda (cuBLAS), rms_norm_cuda, rope_cuda, swiglu_cuda
  /// (kernels/layers/cuda_layers.h), kv_write_slots_cuda and prefill_with_cache_layer_cuda — each
  /// with host tensors in and out (the residual adds and the q/k/v split stay on the host). The
  /// device forward sums in other orders: its logits match the cpu's to fp32 rounding, not bit
  /// for bit, and it is not batch-invariant (cuBLAS may choose its GEMM by the sizes). Throws
  /// std::invalid_argument when @p backend is unavailable here (require_available) and
  /// std::logic_error for a cache format the device kernels do not handle (fp32 and fp16 do).
  Tensor<float> forward(const ForwardBatch& batch, KvCache& cache, Backend backend = Backend::cpu) const;

  /// FLOPs and bytes of one forward over @p batch (without running it): every weight matrix once
  /// (fp32), the GEMMs' 2·tokens·parameters FLOPs, attention's 4·head_dim FLOPs per (query head,
  /// visible key) and its K/V rows read once per sequence (fp32 cache), the output head only for
  /// the logit tokens. Activations are not counted (they stay in cache at these sizes).
  Cost step_cost(const ForwardBatch& batch) const;

 private:
  void check(const ForwardBatch& batch, const KvCache& cache) const;
  LlamaWeights weights_;
  std::vector<float> rope_;  // [max_seq_len][head_dim / 2][cos, sin]
};

}  // namespace inferlab::model
