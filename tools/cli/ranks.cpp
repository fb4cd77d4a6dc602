// `--tp N` / `--pp N`: the options, and the checks before mpirun starts the ranks (ranks.h).
#include "tools/cli/ranks.h"

#include <string>

#include "common/backend.h"
#include "common/check.h"
#include "runtime/model/llama_weights.h"
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
  parallel::check_rank_split(weights, split);
}

}  // namespace inferlab::cli
