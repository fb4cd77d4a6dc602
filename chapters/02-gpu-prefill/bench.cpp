// Chapter 02 benchmark: prefill attention swept over seq_len L = 64 … 8192 and head_dim d = 64,
// 128 (4 query heads, 4 KV heads, non-causal, dense FLOP convention), plus a causal sweep at
// d = 128 (L = 512, 2048, 8192) counted in useful FLOPs (2·d·L·(L+1) per head), for
//  - every CPU version of chapters 01–02 (cpu/naive, cpu/blocked, cpu/openblas), always;
//  - every cuda/... version (cuda/naive, cuda/tiled, cuda/cublas, cuda/cublas_fp16,
//    cuda/cublas_bf16) when a GPU is present (the cuda backend built by nvcc and a device
//    visible); otherwise one line on stderr says why they were skipped.
// The sim backend is never benchmarked: the emulator runs CUDA threads as CPU fibers, so its
// times say nothing about a GPU (it is for correctness: ctest -L sim).
//
//   ./inferlab bench ch02                                   the whole sweep (~70 s on 2 cores)
//   ./inferlab bench ch02 --benchmark_filter='L:2048/d:128' side by side at one size
//   ./inferlab bench ch02 --benchmark_filter=cuda/          the GPU versions only
//   ./inferlab bench ch02 --benchmark_out=build/ch02.json   … and JSON for tools/plot_roofline.py
// (or build/default/chapters/bench_ch02 with the same flags). On a shared machine compare the
// best_GFLOP/s columns, or add --benchmark_repetitions=5. tools/gpu-check.sh runs this on a GPU
// and tabulates the result (tools/gpu_bench_report.py).
//
// CPU versions: each call on host tensors timed with a steady clock. cpu/naive is skipped above
// L = 2048: it runs at a few GFLOP/s, so L = 8192 would take minutes per call.
//
// GPU versions: timed at the device level (kernels/timing/cuda_timing.h): inputs already in
// device memory, scratch and cuBLAS handle allocated once, warm-up calls, then as many calls as
// the benchmark asks for between two CUDA events. The host-tensor entry points that the tests
// use would mostly time PCIe copies and cudaMalloc. Bytes per element: 4 for fp32 versions, 2
// for cuda/cublas_fp16 and cuda/cublas_bf16 (so AI_unfused counts 16-bit scores; those versions
// really keep S in fp32 and P in 16 bits, 12 bytes per score, AI → d/3: lesson §6). The
// percentages refer to the GPU's ceilings, which this binary measures at start-up (recorded in
// the JSON context as gpu_*): the compute roof is the cuBLAS SGEMM rate (fp32 versions) or the
// fp16 GemmEx rate (16-bit versions) at n = 8192, the bandwidth is a device-to-device
// cudaMemcpy. So peak_pct is the % of that GEMM rate; it is also set as gemm_pct, for the two GPU
// goals of this chapter: cuda/cublas ≥ 50% of that GEMM rate at L ≥ 2048, and cuda/tiled ≥ 5×
// cuda/naive (unmeasured until a GPU run). best_* equal the mean for GPU versions (one event
// pair per batch).
//
// Counters (chapters/bench_counters.h): FLOPs, bytes and AI under the article's model (L² scores
// once) and the unfused model (~4·L²), GFLOP/s, GB/s, the roof at each AI and the percentage of
// it reached, and the percentage of the peak.
#include <benchmark/benchmark.h>

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

constexpr int64_t kHeads = 4, kKvHeads = 4;
constexpr int64_t kNaiveMaxSeqLen = 2048;

void BM_Prefill(benchmark::State& state, const AttentionVersion* version, bool causal) {
  const int64_t L = state.range(0), d = state.range(1);
  const bench::CallTiming timing = bench::time_prefill(state, version->run, {kHeads, kKvHeads, L, d}, causal);
  bench::set_prefill_counters(state, {kHeads, kKvHeads, L, d}, timing, 4.0,
                              causal ? FlopConvention::causal_useful : FlopConvention::dense);
  state.SetLabel(causal ? version->name + " causal" : version->name);
}

// The sweep of this file's comment, up to @p max_seq_len, on one registered benchmark.
void add_sweep(benchmark::internal::Benchmark* bench, bool causal, int64_t max_seq_len) {
  bench->ArgNames({"L", "d"})->UseManualTime()->Unit(benchmark::kMillisecond);
  for (int64_t L = 64; L <= max_seq_len; L *= 2) {
    if (causal && L != 512 && L != 2048 && L != 8192) continue;
    for (const int64_t d : {64, 128})
      if (!causal || d == 128) bench->Args({L, d});
  }
}

#if INFERLAB_WITH_CUDA

// The GPU's ceilings as a Roofline for bench_counters.h: compute = the GEMM rate of the
// version's precision, bandwidth = device-to-device copy.
struct GpuRooflines {
  DeviceCeilings ceilings;
  Roofline fp32;  // peak = cuBLAS SGEMM
  Roofline fp16;  // peak = cuBLAS GemmEx, fp16 inputs (bf16 runs on the same tensor cores)
};

void BM_PrefillDevice(benchmark::State& state, const AttentionVersion* version, bool causal, const GpuRooflines* gpu) {
  const int64_t L = state.range(0), d = state.range(1);
  const AttentionShape shape{kHeads, kKvHeads, L, d, causal};
  const std::optional<double> timed = bench::time_device_calls(
      state, [&](int warmup, int calls) { return cuda::seconds_per_call(version->name, shape, warmup, calls); });
  if (!timed) return;
  const double seconds = *timed;
  const bool fp32 = version->precision == Precision::fp32;
  const Roofline& roofline = fp32 ? gpu->fp32 : gpu->fp16;
  bench::set_prefill_counters(state, {kHeads, kKvHeads, L, d}, {seconds, seconds}, fp32 ? 4.0 : 2.0,
                              causal ? FlopConvention::causal_useful : FlopConvention::dense, roofline);
  state.counters["gemm_pct"] = state.counters["peak_pct"];
  state.SetLabel(causal ? version->name + " causal" : version->name);
}

// Measures the GPU's ceilings, records them in the context and registers every cuda/... version.
// Returns "" or why the GPU versions were not registered.
std::string register_gpu_benchmarks() {
  static GpuRooflines gpu;
  try {
    gpu.ceilings = bench::measure_gpu_ceilings();
  } catch (const std::exception& error) {
    return std::string("measuring the GPU's ceilings failed: ") + error.what();
  }
  gpu.fp32 = bench::gpu_roofline(gpu.ceilings.sgemm_gflops, gpu.ceilings.copy_gbs);
  gpu.fp16 = bench::gpu_roofline(gpu.ceilings.hgemm_gflops, gpu.ceilings.copy_gbs);
  benchmark::AddCustomContext("gpu_ridge_point_fp32", bench::context_number(gpu.fp32.ridge_point()));
  benchmark::AddCustomContext("gpu_ridge_point_fp16", bench::context_number(gpu.fp16.ridge_point()));
  benchmark::AddCustomContext(
      "gpu_roofline",
      "cuda/* rows: peak = cuBLAS GEMM rate at n = gpu_gemm_size (SGEMM for fp32 versions, fp16 GemmEx for "
      "fp16/bf16), bandwidth = device-to-device cudaMemcpy (read + write); gemm_pct = peak_pct; bytes per element "
      "4 (fp32) or 2 (fp16/bf16); timed with CUDA events at the device level");
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != Backend::cuda || version.chapter > 2) continue;
    for (const bool causal : {false, true}) {
      const std::string family = causal ? "prefill_causal/" : "prefill/";
      add_sweep(benchmark::RegisterBenchmark((family + version.name).c_str(), BM_PrefillDevice, &version, causal, &gpu),
                causal, 8192);
    }
  }
  return "";
}

#endif  // INFERLAB_WITH_CUDA

void register_benchmarks() {
  bench::add_roofline_context(
      "prefill/*: dense 4*L*L*d per head, non-causal; prefill_causal/*: useful 2*d*L*(L+1) per head, causal");
  benchmark::AddCustomContext("cpu_kernels_isa", simd::kIsa);  // what cpu/blocked was compiled for
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != Backend::cpu || version.chapter > 2) continue;
    const int64_t max_seq_len = version.name == "cpu/naive" ? kNaiveMaxSeqLen : 8192;
    for (const bool causal : {false, true}) {
      const std::string family = causal ? "prefill_causal/" : "prefill/";
      add_sweep(benchmark::RegisterBenchmark((family + version.name).c_str(), BM_Prefill, &version, causal), causal,
                max_seq_len);
    }
  }
  std::string skipped = backend_unavailable_reason(Backend::cuda);
#if INFERLAB_WITH_CUDA
  if (skipped.empty()) skipped = register_gpu_benchmarks();
#endif
  if (!skipped.empty()) std::cerr << "bench_ch02: cuda/... versions skipped: " << skipped << "\n";
  benchmark::AddCustomContext("cuda_versions", skipped.empty() ? "benchmarked" : "skipped: " + skipped);
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_benchmarks(argc, argv, register_benchmarks);
}
