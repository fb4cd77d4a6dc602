#pragma once
/// @file ranks.h
/// `--tp N` and `--pp N` on the command line (chapter 10): a command whose model is split over N
/// ranks — tensor parallelism (each rank a shard of every layer) or pipeline parallelism (each
/// rank a stage of layers) — starts the ranks itself, through Open MPI's mpirun, and each rank
/// loads its part. The options are declared here; starting the ranks and loading a rank's part
/// are library code, runtime/parallel/ranks.h (the mpirun line, the followers' release).

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "common/backend.h"
#include "kernels/layers/weight.h"
#include "runtime/parallel/ranks.h"

namespace inferlab::cli {

// The rank start-up of runtime/parallel/ranks.h, as the commands name it.
using parallel::exec_through_mpirun;
using parallel::FollowersRelease;
using parallel::load_rank_model;
using parallel::RankModel;
using parallel::RankSplit;
using parallel::started_by_mpirun;
using parallel::this_executable;

/// Adds --tp N, --pp N and --micro-batches M to @p app in the group "model split (chapter 10)",
/// bound to @p split: --tp and --pp in [1, 64], --micro-batches in [1, 256] (default 4, used with
/// --pp only). Call check_split() once the line is parsed.
void add_split_options(CLI::App& app, RankSplit& split);

/// Checks what the options cannot check alone, once @p app has parsed the line: not both --tp and
/// --pp above 1 (the lab splits a model one way at a time), --micro-batches only with --pp N > 1
/// (without a pipeline @p split's micro_batches becomes 1). Throws std::invalid_argument naming
/// the option.
void check_split(const CLI::App& app, RankSplit& split);

/// Checks, before any rank starts, what would make every rank fail: a @p backend other than cpu
/// (--backend), and a model at @p path (in @p format) that cannot be split so
/// (parallel::check_rank_split()). Throws std::invalid_argument naming the option.
void check_split_options(Backend backend, const std::string& path, std::optional<WeightFormat> format,
                         const RankSplit& split);

}  // namespace inferlab::cli
