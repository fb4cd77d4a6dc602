// Chapter 07 benchmark: why batching is the decode optimization, and what a scheduler makes of it.
//
// (a) Time (Google Benchmark, family decode_step/B): one decode step of the whole model — every
//     layer, the output head — for B = 1 … 64 sequences of 512 cached tokens each, on the
//     benchmark model (random:bench: dim 768, 12 layers, 12 query / 4 KV heads, hidden 2048,
//     vocab 32000 — 100 M parameters, 400 MB of fp32 weights; 24 KiB of fp32 KV per token). The
//     step reads every weight once whatever B (linear_cpu keeps each weight tile for all B rows)
//     and each sequence's KV once, so bytes = weights + B · 512 · 24 KiB and FLOPs ∝ B: AI grows
//     ~B until the KV bytes catch up with the weights (B ≈ 32 here) — or until the step reaches the
//     compute roof, whichever comes first (on this lab's CPU: B ≈ 8). Counters: FLOPs, bytes,
//     weight_MB, kv_MB, AI, GFLOP/s, GB/s, roof_GFLOP/s = min(peak, AI × read bandwidth),
//     roof_pct, tokens/s (B / time). Family linear_w13/{cpu,openblas}/B times the MLP's biggest
//     GEMM (4096 × 768) alone: what the batch-invariant linear layer costs against OpenBLAS.
// (b)–(d) Serving (run once after the timings; --no-serving skips, --serving-only runs only it):
//     a documented workload (serving_study.h: 48 requests, prompts uniform 16–128, outputs
//     uniform 16–256, random ids, exact output lengths) on a smaller model (random:bench with dim
//     512, 8 layers, 8/4 heads, hidden 1376, vocab 8192: 28 M parameters), the same KV memory for
//     every policy (128 blocks of 16 = 2048 tokens):
//     (b) static batching (the model's max_seq_len, 1024 tokens, reserved per request: 2 per
//         batch) vs continuous
//         (up to 32 running), all at t = 0 and then Poisson arrivals at 50% and 90% of the
//         continuous offline request rate — generated tokens/s, TTFT and TPOT p50/p99;
//     (c) chunked prefill on/off while long prompts (768 tokens, every 4th request) arrive among
//         short ones at 90% of the offline rate: the short requests' TPOT and inter-token gaps
//         (ITL p50 / p99 / max: a decode stalled behind a whole prefill shows as one long gap);
//     (d) memory too tight: the (b) workload in pools of 128, 64 and 40 blocks — preemptions,
//         recomputed tokens, throughput.
//     The clock is real: each step takes its measured wall time; idle gaps before an arrival are
//     skipped (Engine, ClockMode::real). Long runs print progress on stderr.
//
//   ./inferlab bench ch07 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//       --benchmark_out=docs/plots/ch07-bench.json --benchmark_out_format=json
//       --serving-out=docs/plots/ch07-serving.json            (what the lesson's tables come from)
//   ./inferlab bench ch07 --help                               this chapter's options and Google Benchmark's
//   ./inferlab bench ch07 --serving-only --quick                a fast look at (b)–(d)
#include <benchmark/benchmark.h>

#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "chapters/07-continuous-batching/serving_study.h"
#include "chapters/bench_counters.h"
#include "common/args.h"
#include "common/json.h"
#include "common/rng.h"
#include "kernels/layers/layers.h"
#include "runtime/engine/serving_run.h"
#include "runtime/model/llama_model.h"

namespace {

using namespace inferlab;

constexpr int64_t kContext = 512;   // cached tokens per sequence in (a)
constexpr int64_t kMaxBatch = 64;

// The benchmark model and a paged cache of kMaxBatch sequences with kContext random tokens each.
struct DecodeSetup {
  model::LlamaModel model;
  KvCache cache;
  explicit DecodeSetup(model::LlamaWeights w)
      : model(std::move(w)), cache(serving::random_decode_cache(model, kMaxBatch, kContext, 11)) {}
};

DecodeSetup& decode_setup() {
  static DecodeSetup setup(model::load_model("random:bench"));
  return setup;
}

void BM_decode_step(benchmark::State& state) {
  DecodeSetup& s = decode_setup();
  const int64_t B = state.range(0);
  const model::StepPlan fb = serving::decode_batch(s.model, s.cache, B, kContext);
  const Cost cost = s.model.step_cost(fb);
  const double weight_bytes = double(s.model.weights().bytes());
  const bench::CallTiming t = bench::time_calls(state, [&] { benchmark::DoNotOptimize(s.model.forward(fb, s.cache)); });
  const Roofline& roof = bench::measured_roofline();
  const double gflops = cost.flops / t.mean_seconds / 1e9;
  const double roof_gflops = std::min(roof.peak_gflops, cost.arithmetic_intensity() * roof.read_gbs);
  state.counters["B"] = double(B);
  state.counters["FLOPs"] = cost.flops;
  state.counters["bytes"] = cost.bytes;
  state.counters["weight_MB"] = weight_bytes / 1e6;
  state.counters["kv_MB"] = (cost.bytes - weight_bytes) / 1e6;
  state.counters["AI"] = cost.arithmetic_intensity();
  state.counters["GFLOP/s"] = gflops;
  state.counters["GB/s"] = cost.bytes / t.mean_seconds / 1e9;
  state.counters["roof_GFLOP/s"] = roof_gflops;
  state.counters["roof_pct"] = 100.0 * gflops / roof_gflops;
  state.counters["tokens/s"] = double(B) / t.mean_seconds;
  state.counters["best_tokens/s"] = double(B) / t.best_seconds;
}

void BM_linear_w13(benchmark::State& state, bool openblas) {
  const int64_t B = state.range(0);
  static const Tensor<float> w = Rng(3).normal_tensor({4096, 768});
  const Tensor<float> x = Rng(4).normal_tensor({B, 768});
  Tensor<float> y({B, 4096});
  const Cost cost = linear_cost(B, 4096, 768);
  const bench::CallTiming t = bench::time_calls(state, [&] {
    if (openblas) {
      linear_openblas(x, w, y);
    } else {
      linear_cpu(x, w, y);
    }
  });
  const Roofline& roof = bench::measured_roofline();
  const double gflops = cost.flops / t.mean_seconds / 1e9;
  state.counters["B"] = double(B);
  state.counters["AI"] = cost.arithmetic_intensity();
  state.counters["GFLOP/s"] = gflops;
  state.counters["roof_pct"] = 100.0 * gflops / std::min(roof.peak_gflops, cost.arithmetic_intensity() * roof.read_gbs);
  state.counters["peak_pct"] = 100.0 * gflops / roof.peak_gflops;
}

void register_benchmarks() {
  auto* step = benchmark::RegisterBenchmark("decode_step", BM_decode_step)->UseManualTime()->Unit(benchmark::kMillisecond);
  for (int64_t B = 1; B <= kMaxBatch; B *= 2) step->Arg(B);
  for (const bool openblas : {false, true}) {
    auto* lin = benchmark::RegisterBenchmark(openblas ? "linear_w13/openblas" : "linear_w13/cpu", BM_linear_w13, openblas)
                    ->UseManualTime()
                    ->Unit(benchmark::kMicrosecond);
    for (int64_t B = 1; B <= kMaxBatch; B *= 2) lin->Arg(B);
  }
  benchmark::AddCustomContext("decode_context_tokens", std::to_string(kContext));
  benchmark::AddCustomContext("model", model::parse_random_spec("random:bench").config.describe());
}

// ---- (b)–(d): serving ----

const char* kServingModel = "random:bench,dim=512,hidden=1376,layers=8,heads=8,kv_heads=4,vocab=8192,seq_len=1024";

engine::EngineConfig base_config(engine::BatchingPolicy policy, int64_t num_blocks) {
  engine::EngineConfig c;
  c.policy = policy;
  c.block_size = 16;
  c.num_blocks = num_blocks;
  c.max_num_seqs = 32;
  c.max_num_batched_tokens = 256;
  c.chunk_size = 256;
  c.max_seq_len = 1024;  // the model's context: what a static batch must reserve per request
  c.prefix_caching = false;  // random prompts share nothing; keep the comparison about batching
  c.record_steps = true;
  return c;
}

void print_row(const engine::ServingRun& r, std::ostream& out) {
  const auto& s = r.summary;
  out << "  " << std::left << std::setw(34) << r.name << std::right << std::fixed << std::setprecision(1)
      << std::setw(10) << s.tokens_per_second << std::setprecision(3) << std::setw(10) << s.ttft.p50 << std::setw(10)
      << s.ttft.p99 << std::setprecision(4) << std::setw(10) << s.tpot.p50 << std::setw(10) << s.tpot.p99
      << std::setw(8) << r.stats.steps << std::setw(7) << r.stats.max_running << std::setw(7) << r.stats.preemptions
      << std::setw(9) << r.stats.recomputed_tokens << "\n";
}

void print_header(std::ostream& out) {
  out << "  " << std::left << std::setw(34) << "run" << std::right << std::setw(10) << "tok/s" << std::setw(10)
      << "TTFT p50" << std::setw(10) << "TTFT p99" << std::setw(10) << "TPOT p50" << std::setw(10) << "TPOT p99"
      << std::setw(8) << "steps" << std::setw(7) << "max B" << std::setw(7) << "preem" << std::setw(9) << "recomp"
      << "\n";
}

int serving_study(const std::string& out_path, bool quick) {
  std::cout << "\nServing study (real clock: measured step times, idle gaps skipped)\n";
  const model::LlamaModel m(model::load_model(kServingModel));
  std::cout << "model: " << kServingModel << " — " << m.config().describe() << "\n";
  serving::Workload w;
  if (quick) w.requests = 16;
  const auto offline = serving::make_requests(w, m.config().vocab_size);
  std::vector<engine::ServingRun> runs;
  std::vector<std::string> parts;
  const auto run = [&](const std::string& part, const std::string& name, const engine::EngineConfig& c,
                       const std::vector<engine::Request>& requests) {
    std::cerr << "  running " << name << " …" << std::endl;
    runs.push_back(engine::serve(name, m, c, requests, {.out = &std::cerr, .every_seconds = 5.0}));
    parts.push_back(part);
    print_row(runs.back(), std::cout);
  };

  std::cout << "\n(b) static vs continuous batching, " << w.requests << " requests (prompts " << w.prompt_min << "–"
            << w.prompt_max << ", outputs " << w.output_min << "–" << w.output_max
            << " tokens), 128 blocks of 16 tokens of KV for both\n";
  print_header(std::cout);
  run("b", "static, all at t=0", base_config(engine::BatchingPolicy::static_batch, 128), offline);
  run("b", "continuous, all at t=0", base_config(engine::BatchingPolicy::continuous, 128), offline);
  const double offline_rate = double(w.requests) / runs.back().summary.makespan;
  for (const double fraction : {0.5, 0.9}) {
    serving::Workload p = w;
    p.rate = fraction * offline_rate;
    const auto requests = serving::make_requests(p, m.config().vocab_size);
    std::ostringstream label;
    label << std::fixed << std::setprecision(1) << p.rate << " req/s (" << int(fraction * 100) << "%)";
    run("b", "static, Poisson " + label.str(), base_config(engine::BatchingPolicy::static_batch, 128), requests);
    run("b", "continuous, Poisson " + label.str(), base_config(engine::BatchingPolicy::continuous, 128), requests);
  }
  const double ratio = runs[1].summary.tokens_per_second / runs[0].summary.tokens_per_second;
  std::cout << "  continuous / static throughput at t=0: " << std::setprecision(2) << ratio << "×\n";

  std::cout << "\n(c) chunked prefill while 768-token prompts arrive (every 4th request), 256 blocks\n";
  serving::Workload longs = w;
  longs.requests = quick ? 16 : 40;
  longs.prompt_min = 16, longs.prompt_max = 64, longs.output_min = 32, longs.output_max = 96;
  longs.long_prompt_every = 4, longs.long_prompt = 768, longs.long_output = 8;
  longs.rate = 0.9 * offline_rate;
  const auto long_requests = serving::make_requests(longs, m.config().vocab_size);
  print_header(std::cout);
  engine::EngineConfig chunked = base_config(engine::BatchingPolicy::continuous, 256);
  chunked.max_num_batched_tokens = 96;
  chunked.chunk_size = 64;
  engine::EngineConfig whole = chunked;
  whole.chunked_prefill = false;
  whole.max_num_batched_tokens = 1024;
  run("c", "chunked prefill (chunk 64, budget 96)", chunked, long_requests);
  run("c", "whole prompts (budget 1024)", whole, long_requests);
  std::cout << "  short requests (prompt ≤ 64):       TPOT p50    TPOT p99    ITL p50     ITL p99     ITL max\n";
  for (size_t i = runs.size() - 2; i < runs.size(); ++i) {
    const auto tp = serving::tpot_of_short(runs[i], 64);
    double max_gap = 0.0;
    const auto itl = serving::itl_of_short(runs[i], 64, &max_gap);
    std::cout << "  " << std::left << std::setw(36) << runs[i].name << std::right << std::setprecision(4)
              << std::setw(9) << tp.p50 << std::setw(12) << tp.p99 << std::setw(12) << itl.p50 << std::setw(12)
              << itl.p99 << std::setw(12) << max_gap << "\n";
  }

  std::cout << "\n(d) memory too tight: the (b) workload at t=0, continuous, smaller pools\n";
  print_header(std::cout);
  for (const int64_t blocks : {128, 64, 40})
    run("d", "continuous, " + std::to_string(blocks) + " blocks", base_config(engine::BatchingPolicy::continuous, blocks),
        offline);

  if (!out_path.empty()) {
    Json json = {{"machine", bench::measured_roofline().cpu},
                 {"model", kServingModel},
                 {"clock", "real: measured step times, idle gaps skipped"},
                 {"offline_rate", json_number(offline_rate, 6)},
                 {"runs", Json::array()}};
    for (size_t i = 0; i < runs.size(); ++i)
      json["runs"].push_back(
          {{"part", parts[i]}, {"result", serving::to_json(runs[i], parts[i] == "b" && (i == 0 || i == 1))}});
    std::ofstream out(out_path);
    out << format_json(json) << "\n";
    if (!out) throw std::runtime_error("cannot write '" + out_path + "'");
    std::cout << "\nwrote " << out_path << "\n";
  }
  return 0;
}

const char* kServingUsage = R"(Chapter 07's own options (before or after Google Benchmark's):
  --serving-out FILE      write the serving study's runs as JSON (what the lesson's tables come from)
  --no-serving            only the timings (a)
  --serving-only          only the serving study (b)-(d)
  --quick                 the serving study with fewer requests
)";

}  // namespace

int main(int argc, char** argv) {
  auto [benchmark_args, own] = bench::split_benchmark_args(argc, argv);  // Google Benchmark's flags, ours
  const Args args(own, {"no-serving", "serving-only", "quick"});
  if (args.help()) {  // this chapter's options, then Google Benchmark's (it prints them and exits)
    std::cout << kServingUsage << "\nGoogle Benchmark's options:\n";
    static char help[] = "--help";
    char* help_args[] = {argv[0], help};
    return bench::run_benchmarks(2, help_args, register_benchmarks);
  }
  try {
    args.check_known({"serving-out", "no-serving", "serving-only", "quick"});
  } catch (const std::invalid_argument& e) {
    std::cerr << "bench_ch07: " << e.what() << "\n" << kServingUsage;
    return 1;
  }
  const bool serving = !args.has("no-serving"), only_serving = args.has("serving-only");
  if (!only_serving) {
    const int status = bench::run_benchmarks(int(benchmark_args.size()), benchmark_args.data(), register_benchmarks);
    if (status != 0) return status;
  }
  return serving ? serving_study(args.get_or("serving-out", ""), args.has("quick")) : 0;
}
