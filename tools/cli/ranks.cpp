// `--tp N` / `--pp N`: mpirun starts the ranks, each loads its part (ranks.h).
#include "tools/cli/ranks.h"

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

#include "common/backend.h"
#include "common/check.h"
#include "runtime/model/llama_weights.h"
#include "runtime/parallel/pipeline_parallel.h"
#include "runtime/parallel/tensor_parallel.h"
#include "runtime/parallel/rank_runner.h"
#include "runtime/parallel/mpi_communicator.h"
#include "tools/cli/command_line.h"

namespace inferlab::cli {

void add_split_options(CLI::App& app, RankSplit& split) {
  const std::string group = "model split (chapter 10)";
  app.add_option("--tp", split.tp,
                 "split the model over N ranks (tensor parallelism: each rank holds its heads, hidden columns and "
                 "vocabulary rows; two all-reduces a layer): starts the ranks through mpirun (Open MPI), "
                 "⌊cores / N⌋ threads each; cpu only, through the engine. N must divide the query heads and the "
                 "hidden width, and divide the KV heads or be a multiple of them (SmolLM2-135M: 1 or 3). The same "
                 "greedy ids as --tp 1 where the top-2 margin exceeds fp32 rounding")
      ->type_name("N")
      ->check(integer_in(1, 64))
      ->group(group);
  app.add_option("--pp", split.pp,
                 "split the model's layers into N pipeline stages, one a rank (each stage sends its activations to "
                 "the next; the last sends the logits to rank 0): started through mpirun like --tp; N ≤ the layers. "
                 "The same logits as --pp 1, bit for bit")
      ->type_name("N")
      ->check(integer_in(1, 64))
      ->group(group);
  app.add_option("--micro-batches", split.micro_batches,
                 "with --pp: cut each step's tokens into M micro-batches that follow one another through the stages "
                 "(the idle fraction is (N − 1) / (M + N − 1))")
      ->type_name("M")
      ->check(integer_in(1, 256))
      ->capture_default_str()
      ->group(group);
}

void check_split(const CLI::App& app, RankSplit& split) {
  require(split.tp == 1 || split.pp == 1, "--pp", split.pp,
          "with --tp " + std::to_string(split.tp) + ": split a model one way at a time");
  require(split.pp > 1 || app.count("--micro-batches") == 0, "--micro-batches", split.micro_batches,
          "needs --pp N (N > 1): it cuts a pipeline's steps");
  if (split.pp == 1) split.micro_batches = 1;
}

void check_split_options(Backend backend, const std::string& path, std::optional<WeightFormat> format,
                         const RankSplit& split) {
  const std::string option = split.pp > 1 ? "--pp" : "--tp";
  require(backend == Backend::cpu, "--backend", to_string(backend),
          "must be cpu with " + option + ": a model split over ranks runs on cpu, over MPI");
  const model::LlamaWeights weights = model::load_model(path, format);
  if (split.tp > 1) parallel::check_tensor_split(weights, split.tp);
  if (split.pp > 1) parallel::pipeline_split(weights.config, 0, split.pp);
}

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

RankModel load_rank_model(const std::string& path, std::optional<WeightFormat> format, const RankSplit& split) {
  RankModel m;
  model::LlamaWeights weights = model::load_model(path, format);
  const model::LlamaConfig whole_config = weights.config;
  const int ranks = split.ranks();
  if (ranks > 1) {
    // Every rank refuses a bad split alike, before MPI.
    if (split.tp > 1) parallel::check_tensor_split(weights, split.tp);
    if (split.pp > 1) parallel::pipeline_split(weights.config, 0, split.pp);
    m.comm = parallel::make_mpi_communicator();
    require(m.comm->size() == ranks, split.pp > 1 ? "--pp" : "--tp", ranks,
            "must equal the ranks mpirun started (" + std::to_string(m.comm->size()) + ")");
    // The whole model is dropped here: a rank keeps its part only.
    weights = split.tp > 1 ? parallel::shard_weights(weights, m.comm->rank(), ranks)
                           : parallel::stage_weights(weights, m.comm->rank(), ranks, split.micro_batches);
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
    parallel::end_leader_steps(*m_.model);
  } catch (const std::exception& e) {
    std::cerr << "inferlab: could not release the other ranks: " << e.what() << "\n";
  }
}

}  // namespace inferlab::cli
