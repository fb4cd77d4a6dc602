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
// nothing) — except its fixed cost per launch in the overhead family below.
//  - the overhead families (lesson §5, "The third regime: overhead"): the fixed cost of one call
//    with no work — overhead/omp_region (an empty OpenMP parallel region shaped like
//    cpu/decode_simd's: fork, an `omp for` over 8 items, join), overhead/sim_launch (an empty
//    1-block kernel through the SIMT emulator) — and overhead_decode_fp32/{cpu/decode,
//    cpu/decode_simd} at batch 1 over L = 1 … 16384, where the time flattens at that floor
//    while the bytes (and so GB/s and read_pct) keep shrinking. floor_x = time / the empty
//    region's median time, measured once at start-up. These families report the MEDIAN call
//    (median_us; GB/s and read_pct from it) and the fastest (best_us), not the mean: a call of a
//    few µs preempted on a shared machine takes milliseconds.
//
//   ./inferlab bench ch03                                        the whole sweep (~3 min on 2 cores)
//   ./inferlab bench ch03 --benchmark_filter=decode_simd         the SIMD version only
//   ./inferlab bench ch03 --benchmark_filter='L:32768/batch:16'  side by side at one size
//   ./inferlab bench ch03 --benchmark_out=build/ch03.json --benchmark_out_format=json
//   ./inferlab bench ch03 --benchmark_filter=overhead --benchmark_repetitions=5    the third regime
// (or build/default/chapters/bench_ch03 with the same flags). On a shared machine compare the
// best_GB/s columns, or add --benchmark_repetitions=5.
//
// Counters (chapters/bench_counters.h, set_decode_counters): FLOPs, bytes (K and V of every
// cached token, q and out: decode_step_cost), AI, GFLOP/s, GB/s, read_pct (% of the measured
// read bandwidth; the CPU goal, met (lesson §5): cpu/decode_simd ≥ 70% when the cache is ≥ 8× LLC),
// the roof at that AI and the % of it, best_* from the fastest call, and cache_MiB, llc_MiB,
// cache_x_llc. Memory: the largest point allocates 4 GiB (one cache at a time).
#include <benchmark/benchmark.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "chapters/bench_calls.h"
#include "common/config.h"
#include "common/timer.h"
#include "kernels/primitives/cpu_simd.h"
#include "kernels/registry.h"
#include "kernels/timing/cuda_timing.h"
#include "simt/simt.h"

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

// ---- overhead: the fixed cost of a call that does (almost) nothing ----

// What cpu/decode_simd does around its work: an OpenMP parallel region (wake the team, join it)
// whose `omp for schedule(dynamic, 1)` hands out @p items (batch × KV heads) — here with no work.
void empty_omp_region(int64_t items) {
#pragma omp parallel
  {
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) benchmark::DoNotOptimize(item);
  }
}

// The median time of one empty_omp_region(kKvHeads), measured once (the floor_x unit).
double omp_floor_seconds() {
  static const double floor = [] {
    empty_omp_region(kKvHeads);  // the team is created on the first region
    std::vector<double> times(2001);
    for (double& t : times) {
      const Stopwatch stopwatch;
      empty_omp_region(kKvHeads);
      t = stopwatch.seconds();
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    return times[times.size() / 2];
  }();
  return floor;
}

// Like bench::time_calls (one untimed call, then one timed call per iteration), but returns the
// MEDIAN call as mean_seconds, and the fastest as best_seconds: a call of a few microseconds that
// is preempted on a shared machine takes a thousand times longer, and the mean would measure the
// preemption, not the call.
bench::CallTiming time_calls_median(benchmark::State& state, const std::function<void()>& call) {
  call();
  std::vector<double> times;
  for (auto _ : state) {
    const Stopwatch stopwatch;
    call();
    const double seconds = stopwatch.seconds();
    state.SetIterationTime(seconds);
    times.push_back(seconds);
  }
  if (times.empty()) return {};
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front()};
}

// The median and best call in microseconds, as counters.
void set_call_counters(benchmark::State& state, const bench::CallTiming& timing) {
  state.counters["median_us"] = timing.mean_seconds * 1e6;
  state.counters["best_us"] = timing.best_seconds * 1e6;
}

void BM_OverheadOmpRegion(benchmark::State& state) {
  set_call_counters(state, time_calls_median(state, [] { empty_omp_region(kKvHeads); }));
  state.counters["threads"] = omp_get_max_threads();
  state.SetLabel("empty OpenMP region, omp for over 8 items");
}

// An empty kernel: what one launch costs the emulator with no work (its per-launch set-up, one
// block of one warp of fibers, the checks' bookkeeping).
__global__ void overhead_empty_kernel(int) {}

void BM_OverheadSimLaunch(benchmark::State& state) {
  set_call_counters(state, time_calls_median(state, [&] {
    if (simt::launch(overhead_empty_kernel, 1, 32, 0, nullptr, 0) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
      state.SkipWithError("launch failed");
  }));
  state.SetLabel("empty kernel, 1 block of 32 threads, SIMT emulator (checks on)");
}

// One decode step at batch 1, 8 heads, d = 128, over a tiny to large L: bytes fall with L, the
// time stops falling at the fixed cost. As bench::time_decode, but GB/s, read_pct and floor_x
// come from the median call (time_calls_median).
void BM_DecodeOverhead(benchmark::State& state, const DecodeVersion* version) {
  const int64_t L = state.range(0);
  const KvCacheShape shape{1, kKvHeads, L, kHeadDim};
  Rng rng(Rng::fresh_seed());
  const KvCache cache = random_full_cache(shape, version->input, rng);
  const Tensor<float> q = rng.normal_tensor({1, kHeads, kHeadDim});
  Tensor<float> out(q.shape());
  const bench::CallTiming timing = time_calls_median(state, [&] { version->run(q, cache, out); });
  bench::set_decode_counters(state, decode_step_cost(cache, kHeads), timing,
                             bench::kv_cache_bytes(shape, version->input));
  set_call_counters(state, timing);
  state.counters["floor_x"] = timing.mean_seconds / omp_floor_seconds();
  state.SetLabel(version->name + " " + std::string(to_string(version->input)));
}

void register_overhead_benchmarks() {
  benchmark::AddCustomContext("overhead_omp_floor_us", bench::context_number(omp_floor_seconds() * 1e6));
  benchmark::RegisterBenchmark("overhead/omp_region", BM_OverheadOmpRegion)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("overhead/sim_launch", BM_OverheadSimLaunch)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  for (const DecodeVersion& version : decode_versions()) {
    if (version.backend != Backend::cpu || version.chapter != 3 || version.input != KvDtype::fp32) continue;
    auto* bench = benchmark::RegisterBenchmark(("overhead_decode_fp32/" + version.name).c_str(), BM_DecodeOverhead,
                                               &version);
    bench->ArgName("L")->UseManualTime()->Unit(benchmark::kMicrosecond);
    for (const int64_t L : {1, 4, 16, 64, 256, 1024, 4096, 16384}) bench->Arg(L);
  }
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
  register_overhead_benchmarks();
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
