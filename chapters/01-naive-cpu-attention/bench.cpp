// Chapter 01 benchmark: naive CPU attention over seq_len. Prints FLOPs, bytes (article model),
// AI, GFLOP/s, GB/s and % of the measured roofline. Run: ./inferlab bench ch01
#include <benchmark/benchmark.h>

#include "common/cost.h"
#include "common/rng.h"
#include "common/roofline.h"
#include "kernels/attention/registry.h"

namespace {

using namespace inferlab;

void BM_Attention(benchmark::State& state, const AttentionVersion* version) {
  static const Roofline roofline = roofline_for_benchmarks();
  const int64_t L = state.range(0), d = state.range(1), heads = 4, kv_heads = 4;
  Rng rng(Rng::fresh_seed());
  const Tensor<float> q = rng.normal_tensor({heads, L, d});
  const Tensor<float> k = rng.normal_tensor({kv_heads, L, d});
  const Tensor<float> v = rng.normal_tensor({kv_heads, L, d});
  Tensor<float> out({heads, L, d});
  version->run(q, k, v, false, out);  // warm-up, outside the timed loop
  for (auto _ : state) {
    version->run(q, k, v, false, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const Cost cost = prefill_attention_cost({heads, kv_heads, L, d}, TrafficModel::article, 4.0);
  const double iterations = static_cast<double>(state.iterations());
  state.counters["FLOPs"] = cost.flops;
  state.counters["bytes"] = cost.bytes;
  state.counters["AI"] = cost.arithmetic_intensity();
  state.counters["GFLOP/s"] = benchmark::Counter(cost.flops * iterations / 1e9, benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(cost.bytes * iterations / 1e9, benchmark::Counter::kIsRate);
  state.counters["roof_GFLOP/s"] = roofline.attainable_gflops(cost.arithmetic_intensity());
  state.SetLabel(version->name);
}

const bool registered = [] {
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != Backend::cpu || version.chapter != 1) continue;
    benchmark::RegisterBenchmark(("prefill/" + version.name).c_str(), BM_Attention, &version)
        ->ArgNames({"L", "d"})
        ->ArgsProduct({{64, 128, 256, 512, 1024, 2048}, {64, 128}})
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
