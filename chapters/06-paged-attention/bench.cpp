// Chapter 06 benchmark: what the block table costs a decode step, and what paging saves.
//
// 1. Time (Google Benchmark): one decode step of cpu/decode_simd (fp16 cache) and
//    cpu/decode_int8_simd (INT8, per-token fp32 scales) on the same random cache held
//    contiguously (block 0) and paged at block sizes 1, 8, 16, 32, 128, its blocks handed out
//    in scattered order (to_paged(): no block follows its logical predecessor, so every block
//    boundary is a jump in memory). Two points: in cache (batch 1, L = 512: the fp16 cache is
//    2 MiB, the INT8 one 1 MiB) and 8× the last-level cache the OS reports (L = 32768, the batch
//    that reaches 8× LLC, as chapter 03's decode_8xllc point). 8 query heads, 8 KV heads,
//    head_dim 128. Each benchmark name carries the point and the block size, so one run times
//    every layout side by side; run with --benchmark_repetitions=5 and read the medians.
//    On a GPU (nvcc build), family paged_decode_gpu_fp16/cuda/decode: the same comparison for
//    cuda/decode at the device level (kernels/timing: cache resident, CUDA events), L = 8192 at
//    batch 16 and L = 32768 at batch 4 (512 MiB of fp16 cache each), block 0 = contiguous.
//    Without a GPU one line on stderr says why they were skipped.
//    And the machine's own answer (family random_chunks): 512 MiB on huge pages read by both
//    cores in pieces of 1–64 KiB taken in random order, against one sequential read — the
//    bandwidth this memory system gives the access pattern a paged cache makes. In the pool
//    layout [block][KV head][token][d], one (sequence, KV head) reads pieces of block_size · d ·
//    element bytes (block 16, d 128: 4 KiB of fp16, 2 KiB of INT8), one per block.
// 2. Memory (printed before the timings): the share of reserved KV bytes holding tokens and the
//    sequences that fit in 16 GiB, contiguous max-length vs paged, for LLaMA-7B (fp16 KV) and
//    the ShareGPT lengths of analysis/kv_capacity.h — the table of
//    `./inferlab analyze --kv-waste`.
//
//   ./inferlab bench ch06 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   ./inferlab bench ch06 --benchmark_filter=8xllc           the DRAM point only
//   ./inferlab bench ch06 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//       --benchmark_out=docs/plots/ch06-bench.json --benchmark_out_format=json
//                                                             (one line: what the lesson's table comes from)
//
// Counters (chapters/bench_counters.h, set_decode_counters): FLOPs, bytes (decode_step_cost:
// the same for both layouts — paging moves no extra cache bytes, only block-table entries),
// AI, GB/s, read_pct (% of the measured read bandwidth), best_*; block_size (0 = contiguous).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <vector>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "analysis/inference_cost.h"
#include "analysis/kv_capacity.h"
#include "analysis/model_shape.h"
#include "chapters/03-kv-cache-decode/random_cache.h"
#include "chapters/04-int8-kv-cache/random_int8_cache.h"
#include "chapters/bench_calls.h"
#include "common/config.h"
#include "common/huge_pages.h"
#include "kernels/kv/kv_factories.h"
#include "kernels/primitives/cpu_simd.h"
#include "kernels/registry.h"

namespace {

using namespace inferlab;

constexpr int64_t kHeads = 8, kKvHeads = 8, kHeadDim = 128;
constexpr int64_t kInCacheLength = 512, kLongContext = 32768;
constexpr double kMaxCacheBytes = 4.0 * 1073741824.0;  // the 8× LLC point's cap (K + V)

struct Point {
  std::string name;  // "incache" or "8xllc"
  int64_t seq_len, batch;
};

// The batch whose cache at kLongContext is ≥ 8× LLC (capped), for @p dtype.
int64_t batch_for_8x_llc(KvDtype dtype) {
  const double per_sequence = bench::kv_cache_bytes({1, kKvHeads, kLongContext, kHeadDim}, dtype);
  const double wanted = 8.0 * double(last_level_cache_bytes());
  return std::max<int64_t>(1, int64_t(std::ceil(std::min(wanted, kMaxCacheBytes) / per_sequence)));
}

// A full random cache of @p dtype: fp16 (chapter 03's) or INT8 with per-token fp32 scales.
KvCache random_cache(const KvCacheShape& shape, KvDtype dtype, Rng& rng) {
  if (dtype == KvDtype::int8) return random_full_int8_cache(shape, KeyScaling::per_token, ScaleDtype::fp32, rng);
  return random_full_cache(shape, dtype, rng);
}

void BM_PagedDecode(benchmark::State& state, const DecodeVersion* version, Point point, BlockOrder order) {
  const int64_t block_size = state.range(0);
  Rng rng(Rng::fresh_seed());
  const KvCacheShape shape{point.batch, kKvHeads, point.seq_len, kHeadDim};
  KvCache cache = random_cache(shape, version->input, rng);
  if (block_size > 0) cache = to_paged(cache, block_size, rng.seed(), order);
  const Tensor<float> q = rng.normal_tensor({point.batch, kHeads, kHeadDim});
  Tensor<float> out(q.shape());
  const bench::CallTiming timing = bench::time_calls(state, [&] { version->run(q, cache, out); });
  bench::set_decode_counters(state, decode_step_cost(cache, kHeads), timing,
                             bench::kv_cache_bytes(shape, version->input));
  state.counters["block_size"] = double(block_size);
  state.SetLabel(version->name + " " + std::string(to_string(version->input)) +
                 (block_size == 0 ? ", contiguous"
                                  : ", paged, block " + std::to_string(block_size) +
                                        (order == BlockOrder::in_order ? ", blocks in order" : ", scattered")));
}

#if INFERLAB_WITH_CUDA

void BM_PagedDecodeDevice(benchmark::State& state, const Roofline* gpu) {
  const int64_t block_size = state.range(0), L = state.range(1), batch = state.range(2);
  const DecodeShape shape{batch, kHeads, kKvHeads, L, kHeadDim};
  const std::optional<double> timed = bench::time_device_calls(state, [&](int warmup, int calls) {
    return block_size > 0 ? cuda::paged_decode_seconds_per_call(KvDtype::fp16, shape, L, block_size, warmup, calls)
                          : cuda::decode_seconds_per_call(KvDtype::fp16, shape, L, warmup, calls);
  });
  if (!timed) return;
  Cost cost = decode_attention_cost({kHeads, kKvHeads, L, kHeadDim}, 2.0);
  cost.flops *= double(batch);
  cost.bytes *= double(batch);
  bench::set_decode_counters(state, cost, {*timed, *timed}, bench::kv_cache_bytes({batch, kKvHeads, L, kHeadDim},
                                                                                 KvDtype::fp16), *gpu);
  state.counters["copy_pct"] = state.counters["read_pct"];
  state.counters["block_size"] = double(block_size);
  state.SetLabel(block_size > 0 ? "cuda/decode fp16, paged, block " + std::to_string(block_size)
                                : "cuda/decode fp16, contiguous");
}

// Measures the GPU's ceilings and registers the device-level paged decode. "" or why not.
std::string register_gpu_benchmarks() {
  static Roofline gpu;
  try {
    const DeviceCeilings ceilings = bench::measure_gpu_ceilings();
    gpu = bench::gpu_roofline(ceilings.sgemm_gflops, ceilings.copy_gbs);
  } catch (const std::exception& error) {
    return std::string("measuring the GPU's ceilings failed: ") + error.what();
  }
  benchmark::AddCustomContext("gpu_roofline",
                              "paged_decode_gpu rows: read_pct = copy_pct = GB/s as % of a device-to-device "
                              "cudaMemcpy (read + write); timed with CUDA events at the device level");
  auto* bench = benchmark::RegisterBenchmark("paged_decode_gpu_fp16/cuda/decode", BM_PagedDecodeDevice, &gpu);
  bench->ArgNames({"block", "L", "batch"})->UseManualTime()->Unit(benchmark::kMillisecond);
  for (const auto& [L, batch] : {std::pair<int64_t, int64_t>{8192, 16}, {32768, 4}})
    for (const int64_t block : {0, 1, 8, 16, 32, 128}) bench->Args({block, L, batch});
  return "";
}

#endif  // INFERLAB_WITH_CUDA

// Reads 512 MiB in pieces of state.range(0) bytes taken in random order (0: 1 MiB pieces in
// order — each core streams its half), both cores (OpenMP, static split), summing floats.
void BM_RandomChunks(benchmark::State& state) {
  constexpr size_t kBytes = size_t(512) << 20;
  const bool sequential = state.range(0) == 0;
  const size_t chunk = sequential ? size_t(1) << 20 : size_t(state.range(0));
  HugePageBuffer<float> pool(kBytes / sizeof(float), 1.0f);
  const int64_t pieces = int64_t(kBytes / chunk);
  std::vector<int64_t> order(static_cast<size_t>(pieces));
  for (int64_t i = 0; i < pieces; ++i) order[size_t(i)] = i;
  Rng rng(Rng::fresh_seed());
  if (!sequential) std::shuffle(order.begin(), order.end(), rng.engine());
  const int64_t floats = int64_t(chunk / sizeof(float));
  float sink = 0.0f;
  const bench::CallTiming timing = bench::time_calls(state, [&] {
    float total = 0.0f;
#pragma omp parallel reduction(+ : total)
    {
      simd::Vec acc0 = simd::broadcast(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
#pragma omp for schedule(static)
      for (int64_t i = 0; i < pieces; ++i) {
        const float* f = pool.data() + order[size_t(i)] * floats;
        for (int64_t j = 0; j + 4 * simd::kLanes <= floats; j += 4 * simd::kLanes) {
          acc0 = simd::add(acc0, simd::load(f + j));
          acc1 = simd::add(acc1, simd::load(f + j + simd::kLanes));
          acc2 = simd::add(acc2, simd::load(f + j + 2 * simd::kLanes));
          acc3 = simd::add(acc3, simd::load(f + j + 3 * simd::kLanes));
        }
      }
      total += simd::reduce_add(simd::add(simd::add(acc0, acc1), simd::add(acc2, acc3)));
    }
    sink += total;
  });
  benchmark::DoNotOptimize(sink);
  state.counters["GB/s"] = double(kBytes) / timing.mean_seconds / 1e9;
  state.counters["best_GB/s"] = double(kBytes) / timing.best_seconds / 1e9;
  state.counters["chunk_KiB"] = double(chunk) / 1024.0;
  state.SetLabel(sequential ? "sequential (each core streams its half)" : "random pieces");
}

void print_memory_table() {
  const analysis::KvWasteSettings settings =
      analysis::kv_waste_settings(analysis::find_model("llama-7b"), analysis::KvFormat::fp16);
  std::cout << "== memory: contiguous max-length reservation vs paged blocks (analysis/kv_capacity.h)\n";
  analysis::print_kv_waste_report(std::cout, analysis::kv_waste_report(settings));
  std::cout << "\n== time: one decode step, contiguous (block_size 0) vs paged over scattered blocks\n";
}

void register_benchmarks() {
  bench::add_roofline_context("paged_decode_*: 4*L*d per query head (one new token per sequence)",
                              "bytes/AI: K and V of every cached token + q + out (decode_step_cost, the same for "
                              "both layouts); read_pct: GB/s as % of roofline_read_gbs");
  benchmark::AddCustomContext("cpu_kernels_isa", simd::kIsa);
  benchmark::AddCustomContext("decode_shape", "8 heads, 8 KV heads, head_dim 128, every sequence full (L tokens); "
                                              "paged blocks in scattered order (to_paged)");
  print_memory_table();
  for (const DecodeVersion& version : decode_versions()) {
    if (version.backend != Backend::cpu) continue;
    const bool simd = version.name == "cpu/decode_simd" && version.input == KvDtype::fp16;
    const bool int8 = version.name == "cpu/decode_int8_simd";
    if (!simd && !int8) continue;
    for (const Point& point : {Point{"incache", kInCacheLength, 1},
                               Point{"8xllc", kLongContext, batch_for_8x_llc(version.input)}}) {
      const std::string name = "paged_decode_" + point.name + "_" + std::string(to_string(version.input)) + "/" +
                               version.name + "/L:" + std::to_string(point.seq_len) +
                               "/batch:" + std::to_string(point.batch);
      benchmark::RegisterBenchmark(name.c_str(), BM_PagedDecode, &version, point, BlockOrder::scattered)
          ->ArgName("block")
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Args({0})
          ->Args({1})
          ->Args({8})
          ->Args({16})
          ->Args({32})
          ->Args({128});
      // The same block tables with the blocks adjacent in memory: what the indirection itself
      // costs, apart from where the blocks are.
      benchmark::RegisterBenchmark((name + "/in_order").c_str(), BM_PagedDecode, &version, point, BlockOrder::in_order)
          ->ArgName("block")
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Args({1})
          ->Args({16})
          ->Args({128});
    }
  }
  benchmark::RegisterBenchmark("random_chunks", BM_RandomChunks)
      ->ArgName("bytes")
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Args({0})
      ->Args({1024})
      ->Args({2048})
      ->Args({4096})
      ->Args({8192})
      ->Args({16384})
      ->Args({32768})
      ->Args({65536});
  std::string skipped = backend_unavailable_reason(Backend::cuda);
#if INFERLAB_WITH_CUDA
  if (skipped.empty()) skipped = register_gpu_benchmarks();
#endif
  if (!skipped.empty()) std::cerr << "bench_ch06: cuda/decode skipped: " << skipped << "\n";
  benchmark::AddCustomContext("cuda_versions", skipped.empty() ? "benchmarked" : "skipped: " + skipped);
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_benchmarks(argc, argv, register_benchmarks);
}
