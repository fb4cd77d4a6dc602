#pragma once
/// @file llama_model.h
/// A Llama-architecture forward over a *flattened token batch* (chapter 07) — what the engine's
/// cpu model runner (model_runner.h) calls: one call runs one StepPlan (step_plan.h), a mixed
/// batch in which some sequences bring a prompt chunk and others one decode token, as vLLM runs
/// it. Every layer but attention treats the batch as rows of tokens (kernels/layers); attention
/// is chapter 06's prefill-with-cache, whose chunks of length 1 are decode steps; the K and V of
/// every layer live in one KvCache — paged (chapter 06's pool, the engine's) or contiguous (the
/// single-request reference). A token's result is bit-identical whatever else is in the batch and however its
/// sequence was cut into chunks: every kernel it goes through is batch-invariant (layers.h,
/// cpu_prefill_with_cache.cpp).
///
/// The KV cache may be in any format the attention reads (kv_format.h): fp32, fp16, INT8 with
/// per-token K scales (fp32 or fp16 scales) or FP8 E4M3 — each token's K and V rows quantized on
/// their own as they are written (store_slots), so the invariance above holds for them too, and
/// the logits are those of attention over the dequantized rows. Not INT8 with per-channel K
/// scales: check_kv_format() says why.
///
/// The shape comes from the config (llama_config.h): the query width q_dim = n_heads · head_dim,
/// which need not equal dim, and the RoPE style and θ. The weights are typed (llama_weights.h:
/// fp32, fp16 or bf16 matrices): the CPU linear layer reads each in its own format, and
/// step_cost() counts the bytes they really take.

#include <cstdint>
#include <vector>

#include "common/cost.h"
#include "common/tensor.h"
#include "kernels/kv/kv_cache.h"
#include "runtime/model/llama_weights.h"
#include "runtime/model/step_plan.h"

namespace inferlab::parallel {
class Communicator;
}

namespace inferlab::model {

/// Checks that the forward can run over a KV cache of @p kv_format: every format but INT8 with
/// per-channel K scales (KeyScaling::per_channel). Those scales are one per channel of a
/// sequence's K, calibrated on its whole prompt (KvCache::prefill) before any token is stored;
/// the forward writes K chunk by chunk (store_slots), so a chunked prompt's first chunk would fix
/// them without seeing the rest (the chunk's first token calibrates them, the later ones clamp),
/// a token's codes would depend on how its prompt was chunked or recomputed (breaking batch
/// invariance), and the engine's paged pool shares blocks between sequences, whose rows must
/// each carry their own scale (KvCache refuses per-channel scales on a paged cache). Throws
/// std::invalid_argument naming "kv_format" and the format otherwise. The model runners and
/// the engine's config (EngineConfig::validate) check with it too.
void check_kv_format(const KvFormat& kv_format);

/// The model: weights plus the RoPE table, and the forward.
class LlamaModel {
 public:
  /// Takes the weights (their config is validated). Weights that are one rank's shard of a
  /// split model (weights.shard.split(): runtime/parallel/tensor_parallel.h) need @p comm, the
  /// communicator of the ranks holding the other shards, whose rank and size must be the
  /// shard's; the whole model needs none. Throws std::invalid_argument naming "comm" otherwise.
  explicit LlamaModel(LlamaWeights weights, parallel::Communicator* comm = nullptr);

  /// The model's shape.
  const LlamaConfig& config() const { return weights_.config; }
  /// The weights.
  const LlamaWeights& weights() const { return weights_; }
  /// The part of the model this is (TensorShard: the whole model unless split over ranks).
  const TensorShard& shard() const { return weights_.shard; }
  /// The layers this is (PipelineStage: all of them unless split into pipeline stages).
  const PipelineStage& stage() const { return weights_.stage; }
  /// The ranks' communicator of a split model; nullptr for the whole model.
  parallel::Communicator* communicator() const { return comm_; }

  /// The KV cache shape for @p batch sequences of up to @p max_seq_len tokens (≤ the model's).
  KvCacheShape kv_shape(int64_t batch, int64_t max_seq_len) const;

  /// Runs @p plan through the model, the runner's whole job: applies the plan to the cache — the
  /// block copies, then poisoning the fresh blocks, then row i mapped to block_tables[i] with
  /// length context_lens[i] (rows past the plan's sequences emptied, without poisoning: their
  /// blocks may be shared or cached) — writes each token's K and V (all layers) at its slot, and
  /// returns the logits of the tokens in plan.logits_indices as [logits_indices.size(),
  /// vocab_size]. Throws std::invalid_argument, before changing anything, naming a bad field:
  /// a plan that is not well formed for @p cache (check_step_plan()), a token id outside the
  /// vocabulary, a context past the model's max_seq_len, a cache of another shape, a cache
  /// format the forward cannot write chunk by chunk (check_kv_format(): INT8 per-channel).
  ///
  /// This is the CPU forward: layers.h's batch-invariant layers and cpu/prefill_with_cache, so a
  /// token's logits are bit-identical whatever else is in the batch — for every cache format it
  /// accepts (fp32, fp16, INT8 per-token, FP8). The sim and cuda backends
  /// run plans through the resident model runner instead (model_runner.h).
  ///
  /// A shard of a split model (Megatron's tensor parallelism, chapter 10) runs the same steps
  /// on its own heads, hidden columns and vocabulary rows, and every rank calls forward() with
  /// the same plan: the embedding looks up only the ids of its rows (zeros for the others) and
  /// is summed over the ranks; the attention output and the down projection — row-parallel:
  /// each rank holds a slice of their input columns — are summed over the ranks before the
  /// residual add (two all-reduces a layer); the output head gives each rank its vocabulary's
  /// logits, gathered so that every rank returns the whole [logits_indices.size(), vocab_size].
  /// The sums of the split layers are taken in another order than one rank's: the logits equal
  /// the whole model's to fp32 rounding, not bit for bit.
  ///
  /// A pipeline stage (weights.stage.split(): runtime/parallel/pipeline_parallel.h) runs its
  /// own layers over a cache of its own layers, and every stage calls forward() with the same
  /// plan: a paged plan is cut into micro-batches (split_micro_batches(); a contiguous one runs
  /// whole, its rows being fixed), each embedded on the first
  /// stage or received from the stage before, run through the stage's layers and sent to the
  /// next; the last stage computes each micro-batch's logits and sends the step's to rank 0.
  /// Rank 0 and the last stage return the logits; a middle stage returns [0, vocab_size]. The
  /// forward is invariant to how a step is cut: the logits equal the whole model's bit for bit.
  Tensor<float> forward(const StepPlan& plan, KvCache& cache) const;

  /// forward() without its check, for a plan that check() has already accepted for @p cache's
  /// shape and paging — a ModelRunner checks every plan once, at its boundary (ModelRunner::run),
  /// so no step's plan is checked twice.
  Tensor<float> forward_checked(const StepPlan& plan, KvCache& cache) const;

  /// FLOPs and bytes of one forward over @p plan (without running it): every layer's weight
  /// matrices once in their stored bytes (Weight::bytes(): 4, 2 … bytes a weight) and the norms
  /// (fp32), one embedding row per token (Weight::row_bytes()), the final norm and the whole
  /// output head only when some token wants logits; the GEMMs' 2 FLOPs per weight per token (the
  /// head's for the logit tokens only); attention's 4·head_dim FLOPs per (query head, visible
  /// key) and its K/V rows read once per sequence (fp32 cache). Activations are not counted
  /// (they stay in cache at these sizes). On a pipeline stage: its own layers, with the
  /// weights counted once a step — a step cut into m micro-batches reads them m times (the
  /// lesson of chapter 10's batched decode), which this count leaves out.
  Cost step_cost(const StepPlan& plan) const;

  /// Checks @p plan for a KV cache of @p shape and @p paging (what forward() checks first, and a
  /// device-resident runner before its step): the cache holds this model's layers, KV heads and
  /// head_dim; check_step_plan(); every token id in the vocabulary; no context past the model's
  /// max_seq_len. Throws std::invalid_argument naming the first bad field.
  void check(const StepPlan& plan, const KvCacheShape& shape, const KvPaging& paging) const;

  /// The RoPE (cos, sin) table, [max_seq_len][head_dim / 2][2] (rope_table()).
  const std::vector<float>& rope_cos_sin() const { return rope_; }

 private:
  // forward() of a pipeline stage, the plan checked: its micro-batches through its layers.
  Tensor<float> forward_stage(const StepPlan& plan, KvCache& cache) const;
  // The embedding rows of the plan's tokens, [T, dim] (summed over a tensor-parallel shard's ranks).
  Tensor<float> embed(const StepPlan& plan) const;
  // This model's layers over x [T, dim], in place; the plan already applied to @p cache.
  void run_layers(const StepPlan& plan, const std::vector<int64_t>& chunk_lengths, KvCache& cache,
                  Tensor<float>& x) const;
  // The final norm and the output head on the plan's logit tokens of x: [logits, vocab_size].
  Tensor<float> head(const StepPlan& plan, const Tensor<float>& x) const;
  // x[T, dim] += what every rank's @p partial sums to (the partial itself when not split).
  void add_reduced(Tensor<float>& x, Tensor<float>& partial) const;

  LlamaWeights weights_;
  parallel::Communicator* comm_ = nullptr;  // a split model's ranks; nullptr when whole
  std::vector<float> rope_;                 // [max_seq_len][head_dim / 2][cos, sin]
};

}  // namespace inferlab::model
