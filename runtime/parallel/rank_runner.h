#pragma once
/// @file rank_runner.h
/// Running a model split over ranks (chapter 10) — tensor-parallel shards or pipeline stages:
/// rank 0 schedules, the others follow.
///
///     rank 0:  engine ── StepPlan ──▶ leader runner ──broadcast plan──▶ its part's forward ──▶ logits
///     rank r:                         follow_leader_steps(): receive plan ──▶ its part's forward
///
/// The engine, the scheduler and the sampler run on rank 0 only. Its model runner (the leader,
/// which engine::make_model_runner() builds for a split model on cpu) first sends the others the pool's
/// geometry, then each step's plan (encode_step_plan()), and runs its own part of the forward;
/// every rank's forward meets the others' in the same collectives, in the same order
/// (LlamaModel::forward: a shard's all-reduces, a stage's sends and receives), and each KV pool
/// holds its rank's KV heads (a shard) or layers (a stage) in blocks of the same ids — the
/// block tables are rank 0's and hold for all. end_leader_steps() lets the other ranks return.

#include <memory>

#include "kernels/kv/kv_format.h"
#include "kernels/kv/kv_layout.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_runner.h"

namespace inferlab::parallel {

/// Rank 0's runner of a split @p model (model.shard().split() or model.stage().split(), rank
/// 0), cpu: sends the other ranks the pool's @p shape, @p paging and @p kv_format, then each
/// plan before running its part. engine::make_model_runner() calls it. Throws std::invalid_argument naming "rank" on another
/// rank.
std::unique_ptr<model::ModelRunner> make_leader_runner(const model::LlamaModel& model,
                                                                const KvCacheShape& shape, const KvPaging& paging,
                                                                const KvFormat& kv_format);

/// What ranks 1 … p − 1 of a split @p model run: every pool and plan rank 0's leaders send,
/// each plan through the rank's part of the forward over the rank's own pool, until rank 0 calls
/// end_leader_steps(). Throws std::invalid_argument naming "rank" on rank 0, and what a
/// plan's check throws (the leader checked it first, so only on a broken world).
void follow_leader_steps(const model::LlamaModel& model);

/// Rank 0: tells the ranks in follow_leader_steps() to return (a collective: after the
/// last step of the last runner).
void end_leader_steps(const model::LlamaModel& model);

}  // namespace inferlab::parallel
