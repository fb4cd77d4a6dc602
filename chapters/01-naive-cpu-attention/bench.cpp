// Chapter 01 benchmark: every chapter-01 CPU version of prefill attention from the registry,
// swept over seq_len L = 64 … 2048 and head_dim d = 64, 128 (4 heads, fp32, non-causal).
//
//   ./inferlab bench ch01                                   a table on the terminal
//   ./inferlab bench ch01 --benchmark_out=build/ch01.json   … and JSON for tools/plot_roofline.py
//
// The counters (FLOPs, bytes and AI under the article's and the unfused traffic models, GFLOP/s,
// GB/s, % of the measured roofline) are defined once, in chapters/bench_counters.h. The rates
// come from our own wall-clock time per call (manual timing), so the percentages are plain
// numbers, right in the console table and in the JSON alike.
#include "chapters/bench_calls.h"
#include "kernels/registry.h"

namespace {

using namespace inferlab;

constexpr int64_t kHeads = 4, kKvHeads = 4;

void BM_Attention(benchmark::State& state, const AttentionVersion* version) {
  const int64_t L = state.range(0), d = state.range(1);
  const bench::CallTiming timing = bench::time_prefill(state, version->run, {kHeads, kKvHeads, L, d}, false);
  bench::set_prefill_counters(state, {kHeads, kKvHeads, L, d}, timing);
  state.SetLabel(version->name);
}

void register_benchmarks() {
  bench::add_roofline_context("dense: 4*L*L*d per head (non-causal runs)");
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

int main(int argc, char** argv) { return inferlab::bench::run_benchmarks(argc, argv, register_benchmarks); }
