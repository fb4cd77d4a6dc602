// Chapter 04 benchmark: one decode step over an INT8 KV cache against the same step over fp16
// and fp32 caches, side by side at the same shape in one run: 8 query heads, 8 KV heads (MHA),
// head_dim 128, every sequence holding L tokens, for
//  - cpu/decode_int8_simd with per-token K scales (family decode_int8_per_token/...) and with
//    per-channel K scales (decode_int8_per_channel/...), fp32 scales;
//  - chapter 03's cpu/decode_simd over an fp16 and an fp32 cache (decode_fp16/..., decode_fp32/...);
//  at L × batch = 2048 × 4, 8192 × 4, 32768 × 4 and the point that streams from DRAM, families
//  decode_8xllc_*: L = 32768 and the smallest batch whose INT8 cache is ≥ 8× the last-level
//  cache the OS reports — capped so that the fp32 cache stays ≤ 6 GiB (the cap wins on this VM,
//  whose OS reports a 480 MiB L3: batch 24, fp32 6 GiB, fp16 3 GiB, INT8 1.55 GiB; cache_x_llc
//  says what ran). The 8× LLC point also times the INT8 cache with fp16 scales
//  (decode_8xllc_int8_per_token_fp16scales): 2 bytes less per row.
//  - cuda/decode_int8 (both K scalings) and cuda/decode (fp16, fp32) timed at the device level
//    when a GPU is present (kernels/timing/cuda_timing.h: the cache in device memory, CUDA
//    events); percentages refer to the GPU's device-to-device copy bandwidth. The bar for a GPU
//    (unmeasured so far): INT8 ≥ 1.7× fp16 at batch ≥ 8, L ≥ 4096 — the byte ratio is 1.94×, so
//    1.7× means 88% of it. Without a GPU one line on stderr says why they were skipped.
// After the run a table prints, per shape, the time of each cache and the speed-ups
// int8/fp16 and int8/fp32 (t_fp16 / t_int8: > 1 means INT8 is faster), from the fastest call of
// each benchmark in this run. The bars the lesson checks at the DRAM point: int8/fp16 ≥ 1.6× and
// int8/fp32 ≥ 2.5× (byte ratios 1.94× and 3.88×); measured medians 1.93–2.00× and 3.36–3.47×
// (chapters/04-int8-kv-cache/README.md §4).
//
//   ./inferlab bench ch04                                           the whole run (~1.5 min)
//   ./inferlab bench ch04 --benchmark_filter=8xllc --benchmark_repetitions=3   the DRAM point only
//   ./inferlab bench ch04 --benchmark_out=build/ch04.json --benchmark_out_format=json
//
// Counters (chapters/bench_counters.h, set_decode_counters): FLOPs, bytes (int8 rows + scales
// + fp32 q and out; fp16/fp32: K, V, q and out — decode_step_cost), AI, GFLOP/s, GB/s,
// read_pct (% of the measured read bandwidth), best_* from the fastest call, cache_MiB
// (K + V + scales), llc_MiB, cache_x_llc. Memory: one cache at a time, at most 6 GiB.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/config.h"
#include "chapters/04-int8-kv-cache/random_int8_cache.h"
#include "chapters/bench_calls.h"
#include "common/rng.h"
#include "kernels/primitives/cpu_simd.h"
#include "kernels/timing/cuda_timing.h"
#include "kernels/registry.h"

namespace {

using namespace inferlab;

constexpr int64_t kHeads = 8, kKvHeads = 8, kHeadDim = 128;
constexpr int64_t kLongContext = 32768;
constexpr double kMaxFp32CacheBytes = 6.0 * 1073741824.0;  // the 8× LLC point's cap (fp32 K + V)

// The caches compared, in table order.
enum class Kind { fp32, fp16, int8_per_token, int8_per_channel, int8_per_token_fp16scales };
constexpr Kind kKinds[] = {Kind::fp32, Kind::fp16, Kind::int8_per_token, Kind::int8_per_channel,
                           Kind::int8_per_token_fp16scales};

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::fp32:
      return "fp32";
    case Kind::fp16:
      return "fp16";
    case Kind::int8_per_token:
      return "int8_per_token";
    case Kind::int8_per_channel:
      return "int8_per_channel";
    default:
      return "int8_per_token_fp16scales";
  }
}

bool is_int8(Kind kind) {
  return kind != Kind::fp32 && kind != Kind::fp16;
}

// K + V bytes of a chapter-03 cache of @p batch sequences of @p seq_len tokens.
double fp_cache_bytes(int64_t batch, int64_t seq_len, KvDtype dtype) {
  return bench::kv_cache_bytes({batch, kKvHeads, seq_len, kHeadDim}, dtype);
}

// The batch of the 8× LLC point: the smallest whose INT8 cache at kLongContext is ≥ 8× LLC,
// capped so that the fp32 cache of the same shape stays ≤ kMaxFp32CacheBytes.
int64_t batch_for_8x_llc() {
  const double int8_per_sequence = fp_cache_bytes(1, kLongContext, KvDtype::fp32) / 4.0;
  const int64_t wanted = int64_t(std::ceil(8.0 * double(last_level_cache_bytes()) / int8_per_sequence));
  const int64_t cap = int64_t(kMaxFp32CacheBytes / fp_cache_bytes(1, kLongContext, KvDtype::fp32));
  return std::max<int64_t>(1, std::min(wanted, cap));
}

// The fastest call of each (shape, cache) in this run, for the closing table.
struct Measured {
  double best_seconds = std::numeric_limits<double>::infinity();
  double cache_mib = 0.0;
};
using ShapeKey = std::pair<int64_t, int64_t>;  // (L, batch): the table sorts by L, then batch
std::map<ShapeKey, std::map<int, Measured>>& results() {
  static std::map<ShapeKey, std::map<int, Measured>> table;
  return table;
}

void record(int64_t L, int64_t batch, Kind kind, const bench::CallTiming& timing, double cache_bytes) {
  Measured& m = results()[{L, batch}][int(kind)];
  if (timing.best_seconds > 0.0) m.best_seconds = std::min(m.best_seconds, timing.best_seconds);
  m.cache_mib = cache_bytes / 1048576.0;
}

void BM_DecodeFp(benchmark::State& state, const DecodeVersion* version, Kind kind) {
  const int64_t L = state.range(0), batch = state.range(1);
  const bench::CallTiming timing =
      bench::time_decode(state, version->run, {batch, kKvHeads, L, kHeadDim}, version->input, kHeads);
  record(L, batch, kind, timing, fp_cache_bytes(batch, L, version->input));
  state.SetLabel(version->name + " " + kind_name(kind));
}

void BM_DecodeInt8(benchmark::State& state, const DecodeVersion* version, Kind kind) {
  const int64_t L = state.range(0), batch = state.range(1);
  Rng rng(Rng::fresh_seed());
  const KeyScaling scaling = kind == Kind::int8_per_channel ? KeyScaling::per_channel : KeyScaling::per_token;
  const ScaleDtype scales = kind == Kind::int8_per_token_fp16scales ? ScaleDtype::fp16 : ScaleDtype::fp32;
  const KvCache cache = random_full_int8_cache({batch, kKvHeads, L, kHeadDim}, scaling, scales, rng);
  const Tensor<float> q = rng.normal_tensor({batch, kHeads, kHeadDim});
  Tensor<float> out({batch, kHeads, kHeadDim});
  const bench::CallTiming timing = bench::time_calls(state, [&] { version->run(q, cache, out); });
  bench::set_decode_counters(state, decode_step_cost(cache, kHeads), timing, double(cache.bytes()));
  state.counters["scale_MiB"] = double(cache.scale_bytes()) / 1048576.0;
  record(L, batch, kind, timing, double(cache.bytes()));
  state.SetLabel(version->name + " " + kind_name(kind));
}

benchmark::internal::Benchmark* shaped(benchmark::internal::Benchmark* bench, int64_t L, int64_t batch) {
  return bench->ArgNames({"L", "batch"})->UseManualTime()->Unit(benchmark::kMillisecond)->Args({L, batch});
}

// Registers every CPU cache at one shape, next to each other (so a run compares them under the
// same conditions); @p prefix is "decode_" or "decode_8xllc_".
void register_shape(const std::string& prefix, int64_t L, int64_t batch, bool with_fp16_scales) {
  const DecodeVersion& fp32 = find_decode_version("cpu/decode_simd", Backend::cpu, KvDtype::fp32);
  const DecodeVersion& fp16 = find_decode_version("cpu/decode_simd", Backend::cpu, KvDtype::fp16);
  for (const Kind kind : kKinds) {
    if (kind == Kind::int8_per_token_fp16scales && !with_fp16_scales) continue;
    if (!is_int8(kind)) {
      const DecodeVersion* version = kind == Kind::fp32 ? &fp32 : &fp16;
      shaped(benchmark::RegisterBenchmark((prefix + kind_name(kind) + "/" + version->name).c_str(), BM_DecodeFp,
                                          version, kind),
             L, batch);
      continue;
    }
    for (const DecodeVersion& version : decode_versions()) {
      if (version.backend != Backend::cpu || version.input != KvDtype::int8) continue;
      shaped(benchmark::RegisterBenchmark((prefix + kind_name(kind) + "/" + version.name).c_str(), BM_DecodeInt8,
                                          &version, kind),
             L, batch);
    }
  }
}

constexpr int64_t kSweep[][2] = {{2048, 4}, {8192, 4}, {32768, 4}};

#if INFERLAB_WITH_CUDA

// cuda/decode (fp16 / fp32 cache) or cuda/decode_int8 (per-token / per-channel K) at the device level.
void BM_DecodeDevice(benchmark::State& state, Kind kind, const Roofline* gpu) {
  const int64_t L = state.range(0), batch = state.range(1);
  const DecodeShape shape{batch, kHeads, kKvHeads, L, kHeadDim};
  const std::optional<double> timed = bench::time_device_calls(state, [&](int warmup, int calls) {
    return is_int8(kind) ? cuda::decode_int8_seconds_per_call(
                               kind == Kind::int8_per_channel ? KeyScaling::per_channel : KeyScaling::per_token, shape,
                               L, warmup, calls)
                         : cuda::decode_seconds_per_call(kind == Kind::fp16 ? KvDtype::fp16 : KvDtype::fp32, shape, L,
                                                         warmup, calls);
  });
  if (!timed) return;
  const double seconds = *timed;
  const double element_bytes = kind == Kind::fp32 ? 4.0 : kind == Kind::fp16 ? 2.0 : 1.0;
  const double rows = double(batch * kKvHeads * L);
  const double cache_bytes = 2.0 * rows * double(kHeadDim) * element_bytes + (is_int8(kind) ? 8.0 * rows : 0.0);
  Cost cost;
  cost.flops = double(batch * kHeads) * 4.0 * double(L * kHeadDim);
  cost.bytes = cache_bytes + double(batch * kHeads * kHeadDim) * 8.0;
  bench::set_decode_counters(state, cost, {seconds, seconds}, cache_bytes, *gpu);
  state.counters["copy_pct"] = state.counters["read_pct"];
  state.SetLabel(std::string(is_int8(kind) ? "cuda/decode_int8 " : "cuda/decode ") + kind_name(kind));
}

std::string register_gpu_benchmarks() {
  static Roofline gpu;
  try {
    const DeviceCeilings ceilings = bench::measure_gpu_ceilings();
    gpu = bench::gpu_roofline(ceilings.sgemm_gflops, ceilings.copy_gbs);
  } catch (const std::exception& error) {
    return std::string("measuring the GPU's ceilings failed: ") + error.what();
  }
  for (const int64_t batch : {8, 32})
    for (const int64_t L : {4096, 16384})
      for (const Kind kind : {Kind::fp32, Kind::fp16, Kind::int8_per_token, Kind::int8_per_channel})
        shaped(benchmark::RegisterBenchmark((std::string("gpu_decode_") + kind_name(kind) + "/cuda").c_str(),
                                            BM_DecodeDevice, kind, &gpu),
               L, batch);
  return "";
}

#endif  // INFERLAB_WITH_CUDA

void register_benchmarks() {
  bench::add_roofline_context("decode_*: 4*L*d per query head (one new token per sequence)",
                              "bytes/AI: K and V of every cached token (+ INT8 scales) + q + out; read_pct: GB/s as "
                              "% of roofline_read_gbs");
  benchmark::AddCustomContext("cpu_kernels_isa", simd::kIsa);
  benchmark::AddCustomContext("decode_shape", "8 heads, 8 KV heads, head_dim 128, every sequence full (L tokens)");
  for (const auto& point : kSweep) register_shape("decode_", point[0], point[1], false);
  register_shape("decode_8xllc_", kLongContext, batch_for_8x_llc(), true);
  std::string skipped = backend_unavailable_reason(Backend::cuda);
#if INFERLAB_WITH_CUDA
  if (skipped.empty()) skipped = register_gpu_benchmarks();
#endif
  if (!skipped.empty()) std::cerr << "bench_ch04: cuda/decode_int8 and cuda/decode skipped: " << skipped << "\n";
  benchmark::AddCustomContext("cuda_versions", skipped.empty() ? "benchmarked" : "skipped: " + skipped);
}

// The side-by-side table: per shape, each cache's fastest call and the INT8 speed-ups.
void print_speedups() {
  const auto& by_shape = results();
  if (by_shape.empty()) return;
  const double llc_mib = double(last_level_cache_bytes()) / 1048576.0;
  std::printf("\nINT8 vs fp16 vs fp32 cache, one decode step, fastest call of this run (LLC %.0f MiB as reported)\n",
              llc_mib);
  std::printf("%-22s %-26s %10s %8s %10s %12s %12s\n", "shape", "cache", "MiB", "x LLC", "ms/step", "int8/fp16",
              "int8/fp32");
  for (const auto& [shape, row] : by_shape) {
    const auto time = [&](Kind kind) {
      const auto found = row.find(int(kind));
      return found == row.end() ? 0.0 : found->second.best_seconds;
    };
    const std::string label = "L " + std::to_string(shape.first) + " x batch " + std::to_string(shape.second);
    for (const Kind kind : kKinds) {
      const auto found = row.find(int(kind));
      if (found == row.end() || !std::isfinite(found->second.best_seconds)) continue;
      const double t = found->second.best_seconds;
      std::printf("%-22s %-26s %10.1f %8.2f %10.2f", label.c_str(), kind_name(kind), found->second.cache_mib,
                  found->second.cache_mib / llc_mib, 1e3 * t);
      if (is_int8(kind) && time(Kind::fp16) > 0.0 && time(Kind::fp32) > 0.0) {
        std::printf(" %11.2fx %11.2fx\n", time(Kind::fp16) / t, time(Kind::fp32) / t);
      } else {
        std::printf("\n");
      }
    }
  }
  std::printf("targets (cache >= 8x LLC): int8/fp16 >= 1.6x, int8/fp32 >= 2.5x\n");
}

}  // namespace

int main(int argc, char** argv) {
  const int status = bench::run_benchmarks(argc, argv, register_benchmarks);
  print_speedups();
  return status;
}
