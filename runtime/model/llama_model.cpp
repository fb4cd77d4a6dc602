// The Llama forward over one step plan (llama_model.h): the plan is applied to the cache (block
// copies, fresh blocks poisoned, rows mapped), then, per layer, for T tokens:
//   x   = embedding rows of the tokens (widened to fp32)  [T, dim]
//   xn  = rms_norm(x)                              [T, dim]
//   qkv = xn · wqkvᵀ; RoPE on q and k by position  [T, q_dim + 2·kv_dim]  (q_dim = n_heads · head_dim)
//   K, V → the cache at each token's slot          (KvCache::store_slots: rounded or quantized per row)
//   att = prefill_with_cache(q, chunks, cache)     [T, q_dim]  (decode = chunks of 1)
//   x  += att · woᵀ
//   x  += swiglu(rms_norm(x) · w13ᵀ) · w2ᵀ
// then the final norm and the output head on the logit tokens only — the CPU's batch-invariant
// layers (kernels/layers/layers.h) and cpu/prefill_with_cache. Each linear layer reads its Weight
// in the format it is stored in (fp32, fp16, bf16): the bytes a step reads are the weights' real
// bytes (step_cost()). The sim and cuda backends run the same steps on the device, resident:
// model_runner.h, device_runner.cu.
#include "runtime/model/llama_model.h"

#include <algorithm>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/check.h"
#include "common/config.h"
#include "kernels/layers/layers.h"
#include "kernels/paged/prefill_with_cache.h"
#include "runtime/collective/communicator.h"

namespace inferlab::model {

void check_kv_format(const KvFormat& kv_format) {
  require(!kv_format.per_channel(), "kv_format", kv_format.name(),
          "the forward writes K chunk by chunk (store_slots) into blocks shared between sequences, but per-channel K "
          "scales are calibrated on a whole prompt (KvCache::prefill): use per-token INT8 scales (int8, "
          "int8/fp16-scales), fp8, fp16 or fp32");
}

LlamaModel::LlamaModel(LlamaWeights weights, parallel::Communicator* comm) : weights_(std::move(weights)), comm_(comm) {
  const LlamaConfig& c = weights_.config;
  weights_.validate();
  const TensorShard& t = weights_.shard;
  const PipelineStage& p = weights_.stage;
  // A tensor-parallel shard's ranks, or a pipeline stage's (validate(): not both).
  const int rank = t.split() ? t.rank : p.stage, ranks = t.split() ? t.ranks : p.stages;
  const std::string part = t.split() ? "shard" : "pipeline stage";
  if (ranks == 1) {
    require(comm == nullptr || comm->size() == 1, "comm", comm ? comm->size() : 0,
            "the whole model runs on one rank: pass no communicator, or one of size 1");
  } else {
    require(comm != nullptr, "comm", "nullptr",
            "weights split over " + std::to_string(ranks) + " ranks need the ranks' communicator");
    require(comm->size() == ranks && comm->rank() == rank, "comm",
            "rank " + std::to_string(comm->rank()) + " of " + std::to_string(comm->size()),
            "must be the " + part + "'s rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  }
  rope_ = rope_table(c.max_seq_len, c.head_dim(), c.rope_theta);
}

KvCacheShape LlamaModel::kv_shape(int64_t batch, int64_t max_seq_len) const {
  const LlamaConfig& c = config();
  require_positive("batch", batch);
  require(max_seq_len > 0 && max_seq_len <= c.max_seq_len, "max_seq_len", max_seq_len,
          "must be in [1, the model's max_seq_len = " + std::to_string(c.max_seq_len) + "]");
  return {batch, c.n_kv_heads, max_seq_len, c.head_dim(), c.n_layers};
}

void LlamaModel::check(const StepPlan& plan, const KvCacheShape& s, const KvPaging& paging) const {
  const LlamaConfig& c = config();
  require(s.num_layers == c.n_layers && s.num_kv_heads == c.n_kv_heads && s.head_dim == c.head_dim(), "cache shape",
          to_string(s.shape()) + " × " + std::to_string(s.num_layers) + " layers",
          "must hold this model's " + std::to_string(c.n_layers) + " layers of " + std::to_string(c.n_kv_heads) +
              " KV heads × head_dim " + std::to_string(c.head_dim()));
  check_step_plan(plan, s, paging);
  // The messages are built only for a bad entry (this runs every step).
  for (size_t i = 0; i < plan.token_ids.size(); ++i)
    if (plan.token_ids[i] < 0 || plan.token_ids[i] >= c.vocab_size)
      require(false, "token_ids[" + std::to_string(i) + "]", plan.token_ids[i],
              "must be a token id in [0, vocab_size = " + std::to_string(c.vocab_size) + ")");
  for (size_t i = 0; i < plan.context_lens.size(); ++i)
    if (plan.context_lens[i] > c.max_seq_len)
      require(false, "context_lens[" + std::to_string(i) + "]", plan.context_lens[i],
              "exceeds the model's max_seq_len = " + std::to_string(c.max_seq_len));
}

namespace {

// The runner's side of the plan: block copies, fresh blocks poisoned, this step's rows mapped and
// their lengths set (the rows past the plan emptied). Returns each row's query length.
std::vector<int64_t> apply_plan(const StepPlan& plan, KvCache& cache) {
  const int64_t rows = cache.shape().batch, n = plan.num_seqs();
  if (cache.paged()) {
    for (const paged::BlockCopy& copy : plan.block_copies) cache.copy_block(copy.from, copy.to);
    for (const int32_t block : plan.fresh_blocks) cache.poison_block(block);
    for (int64_t r = 0; r < rows; ++r) cache.detach_sequence(r);  // no poisoning: blocks may be shared
    for (int64_t i = 0; i < n; ++i) cache.set_block_table(i, plan.block_tables[size_t(i)]);
  }
  std::vector<int64_t> lengths(size_t(rows), 0), query(size_t(rows), 0);
  for (int64_t i = 0; i < n; ++i) {
    lengths[size_t(i)] = plan.context_lens[size_t(i)];
    query[size_t(i)] = plan.query_len(i);
  }
  cache.set_lengths(lengths);  // chunk_shape() and the rows read below check against them
  return query;
}

}  // namespace

Tensor<float> LlamaModel::forward(const StepPlan& plan, KvCache& cache) const {
  check(plan, cache.shape(), cache.paging());
  return forward_checked(plan, cache);
}

Tensor<float> LlamaModel::forward_checked(const StepPlan& plan, KvCache& cache) const {
  check_kv_format(cache.format());
  if (weights_.stage.split()) return forward_stage(plan, cache);
  const std::vector<int64_t> chunk_lengths = apply_plan(plan, cache);
  Tensor<float> x = embed(plan);
  run_layers(plan, chunk_lengths, cache, x);
  return head(plan, x);
}

Tensor<float> LlamaModel::forward_stage(const StepPlan& plan, KvCache& cache) const {
  const PipelineStage& p = weights_.stage;
  const int64_t dim = config().dim, vocab = config().vocab_size, n = int64_t(plan.logits_indices.size());
  // The last stage gathers the step's logits row by row, micro-batch after micro-batch.
  Tensor<float> logits({p.last() || p.first() ? n : 0, vocab});
  for (const MicroBatch& mb : split_micro_batches(plan, p.micro_batches)) {
    const std::vector<int64_t> chunk_lengths = apply_plan(mb.plan, cache);
    Tensor<float> x({int64_t(mb.plan.token_ids.size()), dim});
    if (p.first())
      x = embed(mb.plan);
    else
      comm_->recv(std::span(x.data(), x.size()), p.stage - 1);  // the previous stage's activations
    run_layers(mb.plan, chunk_lengths, cache, x);
    if (!p.last()) {
      comm_->send(std::span<const float>(x.data(), x.size()), p.stage + 1);
      continue;
    }
    const Tensor<float> rows = head(mb.plan, x);
    for (size_t r = 0; r < mb.logits_rows.size(); ++r)
      std::copy_n(rows.data() + int64_t(r) * vocab, vocab, logits.data() + mb.logits_rows[r] * vocab);
  }
  // The logits go to rank 0 after the last micro-batch: sending them earlier could meet rank 0
  // still sending its next micro-batch, each waiting for the other (MPI's rendezvous sends).
  if (n > 0 && p.last()) comm_->send(std::span<const float>(logits.data(), logits.size()), 0);
  if (n > 0 && p.first()) comm_->recv(std::span(logits.data(), logits.size()), p.stages - 1);
  return logits;
}

Tensor<float> LlamaModel::embed(const StepPlan& plan) const {
  const int64_t T = int64_t(plan.token_ids.size()), dim = config().dim;
  // One row per token; split, each rank holds the rows of its ids only, and the sum over the
  // ranks is the row (every other rank adds zeros).
  const TensorShard& shard = weights_.shard;
  const int64_t vocab_rows = shard.rows(config().vocab_size);
  Tensor<float> x({T, dim});
  x.fill(0.0f);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t row = plan.token_ids[size_t(t)] - shard.vocab_begin;
    if (row >= 0 && row < vocab_rows) weights_.embedding.row_to_f32(row, std::span(x.data() + t * dim, size_t(dim)));
  }
  if (shard.split()) comm_->all_reduce_sum(std::span(x.data(), size_t(T * dim)));
  return x;
}

void LlamaModel::run_layers(const StepPlan& plan, const std::vector<int64_t>& chunk_lengths, KvCache& cache,
                            Tensor<float>& x) const {
  const LlamaConfig& c = config();
  const int64_t T = int64_t(plan.token_ids.size()), dim = c.dim, q_dim = c.q_dim(), kv = c.kv_dim();
  const int64_t d = c.head_dim(), H = c.n_heads, G = c.n_kv_heads, qkv_width = q_dim + 2 * kv;
  const std::vector<int64_t>& positions = plan.positions;
  Tensor<float> xn({T, dim}), qkv({T, qkv_width}), q({T, H, d}), k({T, G, d}), v({T, G, d});
  Tensor<float> att({T, H, d}), proj({T, dim}), gate_up({T, 2 * c.hidden_dim}), hidden({T, c.hidden_dim});
  for (int64_t l = 0; l < c.n_layers; ++l) {  // this model's layers (a pipeline stage's own)
    const LlamaLayerWeights& w = weights_.layers[size_t(l)];
    rms_norm_cpu(x, w.attention_norm, c.norm_eps, xn);
    linear_cpu(xn, w.wqkv, qkv);
    rope_cpu(qkv.data(), T, qkv_width, H, d, positions, rope_, c.rope_style);          // q
    rope_cpu(qkv.data() + q_dim, T, qkv_width, G, d, positions, rope_, c.rope_style);  // k
    for (int64_t t = 0; t < T; ++t) {
      const float* row = qkv.data() + t * qkv_width;
      std::copy_n(row, q_dim, q.data() + t * q_dim);
      std::copy_n(row + q_dim, kv, k.data() + t * kv);
      std::copy_n(row + q_dim + kv, kv, v.data() + t * kv);
    }
    cache.store_slots(k, v, plan.slot_mapping, l);
    att.reshape({T, H, d});
    prefill_with_cache_cpu(q, chunk_lengths, cache, l, att);
    att.reshape({T, q_dim});  // the heads side by side: the output projection's input rows
    linear_cpu(att, w.wo, proj);
    add_reduced(x, proj);  // split: each rank's heads' share of the projection, summed

    rms_norm_cpu(x, w.ffn_norm, c.norm_eps, xn);
    linear_cpu(xn, w.w13, gate_up);
    swiglu_cpu(gate_up, hidden);
    linear_cpu(hidden, w.w2, proj);
    add_reduced(x, proj);  // split: each rank's hidden columns' share, summed
  }
}

Tensor<float> LlamaModel::head(const StepPlan& plan, const Tensor<float>& x) const {
  const LlamaConfig& c = config();
  const int64_t dim = c.dim, n = int64_t(plan.logits_indices.size());
  const TensorShard& shard = weights_.shard;
  const int64_t vocab_rows = shard.rows(c.vocab_size);
  Tensor<float> last({n, dim}), last_norm({n, dim}), logits({n, c.vocab_size});
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(x.data() + plan.logits_indices[size_t(i)] * dim, dim, last.data() + i * dim);
  rms_norm_cpu(last, weights_.final_norm, c.norm_eps, last_norm);
  if (!shard.split()) {
    linear_cpu(last_norm, weights_.output_head(), logits);
    return logits;
  }
  // Split: this rank's vocabulary columns, padded to the stride so that every rank sends as
  // many, gathered ([rank][n][stride]) and laid side by side.
  const int64_t stride = shard.vocab_stride, ranks = shard.ranks;
  Tensor<float> mine({n, vocab_rows}), padded({n, stride}), all({ranks, n, stride});
  linear_cpu(last_norm, weights_.output_head(), mine);
  padded.fill(0.0f);
  for (int64_t i = 0; i < n; ++i) std::copy_n(mine.data() + i * vocab_rows, vocab_rows, padded.data() + i * stride);
  comm_->all_gather(std::span<const float>(padded.data(), size_t(n * stride)), std::span(all.data(), all.size()));
  for (int64_t r = 0; r < ranks; ++r) {
    const int64_t begin = r * stride, count = std::min(stride, c.vocab_size - begin);
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(all.data() + (r * n + i) * stride, count, logits.data() + i * c.vocab_size + begin);
  }
  return logits;
}

void LlamaModel::add_reduced(Tensor<float>& x, Tensor<float>& partial) const {
  if (weights_.shard.split()) comm_->all_reduce_sum(std::span(partial.data(), partial.size()));
  for (int64_t i = 0; i < x.size(); ++i) x[i] += partial[i];
}

Cost LlamaModel::step_cost(const StepPlan& plan) const {
  const LlamaConfig& c = config();
  const double T = double(plan.token_ids.size()), logit_tokens = double(plan.logits_indices.size());
  const double d = double(c.head_dim());
  Cost cost;
  // Every layer's matrices once, whatever T (the linear layer reads each weight tile once for
  // all the rows of a block), in their stored bytes; 2 FLOPs per weight per token.
  for (const LlamaLayerWeights& w : weights_.layers)
    for (const Weight* m : {&w.wqkv, &w.wo, &w.w13, &w.w2}) {
      cost.flops += 2.0 * T * double(m->out_features()) * double(m->in_features());
      cost.bytes += double(m->bytes());
    }
  cost.bytes += 4.0 * 2.0 * double(c.n_layers * c.dim);      // the attention and MLP norms (fp32)
  if (weights_.stage.first()) cost.bytes += T * double(weights_.embedding.row_bytes());  // a row per token
  if (logit_tokens > 0 && weights_.stage.last()) {  // the final norm and the whole head, for the logit tokens only
    const Weight& head = weights_.output_head();
    cost.flops += 2.0 * logit_tokens * double(head.out_features()) * double(head.in_features());
    cost.bytes += double(head.bytes()) + 4.0 * double(c.dim);
  }
  for (int64_t i = 0; i < plan.num_seqs(); ++i) {
    const double n = double(plan.query_len(i)), L = double(plan.context_lens[size_t(i)]);
    if (n == 0) continue;
    const double visible = n * (L - n) + n * (n + 1) / 2;  // keys seen by the chunk's queries
    cost.flops += 4.0 * d * visible * double(c.n_heads) * double(c.n_layers);
    cost.bytes += 2.0 * 4.0 * L * double(c.kv_dim()) * double(c.n_layers);  // K and V rows once
  }
  return cost;
}

}  // namespace inferlab::model
