// Layers in stages, steps in micro-batches (pipeline_parallel.h).
#include "runtime/parallel/pipeline_parallel.h"

#include <algorithm>
#include <string>

#include "common/check.h"

namespace inferlab::parallel {

using model::LlamaWeights;
using model::StepPlan;

PipelineSplit pipeline_split(const model::LlamaConfig& config, int stage, int stages) {
  require(stages >= 1 && stages <= config.n_layers, "pp", stages,
          "must be in [1, n_layers = " + std::to_string(config.n_layers) + "]: a stage holds at least one layer");
  require(stage >= 0 && stage < stages, "stage", stage, "must be in [0, stages = " + std::to_string(stages) + ")");
  const int64_t base = config.n_layers / stages, extra = config.n_layers % stages;
  // The first `extra` stages hold base + 1 layers, the others base.
  return {stage * base + std::min<int64_t>(stage, extra), base + (stage < extra ? 1 : 0)};
}

namespace {

// An owned copy of @p w: a block-format matrix may be a view of the whole model's memory-mapped
// file, which the copy must not keep alive (a stage holds its own bytes only).
Weight owned(const Weight& w) {
  const std::pair<int64_t, int64_t> all_rows[] = {{0, w.out_features()}};
  return w.empty() ? w : w.take_rows(all_rows);
}

}  // namespace

LlamaWeights stage_weights(const LlamaWeights& weights, int stage, int stages, int micro_batches) {
  require(!weights.shard.split() && !weights.stage.split(), "weights", "a part of a split model",
          "must be the whole model to cut into pipeline stages");
  require(micro_batches >= 1, "micro_batches", micro_batches, "must be at least 1");
  const PipelineSplit split = pipeline_split(weights.config, stage, stages);
  LlamaWeights s;
  s.config = weights.config;
  s.config.n_layers = split.layers;
  s.shard = weights.shard;
  s.stage = {stage, stages, split.layer_begin, micro_batches};
  for (int64_t l = split.layer_begin; l < split.layer_begin + split.layers; ++l) {
    const model::LlamaLayerWeights& w = weights.layers[size_t(l)];
    s.layers.push_back({w.attention_norm, owned(w.wqkv), owned(w.wo), w.ffn_norm, owned(w.w13), owned(w.w2)});
  }
  if (s.stage.first() || (s.stage.last() && weights.config.shared_classifier)) s.embedding = owned(weights.embedding);
  if (s.stage.last()) {
    s.final_norm = weights.final_norm;
    s.classifier = owned(weights.classifier);
  }
  s.validate();
  return s;
}

std::vector<MicroBatch> split_micro_batches(const StepPlan& plan, int micro_batches) {
  require(micro_batches >= 1, "micro_batches", micro_batches, "must be at least 1");
  const int64_t tokens = int64_t(plan.token_ids.size());
  const int64_t m = std::min<int64_t>(micro_batches, tokens);
  if (m <= 1 || plan.block_tables.empty()) {  // one micro-batch: the plan itself
    MicroBatch whole{plan, {}};
    for (size_t r = 0; r < plan.logits_indices.size(); ++r) whole.logits_rows.push_back(int64_t(r));
    return {whole};
  }
  std::vector<MicroBatch> out(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    const int64_t lo = j * tokens / m, hi = (j + 1) * tokens / m;  // this slice of the packed tokens
    MicroBatch& mb = out[size_t(j)];
    for (int64_t i = 0; i < plan.num_seqs(); ++i) {
      const int64_t a = plan.cu_seqlens_q[size_t(i)], b = plan.cu_seqlens_q[size_t(i) + 1];
      const int64_t s = std::max(a, lo), e = std::min(b, hi);
      if (s >= e) continue;
      // The sequence's tokens [s, e): its context ends at e (its tokens after e come later).
      const int64_t context = plan.context_lens[size_t(i)] - (b - e);
      mb.plan.add_sequence(std::span(plan.token_ids).subspan(size_t(s), size_t(e - s)),
                           std::span(plan.slot_mapping).subspan(size_t(s), size_t(e - s)), context,
                           plan.block_tables[size_t(i)], false);
      const int64_t local = int64_t(mb.plan.token_ids.size()) - (e - s);  // the slice's first token here
      for (size_t r = 0; r < plan.logits_indices.size(); ++r) {
        const int64_t t = plan.logits_indices[r];
        if (t >= s && t < e) {
          mb.plan.logits_indices.push_back(local + (t - s));
          mb.logits_rows.push_back(int64_t(r));
        }
      }
    }
  }
  out[0].plan.block_copies = plan.block_copies;
  out[0].plan.fresh_blocks = plan.fresh_blocks;
  return out;
}

double pipeline_bubble(int stages, int micro_batches) {
  require(stages >= 1, "stages", stages, "must be at least 1");
  require(micro_batches >= 1, "micro_batches", micro_batches, "must be at least 1");
  return double(stages - 1) / double(micro_batches + stages - 1);
}

}  // namespace inferlab::parallel
