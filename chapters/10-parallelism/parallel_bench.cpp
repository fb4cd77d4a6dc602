// Chapter 10's measurements on one machine, run under mpirun (parallel_study.py runs it and keeps
// the JSON rank 0 prints):
//
//   parallel_bench allreduce [--max-floats N]
//       MPI_Allreduce of 1 … N floats (×4 each time): the median time of a call over repeats, for
//       the α–β fit t(n) = α + β · bytes.
//   parallel_bench model --model M [--weights F] [--split tp|pp] [--micro-batches M] [--batch B]
//                        [--prompt 512] [--decode 32] [--repeats 5]
//       the model split over the job's ranks — tensor parallelism (tp, the default) or pipeline
//       stages (pp, each step cut into M micro-batches) — through the engine on rank 0: B prompts'
//       prefill (one step) and then decode steps of B tokens with that context; the median of
//       each, the bytes handed to the collectives and to send / receive per decode step, the time
//       spent in them (a counting wrapper around the communicator: on a pipeline, rank 0's wait
//       for the others is its idle time), every rank's resident memory (VmRSS) once loaded and
//       the whole model's pages returned (malloc_trim), less the program's before loading, and a
//       token's KV bytes in rank 0's pool.
//
// Rank 0 prints one JSON object on stdout; the other ranks print nothing.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/check.h"
#include "common/json.h"
#include "common/rng.h"
#include "runtime/engine/engine.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_files.h"
#include "runtime/parallel/mpi_communicator.h"
#include "runtime/parallel/pipeline_parallel.h"
#include "runtime/parallel/rank_runner.h"
#include "runtime/parallel/ranks.h"

namespace inferlab {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// A communicator that counts what passes through it (bytes and seconds per collective), so that a
// step's traffic is measured, not assumed.
class CountingCommunicator final : public parallel::Communicator {
 public:
  explicit CountingCommunicator(parallel::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string name() const override { return inner_.name(); }
  void all_reduce_sum(std::span<float> data) override {
    const auto t = Clock::now();
    inner_.all_reduce_sum(data);
    reduce_seconds += seconds_since(t);
    reduce_bytes += double(data.size_bytes());
    ++reduces;
  }
  void all_gather(std::span<const float> mine, std::span<float> all) override {
    const auto t = Clock::now();
    inner_.all_gather(mine, all);
    gather_seconds += seconds_since(t);
    gather_bytes += double(mine.size_bytes());
  }
  void broadcast(std::span<uint8_t> data, int root) override { inner_.broadcast(data, root); }
  void send(std::span<const float> data, int to) override {
    const auto t = Clock::now();
    inner_.send(data, to);
    wait_seconds += seconds_since(t);
    sent_bytes += double(data.size_bytes());
  }
  void recv(std::span<float> data, int from) override {
    const auto t = Clock::now();
    inner_.recv(data, from);
    wait_seconds += seconds_since(t);
  }
  void barrier() override { inner_.barrier(); }
  void reset() {
    reduce_seconds = gather_seconds = reduce_bytes = gather_bytes = wait_seconds = sent_bytes = 0.0;
    reduces = 0;
  }

  double reduce_seconds = 0, gather_seconds = 0, reduce_bytes = 0, gather_bytes = 0;
  double wait_seconds = 0, sent_bytes = 0;  // in send / receive: a pipeline stage's handoffs
  int64_t reduces = 0;

 private:
  parallel::Communicator& inner_;
};

int allreduce(const Args& args, parallel::Communicator& comm) {
  const int64_t max_floats = args.integer("max-floats").value_or(int64_t(1) << 22);
  Json rows = Json::array();
  for (int64_t n = 1; n <= max_floats; n *= 4) {
    std::vector<float> data(size_t(n), 1.0f);
    const int calls = n <= 4096 ? 200 : n <= (1 << 18) ? 20 : 4;
    for (int i = 0; i < 5; ++i) comm.all_reduce_sum(data);  // warm-up
    std::vector<double> per_call;
    for (int repeat = 0; repeat < 11; ++repeat) {
      comm.barrier();
      const auto t = Clock::now();
      for (int i = 0; i < calls; ++i) comm.all_reduce_sum(data);
      per_call.push_back(seconds_since(t) / calls);
    }
    rows.push_back({{"floats", n}, {"bytes", 4 * n}, {"median_s", median(per_call)},
                    {"best_s", *std::min_element(per_call.begin(), per_call.end())}});
  }
  if (comm.rank() == 0) std::cout << Json{{"ranks", comm.size()}, {"allreduce", rows}}.dump(1) << "\n";
  return 0;
}

// This process's resident memory, bytes (VmRSS of /proc/self/status; 0 where there is none).
double resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return 1024.0 * std::stod(line.substr(6));  // "VmRSS:   1234 kB"
  return 0.0;
}

int model_run(const Args& args, parallel::Communicator& world) {
  const int p = world.size();
  const std::string spec = model::resolve_model_path(args.required("model"));
  std::optional<WeightFormat> format;
  if (args.has("weights")) format = parse_weight_format(args.required("weights"));
  const int64_t prompt = args.integer("prompt").value_or(512), decode = args.integer("decode").value_or(32);
  const int64_t repeats = args.integer("repeats").value_or(5), batch = args.integer("batch").value_or(1);
  const std::string split = args.get_or("split", "tp");
  require(split == "tp" || split == "pp", "--split", split, "must be tp or pp");
  const int micro_batches = int(args.integer("micro-batches").value_or(1));
  const double baseline_rss = resident_bytes();  // the program and its libraries, before any weight
  model::LlamaWeights whole = model::load_model(spec, format);
  const model::LlamaConfig full = whole.config;
  const int64_t whole_bytes = whole.bytes();
  CountingCommunicator comm(world);
  const parallel::RankSplit rank_split = {split == "tp" ? p : 1, split == "pp" ? p : 1, micro_batches};
  model::LlamaWeights mine = parallel::rank_weights(std::move(whole), rank_split, world.rank());  // the whole dropped
  const int64_t part_bytes = mine.bytes();
  const model::LlamaModel m(std::move(mine), p > 1 ? &comm : nullptr);
  malloc_trim(0);  // the whole model's freed pages back to the system: the RSS is what the rank keeps
  const double loaded_rss = resident_bytes();
  // A token's K and V in this rank's pool (fp32): its layers × its KV heads.
  const int64_t kv_bytes_per_token = 2 * m.config().n_layers * m.config().kv_dim() * 4;
  // Every rank's resident memory, gathered at the end (a collective: the followers too).
  const auto gather_rss = [&] {
    std::vector<float> all(static_cast<size_t>(p));
    const float mine_mb = float((loaded_rss - baseline_rss) / 1e6);
    world.all_gather(std::span(&mine_mb, 1), all);
    return all;
  };
  if (p > 1 && world.rank() != 0) {
    parallel::follow_leader_steps(m);
    gather_rss();
    return 0;
  }
  engine::EngineConfig e;
  e.max_num_seqs = batch;
  e.max_num_batched_tokens = batch * prompt;
  e.chunk_size = prompt;
  e.block_size = 16;
  e.max_seq_len = prompt + decode + 1;
  e.num_blocks = batch * ((e.max_seq_len + 15) / 16 + 1);
  e.prefix_caching = false;
  std::vector<double> prefill, prefill_wait, step, reduce_share, wait_share, reduce_bytes_per_step,
      gather_bytes_per_step, sent_bytes_per_step;
  int64_t reduces_per_step = 0;
  Rng rng(3);
  for (int64_t r = 0; r < repeats + 1; ++r) {  // the first run warms up and is dropped
    engine::Engine engine(m, e);
    for (int64_t b = 0; b < batch; ++b) {
      engine::Request request;
      for (int64_t i = 0; i < prompt; ++i) request.prompt.push_back(int32_t(rng.integer(0, full.vocab_size - 1)));
      request.sampling.max_new_tokens = decode + 1;
      engine.add_request(request);
    }
    comm.reset();
    auto t = Clock::now();
    engine.step();  // every prompt in one step, and the first tokens
    if (r > 0) {
      prefill.push_back(seconds_since(t));
      prefill_wait.push_back(comm.wait_seconds / prefill.back());
    }
    for (int64_t i = 0; i < decode; ++i) {
      comm.reset();
      t = Clock::now();
      engine.step();
      const double s = seconds_since(t);
      if (r == 0) continue;
      step.push_back(s);
      reduce_share.push_back((comm.reduce_seconds + comm.gather_seconds) / s);
      wait_share.push_back(comm.wait_seconds / s);
      reduce_bytes_per_step.push_back(comm.reduce_bytes);
      gather_bytes_per_step.push_back(comm.gather_bytes);
      sent_bytes_per_step.push_back(comm.sent_bytes);
      reduces_per_step = comm.reduces;
    }
  }
  if (p > 1) parallel::end_leader_steps(m);
  const std::vector<float> rss_mb =
      p > 1 ? gather_rss() : std::vector<float>{float((loaded_rss - baseline_rss) / 1e6)};
  const double ring = p > 1 ? 2.0 * (p - 1) / p : 0.0;
  const bool pipeline = p > 1 && split == "pp";
  const Json out = {
      {"ranks", p},
      {"split", p > 1 ? split : "none"},
      {"micro_batches", pipeline ? micro_batches : 1},
      {"batch", batch},
      {"model", args.required("model")},
      {"config", full.describe()},
      {"weights", format ? std::string(to_string(*format)) : "file"},
      {"whole_weight_bytes", whole_bytes},
      {"rank0_weight_bytes", part_bytes},
      {"resident_mb_per_rank", rss_mb},
      {"rank0_kv_bytes_per_token", kv_bytes_per_token},
      {"whole_kv_bytes_per_token", 2 * full.n_layers * full.kv_dim() * 4},
      {"prompt_tokens", prompt},
      {"decode_steps", decode},
      {"repeats", repeats},
      {"median_prefill_s", median(prefill)},
      {"prefill_tokens_per_s", double(batch * prompt) / median(prefill)},
      {"median_decode_step_s", median(step)},
      {"decode_tokens_per_s", double(batch) / median(step)},
      // A pipeline's rank 0 waits in send / receive for the stages after it: its idle share.
      {"rank0_wait_share_of_prefill", median(prefill_wait)},
      {"rank0_wait_share_of_decode_step", median(wait_share)},
      {"predicted_bubble_prefill",
       pipeline ? parallel::pipeline_bubble(p, int(std::min<int64_t>(micro_batches, batch * prompt))) : 0.0},
      {"predicted_bubble_decode", pipeline ? parallel::pipeline_bubble(p, int(std::min<int64_t>(micro_batches, batch))) : 0.0},
      {"sent_bytes_per_decode_step", median(sent_bytes_per_step)},
      {"median_collective_share_of_decode_step", median(reduce_share)},
      {"allreduces_per_decode_step", reduces_per_step},
      {"allreduce_payload_bytes_per_decode_step", median(reduce_bytes_per_step)},
      {"allgather_bytes_per_decode_step", median(gather_bytes_per_step)},
      {"predicted_payload_bytes_per_token_per_layer", 2 * full.dim * 4},
      // The embedding's all-reduce (dim floats a token) is not a layer's; nothing is sent on one rank.
      {"measured_payload_bytes_per_token_per_layer",
       p > 1 ? Json((median(reduce_bytes_per_step) - double(full.dim * 4)) / double(full.n_layers)) : Json(nullptr)},
      {"ring_bytes_sent_per_rank_per_token_per_layer", ring * double(2 * full.dim * 4)},
  };
  std::cout << out.dump(1) << "\n";
  return 0;
}

}  // namespace
}  // namespace inferlab

int main(int argc, char** argv) {
  using namespace inferlab;
  std::unique_ptr<parallel::Communicator> world = parallel::make_mpi_communicator();
  try {
    const std::vector<std::string> words(argv + 1, argv + argc);
    require(!words.empty() && (words[0] == "allreduce" || words[0] == "model"), "mode", words.empty() ? "" : words[0],
            "must be allreduce or model");
    const Args args(std::vector<std::string>(words.begin() + 1, words.end()), {});
    return words[0] == "allreduce" ? allreduce(args, *world) : model_run(args, *world);
  } catch (const std::exception& e) {
    std::cerr << "parallel_bench (rank " << world->rank() << "): " << e.what() << "\n";
    parallel::mpi_abort(1);
  }
}
