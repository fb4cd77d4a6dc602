#pragma once
/// @file make_model_runner.h
/// The one way to make a model runner (model_runner.h): the runner for a model on a backend, with
/// its KV pool's geometry and format checked. It picks among the three kinds, each built in the
/// folder that knows it — the cpu runner (runtime/model/model_runner.h: make_cpu_runner()), the
/// resident sim and cuda runners (runtime/model/device_runner.h) and, for a model split over
/// ranks, rank 0's leader runner (runtime/parallel/rank_runner.h) — so it lives above both
/// model/ and parallel/ (the runtime's folder order, kernels/README.md), beside the engine that
/// calls it.

#include <cstdint>
#include <memory>

#include "common/backend.h"
#include "kernels/kv/kv_format.h"
#include "kernels/kv/kv_layout.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_runner.h"

namespace inferlab::engine {

/// A runner for @p model on @p backend with a paged KV pool of @p paging.num_blocks blocks of
/// @p paging.block_size tokens per layer, its rows stored in @p kv_format (fp32 by default;
/// kv_format.h, parse_kv_format() reads "fp16", "int8", "int8/fp16-scales", "fp8"), and @p rows
/// sequences of up to @p max_seq_len tokens per step. The cpu runner takes every format the
/// forward does (check_kv_format(): all but INT8 per-channel); the sim and cuda runners keep an
/// fp32 pool (device_runner.cu: their KV write and attention kernels over the pool are fp32
/// ones) and refuse any other format. A model split over ranks (chapter 10: a tensor-parallel
/// shard or a pipeline stage) gets rank 0's leader runner (runtime/parallel/rank_runner.h), on
/// cpu only. Throws std::invalid_argument for a size that is not positive, a max_seq_len past
/// the model's, a backend not available here (require_available: cuda needs nvcc and a GPU), or
/// a @p kv_format the backend cannot run (naming "kv_format").
std::unique_ptr<model::ModelRunner> make_model_runner(const model::LlamaModel& model, Backend backend, int64_t rows,
                                                      int64_t max_seq_len, const KvPaging& paging,
                                                      const KvFormat& kv_format = KvFormat::fp32());

}  // namespace inferlab::engine
