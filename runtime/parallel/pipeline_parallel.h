#pragma once
/// @file pipeline_parallel.h
/// Pipeline parallelism for the Llama model (chapter 10): the layers cut into stages, one stage a
/// rank, and each step cut into micro-batches that flow through the stages one after another
/// (GPipe, Huang et al. 2019, forward only):
///
///     stage 0 (rank 0): embed, layers [0, L/p)        ──x [T_j, dim]──▶
///     stage 1 (rank 1): layers [L/p, 2L/p)            ──x [T_j, dim]──▶ …
///     stage p − 1:      layers [.., L), final norm, head ──logits──▶ rank 0 (after the last micro-batch)
///
///     time ─▶        stage 0: | mb0 | mb1 | mb2 | mb3 |  idle   |
///                    stage 1:       | mb0 | mb1 | mb2 | mb3 |
///                                                    └─ (p − 1) slots of the step's m + p − 1 idle on every stage
///
/// With m micro-batches of equal cost each stage is idle (p − 1) of the step's (m + p − 1) slots:
/// the bubble, pipeline_bubble(). A stage boundary sends one [T_j, dim] fp32 activation a
/// micro-batch — dim · 4 bytes a token, once per boundary, against tensor parallelism's two
/// all-reduces a layer.
///
/// A step's tokens are cut into micro-batches by position in the packed plan
/// (model::split_micro_batches(), step_plan.h): a decode batch's sequences go to different micro-batches, and a long
/// prompt's chunk is cut into shorter chunks — the forward is invariant to how a prompt is
/// chunked (llama_model.h), so a pipelined step's logits equal the whole model's bit for bit.
/// Successive steps do not overlap: the engine samples step n's tokens before it plans step n + 1,
/// so the pipe drains at the end of every step.

#include <cstdint>
#include <vector>

#include "runtime/model/llama_weights.h"

namespace inferlab::parallel {

/// The layers stage @p stage of @p stages holds: [layer_begin, layer_begin + layers).
struct PipelineSplit {
  int64_t layer_begin = 0;  ///< the model's index of the stage's first layer
  int64_t layers = 0;       ///< how many: n_layers / stages, one more on the first n_layers % stages stages
};

/// The split of a model of @p config's n_layers (the whole model's) for @p stage of @p stages.
/// Throws std::invalid_argument naming "pp" when @p stages is not in [1, n_layers], and
/// naming "stage" when @p stage is outside [0, stages).
PipelineSplit pipeline_split(const model::LlamaConfig& config, int stage, int stages);

/// Stage @p stage's weights of @p weights (the whole model): its layers (copied out, as owned
/// matrices: the whole model — a memory-mapped file's views among them — can be dropped), the embedding
/// on the first stage and on the last when the head is tied, the final norm and the head on the
/// last, a config of its own n_layers, and PipelineStage saying which (with @p micro_batches).
/// For @p stages = 1 the stage is the model. Throws as pipeline_split(), naming
/// "micro_batches" when it is below 1, and naming "weights" for a tensor-parallel shard.
model::LlamaWeights stage_weights(const model::LlamaWeights& weights, int stage, int stages, int micro_batches = 1);

/// GPipe's bubble: the idle fraction (p − 1) / (m + p − 1) of each of @p stages stages when a
/// step is cut into @p micro_batches micro-batches of equal cost. Throws std::invalid_argument
/// naming the argument below 1.
double pipeline_bubble(int stages, int micro_batches);

}  // namespace inferlab::parallel
