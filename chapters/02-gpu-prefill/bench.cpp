// Chapter 02 benchmark, CPU side: every CPU version of prefill attention from chapters 01–02
// (cpu/naive, cpu/blocked, cpu/openblas) swept over seq_len L = 64 … 8192 and head_dim d = 64,
// 128 (4 query heads, 4 KV heads, fp32, non-causal, dense FLOP convention), plus a causal sweep
// at d = 128 counted in useful FLOPs (2·d·L·(L+1) per head). The GPU versions join this file
// when they land.
//
//   ./inferlab bench ch02                                   the whole sweep (~70 s on 2 cores)
//   ./inferlab bench ch02 --benchmark_filter='L:2048/d:128' side by side at one size
//   ./inferlab bench ch02 --benchmark_out=build/ch02.json   … and JSON for tools/plot_roofline.py
// (or build/default/chapters/bench_ch02 with the same flags). On a shared machine compare the
// best_GFLOP/s columns, or add --benchmark_repetitions=5.
//
// cpu/naive is skipped above L = 2048: it runs at a few GFLOP/s, so L = 8192 would take minutes
// per call. Counters (chapters/bench_counters.h): FLOPs, bytes and AI under the article's model
// (L² scores once) and the unfused model (~4·L²), GFLOP/s, GB/s, the roof at each AI and the
// percentage of it reached, and the percentage of the measured FMA peak.
#include <benchmark/benchmark.h>

#include <string>

#include "chapters/bench_counters.h"
#include "common/rng.h"
#include "kernels/attention/cpu_simd.h"
#include "kernels/attention/registry.h"

namespace {

using namespace inferlab;

constexpr int64_t kHeads = 4, kKvHeads = 4;
constexpr int64_t kNaiveMaxSeqLen = 2048;

void BM_Prefill(benchmark::State& state, const AttentionVersion* version, bool causal) {
  const int64_t L = state.range(0), d = state.range(1);
  Rng rng(Rng::fresh_seed());
  const Tensor<float> q = rng.normal_tensor({kHeads, L, d});
  const Tensor<float> k = rng.normal_tensor({kKvHeads, L, d});
  const Tensor<float> v = rng.normal_tensor({kKvHeads, L, d});
  Tensor<float> out({kHeads, L, d});
  const bench::CallTiming timing = bench::time_calls(state, [&] { version->run(q, k, v, causal, out); });
  bench::set_prefill_counters(state, {kHeads, kKvHeads, L, d}, timing, 4.0,
                              causal ? FlopConvention::causal_useful : FlopConvention::dense);
  state.SetLabel(causal ? version->name + " causal" : version->name);
}

void register_benchmarks() {
  bench::add_roofline_context(
      "prefill/*: dense 4*L*L*d per head, non-causal; prefill_causal/*: useful 2*d*L*(L+1) per head, causal");
  benchmark::AddCustomContext("cpu_kernels_isa", simd::kIsa);  // what cpu/blocked was compiled for
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != Backend::cpu || version.chapter > 2) continue;
    const int64_t max_seq_len = version.name == "cpu/naive" ? kNaiveMaxSeqLen : 8192;
    for (const bool causal : {false, true}) {
      const std::string family = causal ? "prefill_causal/" : "prefill/";
      auto* bench = benchmark::RegisterBenchmark((family + version.name).c_str(), BM_Prefill, &version, causal);
      bench->ArgNames({"L", "d"})->UseManualTime()->Unit(benchmark::kMillisecond);
      for (int64_t L = 64; L <= max_seq_len; L *= 2) {
        if (causal && L != 512 && L != 2048 && L != 8192) continue;
        for (const int64_t d : {64, 128})
          if (!causal || d == 128) bench->Args({L, d});
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_benchmarks(argc, argv, register_benchmarks);
}
