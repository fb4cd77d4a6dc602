// Chapter 05 benchmark: fused attention side by side with the unfused versions of chapter 02,
// and split-KV decode side by side with the single-split version.
//
//  1. prefill/<version>: cpu/openblas, cpu/blocked (chapter 02, unfused) and cpu/flash (fused),
//     4 query heads, 4 KV heads, head_dim 128, L = 512, 1024, 2048, 4096, non-causal, dense FLOPs
//     (4·L²·d per head); plus prefill_causal/<version> at L = 4096 in useful FLOPs
//     (2·d·L·(L+1) per head). The lesson's CPU bars are read at L = 4096, d = 128: cpu/flash
//     ≥ 1.5× faster than cpu/openblas (measured 1.53–1.82×) and ≥ 60% of the measured fp32 FMA
//     peak (best calls 62–70%, medians 58–64%: at the edge on a shared VM).
//  2. decode_split_<dtype>/…: one decode step at batch 1, ONE KV head shared by 8 query heads
//     (MQA; a GQA layer's KV-head slice on one device looks the same), head_dim 128, context
//     L = 8192 and 32768, fp32 and fp16 caches: cpu/decode_simd (chapter 03), cpu/decode_split
//     with S = 1 (the single-split version) and with the S its heuristic picks (split_kv.h).
//     Why this shape: chapter 03's cpu/decode_simd already runs one OpenMP item per
//     (sequence, KV head), so with 8 KV heads, or a batch of 8, every core is busy and splitting
//     buys nothing; at batch 1 with one KV head there is one item — one core streams the whole
//     cache while the other idles — and only splitting the context can use both. The lesson's
//     bar: the split version ≥ 1.7× the single-split version at batch 1, L = 32768 (measured
//     1.83–2.24×; on 2 cores 2× is also the most two cores can give).
//  3. prefill_gpu/<version>: cuda/flash, cuda/flash_tc (chapter 05) next to cuda/cublas and
//     cuda/cublas_fp16 (chapter 02), timed at the device level (kernels/timing/cuda_timing.h),
//     when a GPU is present; otherwise one line on stderr says why they were skipped.
// At the end a side-by-side summary table prints the ratios (best call of each row over all
// repetitions; the mean is in the benchmark table above it). On a shared, noisy machine add
// --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true: the versions' calls are
// then interleaved, so a burst of load from elsewhere does not land on one version only.
//
//   ./inferlab bench ch05                                      everything (~1 min on 2 cores)
//   ./inferlab bench ch05 --benchmark_filter='L:4096'          the L = 4096 prefill point only
//   ./inferlab bench ch05 --benchmark_filter=decode            the split-KV section only
//   ./inferlab bench ch05 --benchmark_out=build/ch05.json --benchmark_out_format=json
//
// Counters (chapters/bench_counters.h): set_prefill_counters() — FLOPs, the article's bytes/AI,
// bytes_unfused/AI_unfused (~4·L² score elements), GFLOP/s, % of the roof and of the peak — and
// set_fused_counters(): bytes_fused/AI_fused (Q, K, V, O only: AI = L/4 in fp32, L/2 in fp16),
// roof_pct_fused and unfused_over_fused, the modelled traffic ratio. Decode rows:
// set_decode_counters() (GB/s, % of read bandwidth) plus num_splits.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/config.h"
#include "chapters/bench_calls.h"
#include "kernels/primitives/cpu_simd.h"
#include "kernels/timing/cuda_timing.h"
#include "kernels/registry.h"
#include "kernels/registry.h"
#include "kernels/fused/split_kv.h"

namespace {

using namespace inferlab;

constexpr int64_t kHeads = 4, kKvHeads = 4, kHeadDim = 128;
constexpr int64_t kSeqLens[] = {512, 1024, 2048, 4096};
constexpr int64_t kCausalSeqLen = 4096;
constexpr int64_t kDecodeHeads = 8, kDecodeKvHeads = 1;
constexpr int64_t kDecodeContexts[] = {8192, 32768};

const char* const kPrefillVersions[] = {"cpu/openblas", "cpu/blocked", "cpu/flash"};

// What the summary table needs from each row, keyed by the row's name.
struct RowResult {
  double best_seconds = 0.0;
  double gflops_best = 0.0;
  double peak_pct_best = 0.0;
  double unfused_over_fused = 0.0;
  double ai_fused = 0.0;
  double ai_unfused = 0.0;
  int64_t num_splits = 0;
};
std::map<std::string, RowResult>& results() {
  static std::map<std::string, RowResult> rows;
  return rows;
}

// With --benchmark_repetitions a row runs several times: the summary keeps its fastest call.
bool improves(const RowResult& row, double best_seconds) {
  return row.best_seconds == 0.0 || best_seconds < row.best_seconds;
}

std::string prefill_key(const std::string& version, int64_t L, bool causal) {
  return (causal ? "causal " : "") + version + " L" + std::to_string(L);
}

void BM_Prefill(benchmark::State& state, const AttentionVersion* version, bool causal) {
  const int64_t L = state.range(0), d = state.range(1);
  const bench::CallTiming timing = bench::time_prefill(state, version->run, {kHeads, kKvHeads, L, d}, causal);
  const FlopConvention flops = causal ? FlopConvention::causal_useful : FlopConvention::dense;
  bench::set_prefill_counters(state, {kHeads, kKvHeads, L, d}, timing, 4.0, flops);
  bench::set_fused_counters(state, {kHeads, kKvHeads, L, d}, timing, 4.0, flops);
  state.SetLabel(causal ? version->name + " causal" : version->name);
  RowResult& row = results()[prefill_key(version->name, L, causal)];
  if (!improves(row, timing.best_seconds)) return;
  row.best_seconds = timing.best_seconds;
  row.gflops_best = state.counters["best_GFLOP/s"];
  row.peak_pct_best = state.counters["best_peak_pct"];
  row.unfused_over_fused = state.counters["unfused_over_fused"];
  row.ai_fused = state.counters["AI_fused"];
  row.ai_unfused = state.counters["AI_unfused"];
}

std::string decode_key(const std::string& what, KvDtype dtype, int64_t L) {
  return what + " " + std::string(to_string(dtype)) + " L" + std::to_string(L);
}

// One decode step of @p run; @p num_splits is the S it uses (0: not a split version).
void BM_Decode(benchmark::State& state, const std::string& what, KvDtype dtype, const DecodeFn& run,
               int64_t num_splits) {
  const int64_t L = state.range(0);
  const bench::CallTiming timing =
      bench::time_decode(state, run, {1, kDecodeKvHeads, L, kHeadDim}, dtype, kDecodeHeads);
  state.counters["num_splits"] = double(num_splits);
  state.SetLabel(what + " " + std::string(to_string(dtype)));
  RowResult& row = results()[decode_key(what, dtype, L)];
  if (!improves(row, timing.best_seconds)) return;
  row.best_seconds = timing.best_seconds;
  row.num_splits = num_splits;
}

// The S the registered cpu/decode_split picks for the benchmark's decode shape at context @p L.
int64_t heuristic_splits(int64_t L) {
  return choose_num_splits(1 * kDecodeKvHeads, L, cpu_split_policy());
}

#if INFERLAB_WITH_CUDA

const char* const kGpuVersions[] = {"cuda/cublas", "cuda/cublas_fp16", "cuda/flash", "cuda/flash_tc"};

void BM_PrefillDevice(benchmark::State& state, const AttentionVersion* version, const DeviceCeilings* gpu) {
  const int64_t L = state.range(0), d = state.range(1);
  const std::optional<double> timed = bench::time_device_calls(state, [&](int warmup, int calls) {
    return cuda::seconds_per_call(version->name, {kHeads, kKvHeads, L, d, false}, warmup, calls);
  });
  if (!timed) return;
  const double seconds = *timed;
  const bool fp32 = version->precision == Precision::fp32;
  const Roofline roofline = bench::gpu_roofline(fp32 ? gpu->sgemm_gflops : gpu->hgemm_gflops, gpu->copy_gbs);
  bench::set_prefill_counters(state, {kHeads, kKvHeads, L, d}, {seconds, seconds}, fp32 ? 4.0 : 2.0,
                              FlopConvention::dense, roofline);
  bench::set_fused_counters(state, {kHeads, kKvHeads, L, d}, {seconds, seconds}, fp32 ? 4.0 : 2.0,
                            FlopConvention::dense, roofline);
  state.SetLabel(version->name);
  RowResult& row = results()[prefill_key(version->name, L, false)];
  row.best_seconds = seconds;
  row.gflops_best = state.counters["GFLOP/s"];
  row.peak_pct_best = state.counters["peak_pct"];
}

// Measures the GPU's ceilings and registers the GPU rows; returns "" or why not.
std::string register_gpu_benchmarks() {
  static DeviceCeilings gpu;
  try {
    gpu = bench::measure_gpu_ceilings();
  } catch (const std::exception& error) {
    return std::string("measuring the GPU's ceilings failed: ") + error.what();
  }
  for (const char* name : kGpuVersions) {
    const AttentionVersion& version = find_attention_version(name, Backend::cuda);
    auto* bench =
        benchmark::RegisterBenchmark(("prefill_gpu/" + version.name).c_str(), BM_PrefillDevice, &version, &gpu);
    bench->ArgNames({"L", "d"})->UseManualTime()->Unit(benchmark::kMillisecond);
    for (const int64_t L : {1024, 2048, 4096, 8192, 16384}) bench->Args({L, kHeadDim});
  }
  return "";
}

#endif  // INFERLAB_WITH_CUDA

void register_benchmarks() {
  bench::add_roofline_context(
      "prefill/*: dense 4*L*L*d per head, non-causal; prefill_causal/*: useful 2*d*L*(L+1) per head; decode_*: "
      "4*L*d per query head",
      "bytes/AI: article; bytes_unfused/AI_unfused: ~4*L*L score elements; bytes_fused/AI_fused: Q,K,V,O only");
  benchmark::AddCustomContext("cpu_kernels_isa", simd::kIsa);
  benchmark::AddCustomContext("decode_shape", "batch 1, 8 query heads, 1 KV head, head_dim 128, full cache");
  for (const char* name : kPrefillVersions) {
    const AttentionVersion& version = find_attention_version(name, Backend::cpu);
    auto* dense = benchmark::RegisterBenchmark(("prefill/" + version.name).c_str(), BM_Prefill, &version, false);
    dense->ArgNames({"L", "d"})->UseManualTime()->Unit(benchmark::kMillisecond);
    for (const int64_t L : kSeqLens) dense->Args({L, kHeadDim});
    benchmark::RegisterBenchmark(("prefill_causal/" + version.name).c_str(), BM_Prefill, &version, true)
        ->ArgNames({"L", "d"})
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Args({kCausalSeqLen, kHeadDim});
  }
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16}) {
    const std::string family = "decode_split_" + std::string(to_string(dtype)) + "/";
    const auto add = [&](const std::string& what, int64_t L, const DecodeFn& run, int64_t num_splits) {
      // Calls of a millisecond: at least a second of them, so that the best call is a clean one.
      benchmark::RegisterBenchmark((family + what).c_str(), BM_Decode, what, dtype, run, num_splits)
          ->ArgNames({"L"})
          ->MinTime(1.0)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Args({L});
    };
    for (const int64_t L : kDecodeContexts) {
      add("cpu/decode_simd", L, find_decode_version("cpu/decode_simd", Backend::cpu, dtype).run, 0);
      add(
          "cpu/decode_split S=1", L,
          [](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) { decode_cpu_split(q, cache, out, 1); },
          1);
      add("cpu/decode_split", L, find_decode_version("cpu/decode_split", Backend::cpu, dtype).run, heuristic_splits(L));
    }
  }
  std::string skipped = backend_unavailable_reason(Backend::cuda);
#if INFERLAB_WITH_CUDA
  if (skipped.empty()) skipped = register_gpu_benchmarks();
#endif
  if (!skipped.empty()) std::cerr << "bench_ch05: cuda/... versions skipped: " << skipped << "\n";
  benchmark::AddCustomContext("cuda_versions", skipped.empty() ? "benchmarked" : "skipped: " + skipped);
}

// The side-by-side table: every row that ran, with the ratios the lesson's bars are about.
void print_summary() {
  const auto& rows = results();
  const auto find = [&](const std::string& key) -> const RowResult* {
    const auto it = rows.find(key);
    return it == rows.end() ? nullptr : &it->second;
  };
  std::printf("\nChapter 05 summary (best call of each row; peak %.0f GFLOP/s fp32, %s)\n",
              bench::measured_roofline().peak_gflops, bench::measured_roofline().simd.c_str());
  std::printf("%-8s %-7s %10s %10s %10s %9s %7s %9s %9s %8s %8s %8s\n", "prefill", "L", "openblas", "blocked", "flash",
              "flash", "flash", "openblas/", "blocked/", "AI", "AI", "modelled");
  std::printf("%-8s %-7s %10s %10s %10s %9s %7s %9s %9s %8s %8s %8s\n", "", "", "ms", "ms", "ms", "GFLOP/s", "% peak",
              "flash", "flash", "unfused", "fused", "unf/fus");
  const auto prefill_line = [&](int64_t L, bool causal) {
    const RowResult* openblas = find(prefill_key("cpu/openblas", L, causal));
    const RowResult* blocked = find(prefill_key("cpu/blocked", L, causal));
    const RowResult* flash = find(prefill_key("cpu/flash", L, causal));
    if (!openblas || !blocked || !flash) return;
    std::printf("%-8s %-7lld %10.2f %10.2f %10.2f %9.1f %7.1f %9.2f %9.2f %8.1f %8.1f %8.1f\n",
                causal ? "causal" : "dense", static_cast<long long>(L), 1e3 * openblas->best_seconds,
                1e3 * blocked->best_seconds, 1e3 * flash->best_seconds, flash->gflops_best, flash->peak_pct_best,
                openblas->best_seconds / flash->best_seconds, blocked->best_seconds / flash->best_seconds,
                flash->ai_unfused, flash->ai_fused, flash->unfused_over_fused);
  };
  for (const int64_t L : kSeqLens) prefill_line(L, false);
  prefill_line(kCausalSeqLen, true);
  std::printf("  (causal row: useful FLOPs; openblas computes the masked half anyway)\n");

  std::printf("\n%-14s %-7s %12s %12s %12s %4s %14s\n", "decode b1 kv1", "L", "decode_simd", "split S=1", "split auto",
              "S", "S=1/auto");
  std::printf("%-14s %-7s %12s %12s %12s %4s %14s\n", "", "", "ms", "ms", "ms", "", "(target ≥ 1.7)");
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
    for (const int64_t L : kDecodeContexts) {
      const RowResult* simd_row = find(decode_key("cpu/decode_simd", dtype, L));
      const RowResult* one = find(decode_key("cpu/decode_split S=1", dtype, L));
      const RowResult* split = find(decode_key("cpu/decode_split", dtype, L));
      if (!simd_row || !one || !split) continue;
      std::printf("%-14s %-7lld %12.3f %12.3f %12.3f %4lld %14.2f\n", std::string(to_string(dtype)).c_str(),
                  static_cast<long long>(L), 1e3 * simd_row->best_seconds, 1e3 * one->best_seconds,
                  1e3 * split->best_seconds, static_cast<long long>(split->num_splits),
                  one->best_seconds / split->best_seconds);
    }

#if INFERLAB_WITH_CUDA
  bool any_gpu = false;
  for (const char* name : kGpuVersions) any_gpu |= find(prefill_key(name, 4096, false)) != nullptr;
  if (any_gpu) {
    std::printf("\n%-18s %-7s %10s %10s %12s\n", "GPU prefill", "L", "ms", "GFLOP/s", "% GEMM rate");
    for (const char* name : kGpuVersions)
      for (const int64_t L : {1024, 2048, 4096, 8192, 16384})
        if (const RowResult* row = find(prefill_key(name, L, false)))
          std::printf("%-18s %-7lld %10.3f %10.1f %12.1f\n", name, static_cast<long long>(L), 1e3 * row->best_seconds,
                      row->gflops_best, row->peak_pct_best);
  }
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const int status = bench::run_benchmarks(argc, argv, register_benchmarks);
  if (status == 0) print_summary();
  return status;
}
