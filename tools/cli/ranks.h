#pragma once
/// @file ranks.h
/// `--tp N` on the command line (chapter 10): a command whose model is split over N ranks starts
/// the ranks itself, through Open MPI's mpirun, and each rank loads its shard.
///
///     ./inferlab generate --model smollm2 --prompt "…" --tp 3
///       └─ exec mpirun -n 3 --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader
///                <this executable> generate --model smollm2 --prompt "…" --tp 3
///            ├─ rank 0: loads its shard, runs the engine, prints   ┐ the same all-reduces
///            └─ ranks 1, 2: load their shards, follow rank 0's steps ┘ every layer
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

#include "common/args.h"
#include "kernels/layers/weight.h"
#include "runtime/model/llama_model.h"
#include "runtime/parallel/communicator.h"

namespace inferlab::cli {

/// The value of --tp in @p args (1 without it). Throws std::invalid_argument naming "--tp" when it
/// is not in [1, 64].
int tensor_parallel_ranks(const Args& args);

/// Checks, before any rank starts, what would make every rank fail: a backend other than cpu
/// (--backend), and a model at @p path (in @p format) that cannot be split over @p ranks
/// (parallel::check_tensor_split()). Throws std::invalid_argument naming the option.
void check_tensor_parallel_options(const Args& args, const std::string& path, std::optional<WeightFormat> format,
                                   int ranks);

/// True when this process is one of mpirun's ranks (Open MPI's OMPI_COMM_WORLD_SIZE is set).
bool started_by_mpirun();

/// Replaces this process by `mpirun -n @p ranks … <this executable> @p command @p argv` (see the
/// file comment); returns only on failure, by throwing std::runtime_error naming mpirun.
[[noreturn]] void exec_through_mpirun(const std::string& command, const std::vector<std::string>& argv, int ranks);

/// A model as one rank holds it: the whole model (ranks = 1), or this rank's shard with the
/// ranks' communicator. The communicator outlives the model, which points to it.
struct RankModel {
  std::unique_ptr<parallel::Communicator> comm;  ///< nullptr for the whole model
  std::unique_ptr<model::LlamaModel> model;      ///< the whole model or this rank's shard
  /// True on ranks 1 … N − 1, which follow rank 0's steps instead of running the command.
  bool follower() const { return comm && comm->rank() != 0; }
};

/// The model at @p path (weights in @p format, or the file's) for a command run with --tp
/// @p ranks: the whole model for 1; otherwise the communicator of mpirun's ranks (its size must
/// be @p ranks) and this rank's shard (parallel::shard_weights()). Throws std::invalid_argument
/// naming "--tp" when the model cannot be split so.
RankModel load_rank_model(const std::string& path, std::optional<WeightFormat> format, int ranks);

/// On rank 0 of a split model, tells the other ranks to return when it goes out of scope
/// (parallel::end_tensor_parallel_steps()), normally or by an exception; nothing for the whole
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
