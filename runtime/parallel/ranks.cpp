// Starting the ranks through mpirun, and what each loads (ranks.h).
#include "runtime/parallel/ranks.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "common/check.h"
#include "runtime/parallel/mpi_communicator.h"
#include "runtime/parallel/pipeline_parallel.h"
#include "runtime/parallel/rank_runner.h"
#include "runtime/parallel/tensor_parallel.h"

namespace inferlab::parallel {

std::string this_executable() {
  std::error_code error;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", error).string();
  if (error) throw std::runtime_error("cannot read /proc/self/exe: " + error.message());
  return self;
}

bool started_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

void exec_through_mpirun(const std::string& command, const std::vector<std::string>& argv, int ranks) {
  if (geteuid() == 0) {  // Open MPI refuses root unless told twice
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);  // containers forbid CMA
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  setenv("OMP_NUM_THREADS", std::to_string(std::max(1u, cores / unsigned(ranks))).c_str(), 0);
  const std::string self = this_executable();
  std::vector<std::string> words = {INFERLAB_MPIEXEC, "-n", std::to_string(ranks), "--oversubscribe",
                                    "--bind-to", "none", "--mca", "pml", "ob1", "--mca", "btl", "self,vader",
                                    self, command};
  words.insert(words.end(), argv.begin(), argv.end());
  std::vector<char*> c_argv;
  for (std::string& w : words) c_argv.push_back(w.data());
  c_argv.push_back(nullptr);
  std::cout.flush();
  // mpirun forwards SIGINT / SIGTERM to the ranks: it must not inherit a caller's blocked signals
  // nor an ignored SIGPIPE (exec keeps ignored dispositions and the mask).
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, nullptr);
  execv(INFERLAB_MPIEXEC, c_argv.data());
  throw std::runtime_error(std::string("could not start ") + INFERLAB_MPIEXEC + " for " + std::to_string(ranks) +
                           " ranks: " + std::strerror(errno));
}

void check_rank_split(const model::LlamaWeights& weights, const RankSplit& split) {
  if (split.tp > 1) check_tensor_split(weights, split.tp);
  if (split.pp > 1) pipeline_split(weights.config, 0, split.pp);
}

model::LlamaWeights rank_weights(model::LlamaWeights weights, const RankSplit& split, int rank) {
  check_rank_split(weights, split);
  if (split.tp > 1) return shard_weights(weights, rank, split.tp);
  if (split.pp > 1) return stage_weights(weights, rank, split.pp, split.micro_batches);
  return weights;
}

RankModel load_rank_model(const std::string& path, std::optional<WeightFormat> format, const RankSplit& split) {
  RankModel m;
  model::LlamaWeights weights = model::load_model(path, format);
  const model::LlamaConfig whole_config = weights.config;
  const int ranks = split.ranks();
  if (ranks > 1) {
    check_rank_split(weights, split);  // every rank refuses a bad split alike, before MPI
    m.comm = make_mpi_communicator();
    require(m.comm->size() == ranks, split.pp > 1 ? "--pp" : "--tp", ranks,
            "must equal the ranks mpirun started (" + std::to_string(m.comm->size()) + ")");
    // The whole model is dropped here: a rank keeps its part only.
    weights = rank_weights(std::move(weights), split, m.comm->rank());
  }
  m.model = std::make_unique<model::LlamaModel>(std::move(weights), m.comm.get());
  m.description = whole_config.describe();
  if (ranks > 1)
    m.description += split.tp > 1 ? "; split over " + std::to_string(ranks) + " tensor-parallel ranks"
                                  : "; in " + std::to_string(ranks) + " pipeline stages of " +
                                        std::to_string(split.micro_batches) + " micro-batches a step";
  return m;
}

FollowersRelease::~FollowersRelease() {
  if (!m_.comm || m_.comm->rank() != 0) return;
  try {
    end_leader_steps(*m_.model);
  } catch (const std::exception& e) {
    std::cerr << "inferlab: could not release the other ranks: " << e.what() << "\n";
  }
}

}  // namespace inferlab::parallel
