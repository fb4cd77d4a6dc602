#pragma once
/// @file bench_calls.h
/// The timed calls the chapter benchmarks share, around bench_counters.h's timer: a prefill or a
/// decode version timed on fresh random inputs (a new seed per benchmark), a device-level time
/// reported for every iteration, and the GPU's ceilings (a GEMM rate and a device-to-device copy
/// bandwidth) measured once and recorded in the output's context.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>

#include "common/config.h"
#include "chapters/03-kv-cache-decode/random_cache.h"
#include "chapters/bench_counters.h"
#include "common/cost.h"
#include "common/rng.h"
#include "common/roofline.h"
#include "kernels/timing/cuda_timing.h"
#include "kernels/registry.h"
#include "kernels/registry.h"

namespace inferlab::bench {

/// Times @p run with time_calls() on fresh random Q [num_heads, L, d], K and V
/// [num_kv_heads, L, d] of @p dims (N(0, 1)), @p causal or not. The caller sets the counters.
inline CallTiming time_prefill(benchmark::State& state, const AttentionFn& run, const AttentionDims& dims,
                               bool causal) {
  Rng rng(Rng::fresh_seed());
  const int64_t L = dims.seq_len, d = dims.head_dim;
  const Tensor<float> q = rng.normal_tensor({dims.num_heads, L, d});
  const Tensor<float> k = rng.normal_tensor({dims.num_kv_heads, L, d});
  const Tensor<float> v = rng.normal_tensor({dims.num_kv_heads, L, d});
  Tensor<float> out({dims.num_heads, L, d});
  return time_calls(state, [&] {
    run(q, k, v, causal, out);
    benchmark::DoNotOptimize(out.data());
  });
}

/// K + V bytes of a contiguous cache of @p shape storing @p dtype.
inline double kv_cache_bytes(const KvCacheShape& shape, KvDtype dtype) {
  return 2.0 * double(shape.elements()) * double(bytes_per_element(dtype));
}

/// Times @p run for @p num_heads query heads on a full random cache of @p shape and @p dtype
/// (random_full_cache(): every sequence holds max_seq_len tokens) and a fresh q, and sets the
/// decode counters (decode_step_cost(), kv_cache_bytes()). Returns the timing.
inline CallTiming time_decode(benchmark::State& state, const DecodeFn& run, const KvCacheShape& shape, KvDtype dtype,
                              int64_t num_heads) {
  Rng rng(Rng::fresh_seed());
  const KvCache cache = random_full_cache(shape, dtype, rng);
  const Tensor<float> q = rng.normal_tensor({shape.batch, num_heads, shape.head_dim});
  Tensor<float> out(q.shape());
  const CallTiming timing = time_calls(state, [&] { run(q, cache, out); });
  set_decode_counters(state, decode_step_cost(cache, num_heads), timing, kv_cache_bytes(shape, dtype));
  return timing;
}

/// Untimed calls before a device-level measurement.
inline constexpr int kDeviceWarmupCalls = 2;

/// Reports @p seconds_per_call(kDeviceWarmupCalls, calls) — a device-level time of one call over
/// exactly the iterations the benchmark asked for (CUDA events) — as every iteration's time.
/// When it throws, skips the benchmark with the error's message and returns nothing.
inline std::optional<double> time_device_calls(benchmark::State& state,
                                               const std::function<double(int warmup, int calls)>& seconds_per_call) {
  double seconds = 0.0;
  try {
    seconds = seconds_per_call(kDeviceWarmupCalls, int(state.max_iterations));
  } catch (const std::exception& error) {
    state.SkipWithError(error.what());
    return std::nullopt;
  }
  for (auto _ : state) state.SetIterationTime(seconds);
  return seconds;
}

/// A GPU's Roofline for bench_counters.h: compute = @p gemm_gflops, bandwidth (read and the
/// triad roof that attainable_gflops() uses) = @p copy_gbs, the device-to-device copy rate.
inline Roofline gpu_roofline(double gemm_gflops, double copy_gbs) {
  Roofline roofline;
  roofline.peak_gflops = gemm_gflops;
  roofline.read_gbs = copy_gbs;
  roofline.triad_gbs = copy_gbs;
  return roofline;
}

#if INFERLAB_WITH_CUDA
/// Measures the GPU's ceilings (cuBLAS GEMM rates at n = 8192, a 1 GiB device-to-device copy,
/// 0.3 s each) and records them in the output's context (gpu_device, gpu_copy_gbs, gpu_copy_mib,
/// gpu_gemm_size, gpu_sgemm_gflops, gpu_hgemm_gflops). Throws what the measurement throws.
inline DeviceCeilings measure_gpu_ceilings() {
  const DeviceCeilings ceilings = cuda::measure_device_ceilings(8192, 1024.0, 0.3);
  benchmark::AddCustomContext("gpu_device", ceilings.device);
  benchmark::AddCustomContext("gpu_copy_gbs", context_number(ceilings.copy_gbs));
  benchmark::AddCustomContext("gpu_copy_mib", context_number(ceilings.copy_mib));
  benchmark::AddCustomContext("gpu_gemm_size", context_number(ceilings.gemm_size));
  benchmark::AddCustomContext("gpu_sgemm_gflops", context_number(ceilings.sgemm_gflops));
  benchmark::AddCustomContext("gpu_hgemm_gflops", context_number(ceilings.hgemm_gflops));
  return ceilings;
}
#endif

}  // namespace inferlab::bench
