#pragma once
/// @file ranks.h
/// Starting the ranks of a model split over N of them (chapter 10), and what each rank loads:
/// tensor parallelism (each rank a shard of every layer) or pipeline parallelism (each rank a
/// stage of layers). A program started once re-starts itself through Open MPI's mpirun, and each
/// rank then loads its part:
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
/// others and exits non-zero, naming the rank. The command line's options for it (--tp, --pp,
/// --micro-batches) are tools/cli/ranks.h's; chapter 10's benchmark splits its model with
/// rank_weights() too. Linked with inferlab::parallel_mpi.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/layers/weight.h"
#include "runtime/collective/communicator.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/llama_weights.h"

namespace inferlab::parallel {

/// How a model is split over ranks: tp tensor-parallel ranks, or pp pipeline stages with
/// micro_batches micro-batches a step (one way at a time: tp or pp is 1).
struct RankSplit {
  int tp = 1;             ///< tensor-parallel ranks (--tp)
  int pp = 1;             ///< pipeline stages (--pp)
  int micro_batches = 4;  ///< micro-batches a step is cut into on a pipeline (--micro-batches)
  /// The ranks mpirun starts: tp · pp (one of them is 1).
  int ranks() const { return tp * pp; }
};

/// This executable's path (/proc/self/exe resolved: in mpirun's children that link would name
/// mpirun). Throws std::runtime_error when it cannot be read.
std::string this_executable();

/// True when this process is one of mpirun's ranks (Open MPI's OMPI_COMM_WORLD_SIZE is set).
bool started_by_mpirun();

/// Replaces this process by `mpirun -n @p ranks … <this executable> @p command @p argv` (see the
/// file comment); returns only on failure, by throwing std::runtime_error naming mpirun.
[[noreturn]] void exec_through_mpirun(const std::string& command, const std::vector<std::string>& argv, int ranks);

/// Checks that @p weights (the whole model) can be split as @p split says, as every rank does
/// before MPI starts: check_tensor_split() for tp > 1, pipeline_split() for pp > 1. Throws
/// std::invalid_argument naming the argument.
void check_rank_split(const model::LlamaWeights& weights, const RankSplit& split);

/// Rank @p rank's part of @p weights (the whole model, consumed) split as @p split says: its shard
/// (shard_weights()) for tp > 1, its stage with split.micro_batches (stage_weights()) for pp > 1,
/// the whole model for one rank. Throws as check_rank_split().
model::LlamaWeights rank_weights(model::LlamaWeights weights, const RankSplit& split, int rank);

/// A model as one rank holds it: the whole model (one rank), or this rank's shard or stage with
/// the ranks' communicator. The communicator outlives the model, which points to it.
struct RankModel {
  std::unique_ptr<Communicator> comm;        ///< nullptr for the whole model
  std::unique_ptr<model::LlamaModel> model;  ///< the whole model or this rank's part
  std::string description;                   ///< the whole model's shape, and how it is split
  /// True on ranks 1 … N − 1, which follow rank 0's steps instead of running the command.
  bool follower() const { return comm && comm->rank() != 0; }
};

/// The model at @p path (weights in @p format, or the file's) for a program run with @p split:
/// the whole model for one rank; otherwise the communicator of mpirun's ranks (its size must be
/// split.ranks()) and this rank's part (rank_weights()). Throws std::invalid_argument naming
/// "--tp" or "--pp" when the model cannot be split so.
RankModel load_rank_model(const std::string& path, std::optional<WeightFormat> format, const RankSplit& split);

/// On rank 0 of a split model, tells the other ranks to return when it goes out of scope
/// (end_leader_steps()), normally or by an exception; nothing for the whole model.
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

}  // namespace inferlab::parallel
