// Chapter 03 benchmark: one decode step (one new query token per sequence attending to every
// cached token) swept over context length L = 512, 2048, 8192, 32768 and batch 1, 4, 16, one
// layer of 8 query heads and 8 KV heads (MHA, so AI is the plain ≈ 0.5 / ≈ 1), head_dim 128,
// every sequence holding L tokens, for
//  - every CPU decode version (cpu/decode, cpu/decode_simd) with an fp32 and an fp16 cache:
//    families decode_fp32/... and decode_fp16/...; the cache is 4 KiB (fp32) or 2 KiB (fp16)
//    per token per sequence, so the sweep runs from 2 MiB (in cache) to 2 GiB (DRAM);
//  - the 8× LLC point, family decode_8xllc_{fp32,fp16}/cpu/decode_simd: L = 32768 and
//    the smallest batch whose cache is ≥ 8× the last-level cache the OS reports, capped at
//    4 GiB (the cap wins when the reported LLC is above 512 MiB; cache_x_llc says what ran);
//  - cuda/decode (fp32 and fp16 cache) timed at the device level when a GPU is present
//    (kernels/timing/cuda_timing.h: the cache already in device memory, CUDA events); its
//    percentages refer to the GPU's measured device-to-device copy bandwidth (read + write),
//    also set as copy_pct. The GPU goal (lesson §8): ≥ 80% of it at batch ≥ 8, L ≥ 4096.
//    Without a GPU one line on stderr says why they were skipped.
// The sim backend is never benchmarked (the emulator proves kernels correct; its times mean
// nothing).
//
//   ./inferlab bench ch03                                        the whole sweep (~1.5 min on 2 cores)
//   ./inferlab bench ch03 --benchmark_filter=decode_simd         the SIMD version only
//   ./inferlab bench ch03 --benchmark_filter='L:32768/batch:16'  side by side at one size
//   ./inferlab bench ch03 --benchmark_out=build/ch03.json --benchmark_out_format=json
// (or build/default/chapters/bench_ch03 with the same flags). On a shared machine compare the
// best_GB/s columns, or add --benchmark_repetitions=5.
//
// Counters (chapters/bench_counters.h, set_decode_counters): FLOPs, bytes (K and V of every
// cached token, q and out: decode_step_cost), AI, GFLOP/s, GB/s, read_pct (% of the measured
// read bandwidth; the CPU goal, met (lesson §5): cpu/decode_simd ≥ 70% when the cache is ≥ 8× LLC),
// the roof at that AI and the % of it, best_* from the fastest call, and cache_MiB, llc_MiB,
// cache_x_llc. Memory: the largest point allocates 4 GiB (one cache at a time).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <iostream>
#include <optional>
#include <string>

#include "common/config.h"
#include "chapters/bench_calls.h"
#include "kernels/primitives/cpu_simd.h"
#include "kernels/timing/cuda_timing.h"
#include "kernels/registry.h"

namespace {

using namespace inferlab;

constexpr int64_t kHeads = 8, kKvHeads = 8, kHeadDim = 128;
constexpr int64_t kLongContext = 32768;
constexpr double kMaxCacheBytes = 4.0 * 1073741824.0;  // the 8× LLC point's cap (K + V)

// K + V bytes of a cache of @p batch sequences of @p seq_len tokens.
double cache_bytes(int64_t batch, int64_t seq_len, KvDtype dtype) {
  return bench::kv_cache_bytes({batch, kKvHeads, seq_len, kHeadDim}, dtype);
}

// The batch of the 8× LLC point: the smallest whose cache at kLongContext is ≥ 8× LLC, capped.
int64_t batch_for_8x_llc(KvDtype dtype) {
  const double per_sequence = cache_bytes(1, kLongContext, dtype);
  const double wanted = 8.0 * double(last_level_cache_bytes());
  return std::max<int64_t>(1, int64_t(std::ceil(std::min(wanted, kMaxCacheBytes) / per_sequence)));
}

std::string family(const std::string& prefix, const DecodeVersion& version) {
  return prefix + std::string(to_string(version.input)) + "/" + version.name;
}

void BM_Decode(benchmark::State& state, const DecodeVersion* version) {
  const int64_t L = state.range(0), batch = state.range(1);
  bench::time_decode(state, version->run, {batch, kKvHeads, L, kHeadDim}, version->input, kHeads);
  state.SetLabel(version->name + " " + std::string(to_string(version->input)));
}

// The L × batch sweep of this file's comment on one registered benchmark.
void add_sweep(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"L", "batch"})->UseManualTime()->Unit(benchmark::kMillisecond);
  for (const int64_t L : {512, 2048, 8192, 32768})
    for (const int64_t batch : {1, 4, 16}) bench->Args({L, batch});
}

#if INFERLAB_WITH_CUDA

void BM_DecodeDevice(benchmark::State& state, const DecodeVersion* version, const Roofline* gpu) {
  const int64_t L = state.range(0), batch = state.range(1);
  const DecodeShape shape{batch, kHeads, kKvHeads, L, kHeadDim};
  const std::optional<double> timed = bench::time_device_calls(state, [&](int warmup, int calls) {
    return cuda::decode_seconds_per_call(version->input, shape, L, warmup, calls);
  });
  if (!timed) return;
  const double seconds = *timed;
  const double e = double(bytes_per_element(version->input));
  Cost cost = decode_attention_cost({kHeads, kKvHeads, L, kHeadDim}, e);
  cost.flops *= double(batch);
  cost.bytes *= double(batch);
  bench::set_decode_counters(state, cost, {seconds, seconds}, cache_bytes(batch, L, version->input), *gpu);
  state.counters["copy_pct"] = state.counters["read_pct"];
  state.SetLabel(version->name + " " + std::string(to_string(version->input)));
}

// Measures the GPU's ceilings, records them in the context and registers cuda/decode.
// Returns "" or why the GPU versions were not registered.
std::string register_gpu_benchmarks() {
  static Roofline gpu;
  try {
    const DeviceCeilings ceilings = bench::measure_gpu_ceilings();
    gpu = bench::gpu_roofline(ceilings.sgemm_gflops, ceilings.copy_gbs);  // decode: fp32 arithmetic, no tensor cores
  } catch (const std::exception& error) {
    return std::string("measuring the GPU's ceilings failed: ") + error.what();
  }
  benchmark::AddCustomContext("gpu_roofline",
                              "cuda/* rows: read_pct = copy_pct = GB/s as % of a device-to-device cudaMemcpy "
                              "(read + write); peak = cuBLAS SGEMM; timed with CUDA events at the device level");
  for (const DecodeVersion& version : decode_versions()) {
    if (version.backend != Backend::cuda || version.chapter != 3) continue;  // chapter 05's: bench_ch05
    add_sweep(benchmark::RegisterBenchmark(family("decode_", version).c_str(), BM_DecodeDevice, &version, &gpu));
  }
  return "";
}

#endif  // INFERLAB_WITH_CUDA

void register_benchmarks() {
  bench::add_roofline_context("decode_*: 4*L*d per query head (one new token per sequence)",
                              "bytes/AI: K and V of every cached token + q + out, at the cache's bytes per element "
                              "(decode_step_cost); read_pct: GB/s as % of roofline_read_gbs");
  benchmark::AddCustomContext("cpu_kernels_isa", simd::kIsa);
  benchmark::AddCustomContext("decode_shape", "8 heads, 8 KV heads, head_dim 128, every sequence full (L tokens)");
  for (const DecodeVersion& version : decode_versions()) {
    if (version.backend != Backend::cpu || version.chapter != 3) continue;  // chapter 05's: bench_ch05
    add_sweep(benchmark::RegisterBenchmark(family("decode_", version).c_str(), BM_Decode, &version));
    if (version.name == "cpu/decode_simd") {
      benchmark::RegisterBenchmark(family("decode_8xllc_", version).c_str(), BM_Decode, &version)
          ->ArgNames({"L", "batch"})
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Args({kLongContext, batch_for_8x_llc(version.input)});
    }
  }
  std::string skipped = backend_unavailable_reason(Backend::cuda);
#if INFERLAB_WITH_CUDA
  if (skipped.empty()) skipped = register_gpu_benchmarks();
#endif
  if (!skipped.empty()) std::cerr << "bench_ch03: cuda/decode skipped: " << skipped << "\n";
  benchmark::AddCustomContext("cuda_versions", skipped.empty() ? "benchmarked" : "skipped: " + skipped);
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_benchmarks(argc, argv, register_benchmarks);
}
