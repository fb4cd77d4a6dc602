// Layers in stages, steps in micro-batches (pipeline_parallel.h).
#include "runtime/parallel/pipeline_parallel.h"

#include <algorithm>
#include <string>

#include "common/check.h"

namespace inferlab::parallel {

using model::LlamaWeights;

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

double pipeline_bubble(int stages, int micro_batches) {
  require(stages >= 1, "stages", stages, "must be at least 1");
  require(micro_batches >= 1, "micro_batches", micro_batches, "must be at least 1");
  return double(stages - 1) / double(micro_batches + stages - 1);
}

}  // namespace inferlab::parallel
