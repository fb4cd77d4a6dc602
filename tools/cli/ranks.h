#pragma once
/// @file ranks.h
/// `--tp N` and `--pp N` on the command line (chapter 10): a command whose model is split over N
/// ranks — tensor parallelism (each rank a shard of every layer) or pipeline parallelism (each
/// rank a stage of layers) — starts the ranks itself, through Open MPI's mpirun, and each rank
/// loads its part.
///
///     ./inferlab generate --model smollm2 --prompt "…" --tp 3
///       └─ exec mpirun -n 3 --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader
///                <this executable> generate --model smollm2 --prompt "…" --tp 3
///            ├─ rank 0: loads its part, runs the engine, prints    ┐ the same collectives
///            └─ ranks 1, 2: load their parts, follow rank 0's steps ┘ every step
///
/// The flags are those a container needs (the shared-memory transport without CMA:
/// OMPI_MCA_btl_vader_single_copy_mechanism=none; as root, OMPI_ALLOW_RUN_AS_ROOT), more
/// ranks than cores allowed, and each rank's OpenMP team of ⌊cores / N⌋ threads (at least 1)
/// unless OMP_NUM_THREADS says otherwise. A rank that dies ends the job: mpirun kills the
/// others and exits non-zero, naming the rank.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/backend.h"
#include "kernels/layers/weight.h"
#include "runtime/model/llama_model.h"
#include "runtime/parallel/communicator.h"

namespace inferlab::cli {

/// How a command's model is split over ranks: --tp N, or --pp N with --micro-batches M.
struct RankSplit {
  int tp = 1;             ///< tensor-parallel ranks (--tp)
  int pp = 1;             ///< pipeline stages (--pp)
  int micro_batches = 4;  ///< micro-batches a step is cut into on a pipeline (--micro-batches)
  /// The ranks mpirun starts: tp · pp (one of them is 1).
  int ranks() const { return tp * pp; }
};

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
/// (parallel::check_tensor_split(), parallel::pipeline_split()). Throws std::invalid_argument
/// naming the option.
void check_split_options(Backend backend, const std::string& path, std::optional<WeightFormat> format,
                         const RankSplit& split);

/// This executable's path (/proc/self/exe resolved: in mpirun's children that link would name
/// mpirun). Throws std::runtime_error when it cannot be read.
std::string this_executable();

/// True when this process is one of mpirun's ranks (Open MPI's OMPI_COMM_WORLD_SIZE is set).
bool started_by_mpirun();

/// Replaces this process by `mpirun -n @p ranks … <this executable> @p command @p argv` (see the
/// file comment); returns only on failure, by throwing std::runtime_error naming mpirun.
[[noreturn]] void exec_through_mpirun(const std::string& command, const std::vector<std::string>& argv, int ranks);

/// A model as one rank holds it: the whole model (one rank), or this rank's shard or stage with
/// the ranks' communicator. The communicator outlives the model, which points to it.
struct RankModel {
  std::unique_ptr<parallel::Communicator> comm;  ///< nullptr for the whole model
  std::unique_ptr<model::LlamaModel> model;      ///< the whole model or this rank's part
  std::string description;                       ///< the whole model's shape, and how it is split
  /// True on ranks 1 … N − 1, which follow rank 0's steps instead of running the command.
  bool follower() const { return comm && comm->rank() != 0; }
};

/// The model at @p path (weights in @p format, or the file's) for a command run with
/// @p split: the whole model for one rank; otherwise the communicator of mpirun's ranks (its
/// size must be split.ranks()) and this rank's shard (parallel::shard_weights()) or stage
/// (parallel::stage_weights()). Throws std::invalid_argument naming "--tp" or "--pp" when the
/// model cannot be split so.
RankModel load_rank_model(const std::string& path, std::optional<WeightFormat> format, const RankSplit& split);

/// On rank 0 of a split model, tells the other ranks to return when it goes out of scope
/// (parallel::end_leader_steps()), normally or by an exception; nothing for the whole
/// model.
class FollowersRelease {
 public:
  /// Releases @p m's followers at the end of the scope.
  explicit FollowersRelease(const RankModel& m) : m_(m) {}
  ~FollowersRelease();
  FollowersRelease(const FollowersRelease&) = delete;             ///< once
  FollowersRelease& operator=(const FollowersRelease&) = delete;  ///< once

 private:
  const RankModel& m_;
};

}  // namespace inferlab::cli
