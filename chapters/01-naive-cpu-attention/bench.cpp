// Chapter 01 benchmark: every chapter-01 CPU version of prefill attention from the registry,
// swept over seq_len L = 64 … 2048 and head_dim d = 64, 128 (4 heads, fp32, non-causal).
//
//   ./inferlab bench ch01                                   a table on the terminal
//   ./inferlab bench ch01 --benchmark_out=build/ch01.json   … and JSON for tools/plot_roofline.py
//
// Counters of one run (one layer of 4 heads; AI does not depend on the number of heads):
//   FLOPs          4·L²·d per head (dense convention: the mask, if any, is not subtracted)
//   bytes, AI      the source article's traffic model: Q, K, V, O and the L×L scores once (fp32)
//   bytes_unfused, AI_unfused   the realistic unfused model: ~4·L² score elements of traffic
//   GFLOP/s, GB/s  FLOPs and (article) bytes divided by the measured time of one call
//   roof_GFLOP/s   what the measured roofline allows at that AI: min(peak, AI × triad bandwidth)
//   roof_pct       GFLOP/s as a percentage of roof_GFLOP/s
// The rates are computed here from our own wall-clock time per call (manual timing), not by
// Google Benchmark's rate counters, so that roof_pct is a plain number that is right in the
// console table and in the JSON alike.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "common/cost.h"
#include "common/rng.h"
#include "common/roofline.h"
#include "kernels/attention/registry.h"

namespace {

using namespace inferlab;

constexpr int64_t kHeads = 4, kKvHeads = 4;
constexpr double kBytesPerElement = 4.0;  // fp32

const Roofline& measured_roofline() {
  static const Roofline roofline = roofline_for_benchmarks();
  return roofline;
}

void BM_Attention(benchmark::State& state, const AttentionVersion* version) {
  const Roofline& roofline = measured_roofline();
  const int64_t L = state.range(0), d = state.range(1);
  Rng rng(Rng::fresh_seed());
  const Tensor<float> q = rng.normal_tensor({kHeads, L, d});
  const Tensor<float> k = rng.normal_tensor({kKvHeads, L, d});
  const Tensor<float> v = rng.normal_tensor({kKvHeads, L, d});
  Tensor<float> out({kHeads, L, d});
  version->run(q, k, v, false, out);  // warm-up, outside the timed loop: page faults, caches

  double total_seconds = 0.0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    version->run(q, k, v, false, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(seconds);
    total_seconds += seconds;
  }
  const double seconds_per_call = total_seconds / static_cast<double>(state.iterations());

  const AttentionDims dims{kHeads, kKvHeads, L, d};
  const Cost article = prefill_attention_cost(dims, TrafficModel::article, kBytesPerElement);
  const Cost unfused = prefill_attention_cost(dims, TrafficModel::unfused, kBytesPerElement);
  const double gflops = article.flops / seconds_per_call / 1e9;
  const double roof = roofline.attainable_gflops(article.arithmetic_intensity());
  state.counters["FLOPs"] = article.flops;
  state.counters["bytes"] = article.bytes;
  state.counters["AI"] = article.arithmetic_intensity();
  state.counters["bytes_unfused"] = unfused.bytes;
  state.counters["AI_unfused"] = unfused.arithmetic_intensity();
  state.counters["GFLOP/s"] = gflops;
  state.counters["GB/s"] = article.bytes / seconds_per_call / 1e9;
  state.counters["roof_GFLOP/s"] = roof;
  state.counters["roof_pct"] = 100.0 * gflops / roof;
  state.SetLabel(version->name);
}

std::string number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

void register_benchmarks() {
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != Backend::cpu || version.chapter != 1) continue;
    benchmark::RegisterBenchmark(("prefill/" + version.name).c_str(), BM_Attention, &version)
        ->ArgNames({"L", "d"})
        ->ArgsProduct({{64, 128, 256, 512, 1024, 2048}, {64, 128}})
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A readable table by default: counters as columns unless the caller chose otherwise.
  std::vector<char*> args(argv, argv + argc);
  bool tabular_given = false;
  for (int i = 1; i < argc; ++i) tabular_given |= std::strncmp(argv[i], "--benchmark_counters_tabular", 28) == 0;
  static char tabular[] = "--benchmark_counters_tabular=true";
  if (!tabular_given) args.insert(args.begin() + 1, tabular);
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;

  // The ceilings the percentages are relative to travel with the results (JSON "context").
  const Roofline& roofline = measured_roofline();
  benchmark::AddCustomContext("roofline_file", default_roofline_path().string());
  benchmark::AddCustomContext("roofline_peak_gflops", number(roofline.peak_gflops));
  benchmark::AddCustomContext("roofline_peak_simd", roofline.simd);
  benchmark::AddCustomContext("roofline_peak_avx2_gflops", number(roofline.peak_avx2_gflops));
  benchmark::AddCustomContext("roofline_read_gbs", number(roofline.read_gbs));
  benchmark::AddCustomContext("roofline_triad_gbs", number(roofline.triad_gbs));
  benchmark::AddCustomContext("roofline_ridge_point", number(roofline.ridge_point()));
  benchmark::AddCustomContext("roofline_measured_at", roofline.measured_at);
  benchmark::AddCustomContext("traffic_model", "bytes/AI: article (Q,K,V,O + L*L scores once); "
                                               "bytes_unfused/AI_unfused: ~4*L*L score elements; fp32");
  benchmark::AddCustomContext("flop_convention", "dense 4*L*L*d per head, non-causal");

  register_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
