#pragma once
/// @file bench_counters.h
/// What every attention benchmark (prefill and decode) does around its timer, in one place: time each call
/// with our own wall clock (Google Benchmark's rate counters are divided by its time after the
/// fact, so a "% of roofline" built from them would be wrong), set the counters the lessons and
/// tools/plot_roofline.py read, record the roofline the percentages refer to, and print a table.
///
/// Counters set by set_prefill_counters() (fp32 unless the caller says otherwise):
///   FLOPs           4·L²·d per head, dense (or 2·d·L·(L+1) with FlopConvention::causal_useful)
///   bytes, AI       the article's traffic model: Q, K, V, O and the L×L scores once
///   bytes_unfused, AI_unfused   the realistic unfused model: ~4·L² score elements of traffic
///   GFLOP/s, GB/s   FLOPs and (article) bytes divided by the measured time of one call
///   roof_GFLOP/s    min(peak, AI × triad bandwidth) at the article AI
///   roof_pct        GFLOP/s as % of roof_GFLOP/s
///   roof_pct_unfused  GFLOP/s as % of the roof at AI_unfused
///   peak_pct        GFLOP/s as % of the measured FMA peak alone
///   best_GFLOP/s, best_peak_pct   the same from the fastest single call: on a shared, noisy
///                   machine the fastest call is the most repeatable estimate of what the code
///                   can do; the mean (the columns above) is what a user waits for
///
/// Counters added by set_fused_counters() (chapter 05): bytes_fused, AI_fused (Q, K, V, O only),
/// roof_pct_fused, unfused_over_fused (the modelled traffic ratio).
///
/// Counters set by set_decode_counters() (one decode step, chapter 03):
///   FLOPs, bytes, AI  decode_step_cost(): 4·L·d FLOPs per query head; K and V of every cached
///                   token plus q and out, at the cache's bytes per element
///   GFLOP/s, GB/s   FLOPs and bytes divided by the mean time of one call
///   read_pct        GB/s as % of the measured read bandwidth (a decode step only reads, bar
///                   the tiny output; GPU rows: of the device-to-device copy bandwidth)
///   roof_GFLOP/s, roof_pct   min(peak, AI × read bandwidth) and GFLOP/s as % of it
///   best_GB/s, best_read_pct the same from the fastest call
///   cache_MiB, llc_MiB, cache_x_llc   K + V bytes of the cache, the last-level cache as the OS
///                   reports it, and their ratio: > 1 means a step streams from DRAM
/// The timed calls run with the benchmark's UseManualTime(), so its Time column is the same
/// clock the rates use. "Peak" and "triad bandwidth" are the CPU's (roofline.json) unless the
/// caller passes another Roofline: GPU benchmarks pass the GPU's measured GEMM rate and
/// device-to-device copy bandwidth instead.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common/cost.h"
#include "common/roofline.h"
#include "common/timer.h"

namespace inferlab::bench {

/// The ceilings every percentage refers to: the saved measurement (`inferlab roofline`), or a
/// fresh one when none is saved. Measured once per process.
inline const Roofline& measured_roofline() {
  static const Roofline roofline = roofline_for_benchmarks();
  return roofline;
}

/// Seconds per call measured by time_calls().
struct CallTiming {
  double mean_seconds = 0.0;  ///< mean over the timed calls
  double best_seconds = 0.0;  ///< the fastest timed call
};

/// Calls @p call once untimed (page faults, caches, thread pools), then once per benchmark
/// iteration, timing each call with a steady clock and reporting it via SetIterationTime (the
/// benchmark must be registered with UseManualTime()).
inline CallTiming time_calls(benchmark::State& state, const std::function<void()>& call) {
  call();
  double total_seconds = 0.0, best_seconds = std::numeric_limits<double>::infinity();
  for (auto _ : state) {
    const Stopwatch stopwatch;
    call();
    benchmark::ClobberMemory();
    const double seconds = stopwatch.seconds();
    state.SetIterationTime(seconds);
    total_seconds += seconds;
    best_seconds = std::min(best_seconds, seconds);
  }
  if (state.iterations() == 0) return {};
  return {total_seconds / static_cast<double>(state.iterations()), best_seconds};
}

/// Sets the prefill attention counters listed in this file's comment for calls timed as
/// @p timing on a problem of @p dims, @p bytes_per_element bytes per element. The percentages
/// refer to @p roofline: this CPU's measured one by default; a GPU benchmark passes the GPU's
/// (peak = its measured GEMM rate, bandwidth = its device-to-device copy rate).
inline void set_prefill_counters(benchmark::State& state, const AttentionDims& dims, const CallTiming& timing,
                                 double bytes_per_element = 4.0, FlopConvention flops = FlopConvention::dense,
                                 const Roofline& roofline = measured_roofline()) {
  const double seconds_per_call = timing.mean_seconds;
  const Cost article = prefill_attention_cost(dims, TrafficModel::article, bytes_per_element, flops);
  const Cost unfused = prefill_attention_cost(dims, TrafficModel::unfused, bytes_per_element, flops);
  const double gflops = seconds_per_call > 0.0 ? article.flops / seconds_per_call / 1e9 : 0.0;
  const double roof = roofline.attainable_gflops(article.arithmetic_intensity());
  const double roof_unfused = roofline.attainable_gflops(unfused.arithmetic_intensity());
  state.counters["FLOPs"] = article.flops;
  state.counters["bytes"] = article.bytes;
  state.counters["AI"] = article.arithmetic_intensity();
  state.counters["bytes_unfused"] = unfused.bytes;
  state.counters["AI_unfused"] = unfused.arithmetic_intensity();
  state.counters["GFLOP/s"] = gflops;
  state.counters["GB/s"] = seconds_per_call > 0.0 ? article.bytes / seconds_per_call / 1e9 : 0.0;
  state.counters["roof_GFLOP/s"] = roof;
  state.counters["roof_pct"] = roof > 0.0 ? 100.0 * gflops / roof : 0.0;
  state.counters["roof_pct_unfused"] = roof_unfused > 0.0 ? 100.0 * gflops / roof_unfused : 0.0;
  state.counters["peak_pct"] = roofline.peak_gflops > 0.0 ? 100.0 * gflops / roofline.peak_gflops : 0.0;
  const double best_gflops = timing.best_seconds > 0.0 ? article.flops / timing.best_seconds / 1e9 : 0.0;
  state.counters["best_GFLOP/s"] = best_gflops;
  state.counters["best_peak_pct"] = roofline.peak_gflops > 0.0 ? 100.0 * best_gflops / roofline.peak_gflops : 0.0;
}

/// Adds the fused-traffic counters (chapter 05) to those of set_prefill_counters(), same
/// arguments: bytes_fused and AI_fused under TrafficModel::fused (Q, K, V, O only: AI = L/4 in
/// fp32, L/2 in fp16, per head, dense FLOPs), roof_pct_fused (GFLOP/s as % of the roof at
/// AI_fused) and unfused_over_fused (bytes_unfused / bytes_fused: how much traffic fusion
/// removes under the models). Call it for every version, fused or not, so rows compare.
inline void set_fused_counters(benchmark::State& state, const AttentionDims& dims, const CallTiming& timing,
                               double bytes_per_element = 4.0, FlopConvention flops = FlopConvention::dense,
                               const Roofline& roofline = measured_roofline()) {
  const Cost fused = prefill_attention_cost(dims, TrafficModel::fused, bytes_per_element, flops);
  const Cost unfused = prefill_attention_cost(dims, TrafficModel::unfused, bytes_per_element, flops);
  const double gflops = timing.mean_seconds > 0.0 ? fused.flops / timing.mean_seconds / 1e9 : 0.0;
  const double roof = roofline.attainable_gflops(fused.arithmetic_intensity());
  state.counters["bytes_fused"] = fused.bytes;
  state.counters["AI_fused"] = fused.arithmetic_intensity();
  state.counters["roof_pct_fused"] = roof > 0.0 ? 100.0 * gflops / roof : 0.0;
  state.counters["unfused_over_fused"] = fused.bytes > 0.0 ? unfused.bytes / fused.bytes : 0.0;
}

/// Sets the decode counters listed in this file's comment for one step of @p cost
/// (decode_step_cost()) over a cache of @p cache_bytes (K and V), timed as @p timing. The
/// percentages refer to @p roofline's read bandwidth: this CPU's by default; a GPU benchmark
/// passes a Roofline whose read_gbs is the device-to-device copy bandwidth.
inline void set_decode_counters(benchmark::State& state, const Cost& cost, const CallTiming& timing, double cache_bytes,
                                const Roofline& roofline = measured_roofline()) {
  const auto rate = [](double amount, double seconds) { return seconds > 0.0 ? amount / seconds / 1e9 : 0.0; };
  const auto percent = [](double part, double whole) { return whole > 0.0 ? 100.0 * part / whole : 0.0; };
  const double gbs = rate(cost.bytes, timing.mean_seconds), best_gbs = rate(cost.bytes, timing.best_seconds);
  const double gflops = rate(cost.flops, timing.mean_seconds);
  const double roof = std::min(roofline.peak_gflops, cost.arithmetic_intensity() * roofline.read_gbs);
  const double llc_mib = static_cast<double>(last_level_cache_bytes()) / 1048576.0;
  state.counters["FLOPs"] = cost.flops;
  state.counters["bytes"] = cost.bytes;
  state.counters["AI"] = cost.arithmetic_intensity();
  state.counters["GFLOP/s"] = gflops;
  state.counters["GB/s"] = gbs;
  state.counters["read_pct"] = percent(gbs, roofline.read_gbs);
  state.counters["roof_GFLOP/s"] = roof;
  state.counters["roof_pct"] = percent(gflops, roof);
  state.counters["best_GB/s"] = best_gbs;
  state.counters["best_read_pct"] = percent(best_gbs, roofline.read_gbs);
  state.counters["cache_MiB"] = cache_bytes / 1048576.0;
  state.counters["llc_MiB"] = llc_mib;
  state.counters["cache_x_llc"] = cache_bytes / 1048576.0 / llc_mib;
}

/// @p value as text, for the output's context (benchmark::AddCustomContext).
inline std::string context_number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

/// The traffic model add_roofline_context() records for prefill benchmarks.
inline constexpr const char* kPrefillTrafficModel =
    "bytes/AI: article (Q,K,V,O + L*L scores once); bytes_unfused/AI_unfused: ~4*L*L score elements";

/// Records the roofline behind the percentages (and the conventions used: @p flop_convention,
/// @p traffic_model) in the benchmark output's context, so the JSON carries its own reference
/// point.
inline void add_roofline_context(const std::string& flop_convention,
                                 const std::string& traffic_model = kPrefillTrafficModel) {
  const Roofline& roofline = measured_roofline();
  const auto number = context_number;
  benchmark::AddCustomContext("roofline_file", default_roofline_path().string());
  benchmark::AddCustomContext("roofline_peak_gflops", number(roofline.peak_gflops));
  benchmark::AddCustomContext("roofline_peak_simd", roofline.simd);
  benchmark::AddCustomContext("roofline_peak_avx2_gflops", number(roofline.peak_avx2_gflops));
  benchmark::AddCustomContext("roofline_peak_avx512_gflops", number(roofline.peak_avx512_gflops));
  benchmark::AddCustomContext("roofline_read_gbs", number(roofline.read_gbs));
  benchmark::AddCustomContext("roofline_triad_gbs", number(roofline.triad_gbs));
  benchmark::AddCustomContext("roofline_ridge_point", number(roofline.ridge_point()));
  benchmark::AddCustomContext("roofline_measured_at", roofline.measured_at);
  benchmark::AddCustomContext("llc_mib", number(static_cast<double>(last_level_cache_bytes()) / 1048576.0));
  benchmark::AddCustomContext("traffic_model", traffic_model);
  benchmark::AddCustomContext("flop_convention", flop_convention);
}

/// A chapter benchmark's command line split in two: Google Benchmark's flags (--benchmark_*,
/// --v=N), after argv[0], for run_benchmarks(); and the chapter's own options.
struct BenchmarkArgs {
  std::vector<char*> benchmark;  ///< argv[0], then Google Benchmark's flags
  std::vector<std::string> own;  ///< everything else, in order
};

/// Splits @p argv as BenchmarkArgs says.
inline BenchmarkArgs split_benchmark_args(int argc, char** argv) {
  BenchmarkArgs out{{argv[0]}, {}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--benchmark_", 0) == 0 || a.rfind("--v=", 0) == 0) {
      out.benchmark.push_back(argv[i]);
    } else {
      out.own.push_back(a);
    }
  }
  return out;
}

/// A benchmark main(): counters as table columns unless the caller passes
/// --benchmark_counters_tabular, Google Benchmark's own flags (--benchmark_filter, …),
/// @p register_benchmarks, then the run. Returns the process exit code.
inline int run_benchmarks(int argc, char** argv, const std::function<void()>& register_benchmarks) {
  std::vector<char*> args(argv, argv + argc);
  bool tabular_given = false;
  for (int i = 1; i < argc; ++i) tabular_given |= std::strncmp(argv[i], "--benchmark_counters_tabular", 28) == 0;
  static char tabular[] = "--benchmark_counters_tabular=true";
  if (!tabular_given) args.insert(args.begin() + 1, tabular);
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  register_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace inferlab::bench
