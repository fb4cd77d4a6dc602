#pragma once
/// @file roofline.h
/// The measured ceilings of this machine: fp32 FMA peak (all cores, SIMD) and main-memory
/// bandwidth (read and triad, working set well beyond the last-level cache). Benchmarks divide
/// by these to print "% of roofline". `inferlab roofline` measures and saves them as JSON.
///
/// How it measures (common/roofline.cpp):
///  - peak: every thread runs 12 independent FMA chains on registers (latency 4 cycles × 2 FMA
///    ports needs at least 8 in flight), once with 256-bit AVX2 and once with 512-bit AVX-512
///    vectors where the CPU has them; the faster ISA is the peak, and both are kept;
///  - read: each thread sums its share of one array into 8 vector accumulators (one accumulator
///    would make the loop wait on the add latency instead of on memory);
///  - triad: STREAM's a[i] = b[i] + s·c[i], counting 3 arrays (write-allocate not counted);
///  - int8 and bf16: the dot-product instructions this CPU has (common/dot_ceilings.h), the ceiling
///    of the arithmetic a quantized GEMM does — an int8 kernel's "% of peak" is of int8_gops, never
///    of the fp32 FMA peak.

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/dot_ceilings.h"

namespace inferlab {

/// One machine's measured ceilings.
struct Roofline {
  double peak_gflops = 0.0;         ///< fp32 FMA throughput, GFLOP/s, all cores (the best ISA below)
  double peak_avx2_gflops = 0.0;    ///< the same with 256-bit AVX2 FMA (0: not measured)
  double peak_avx512_gflops = 0.0;  ///< the same with 512-bit AVX-512 FMA (0: not measured)
  double read_gbs = 0.0;            ///< streaming read bandwidth, GB/s (10^9 bytes/s)
  double triad_gbs = 0.0;           ///< STREAM triad a[i] = b[i] + s·c[i], GB/s, counting 3 arrays
  int threads = 0;                  ///< OpenMP threads used
  std::string simd;                 ///< the ISA that reached peak_gflops ("avx512", "avx2", "generic")
  std::string cpu;                  ///< CPU model name
  double working_set_mib = 0.0;     ///< bytes touched by the bandwidth loops, MiB
  std::string measured_at;          ///< UTC time of the measurement (ISO 8601)
  double load_average = 0.0;        ///< 1-minute load average when the measurement began (Linux); of
                                    ///< a median of runs, the highest of the runs'
  int runs = 1;                     ///< measurements this is the median of (median_roofline)
  double int8_gops = 0.0;           ///< the fastest int8 dot-product instruction, 10^9 ops/s (0: none)
  std::string int8_instruction;     ///< which one ("vpdpbusd zmm (AVX512-VNNI)", ...)
  double bf16_gflops = 0.0;         ///< the bf16 dot product (vdpbf16ps), GFLOP/s (0: the CPU has none)
  std::string bf16_instruction;     ///< which one
  std::vector<DotCeiling> dot_ceilings;  ///< every dot-product instruction measured, int8 and bf16

  /// Whether other work may have competed for the cores (load average above the thread count):
  /// then the ceilings may read low, and `inferlab roofline` is worth rerunning on an idle machine.
  bool measured_busy() const { return threads > 0 && load_average > threads; }

  /// The ridge point: FLOP/byte where the compute and the (triad) bandwidth roofs meet.
  double ridge_point() const { return triad_gbs > 0.0 ? peak_gflops / triad_gbs : 0.0; }
  /// The attainable GFLOP/s at arithmetic intensity @p ai: min(peak, ai · bandwidth).
  double attainable_gflops(double ai) const;
  /// The int8 ridge point: operations per byte where the int8 ceiling and the triad bandwidth
  /// meet (0 without an int8 ceiling). A quantized GEMM below it is memory-bound.
  double int8_ridge_point() const { return triad_gbs > 0.0 ? int8_gops / triad_gbs : 0.0; }
  /// The ceiling an int8 kernel's "% of peak" refers to, 10^9 ops/s: int8_gops, or the fp32 FMA
  /// peak on a CPU without an int8 dot product (its integer code then runs on the same vector
  /// units, no faster).
  double int8_ceiling() const { return int8_gops > 0.0 ? int8_gops : peak_gflops; }
};

/// Options of measure_roofline().
struct RooflineOptions {
  double working_set_mib = 0.0;   ///< 0: max(4 × last-level cache, 1 GiB), capped at RAM/4
  double seconds_per_test = 0.5;  ///< time spent per ceiling (best of several passes)
  int threads = 0;                ///< 0: all cores (OpenMP default)
};

/// The median of @p runs, ceiling by ceiling (peaks, read and triad bandwidth each the median of
/// the runs' values; for an even count the mean of the middle two), so one disturbed run moves no
/// figure; load_average is the highest of the runs' and runs their count; the other fields come
/// from the first run. Throws std::invalid_argument for an empty list.
Roofline median_roofline(const std::vector<Roofline>& runs);

/// The size of this machine's last-level cache in bytes as the OS reports it (L3, else L2, else
/// 32 MiB). A virtual machine may report its host's whole shared L3. The bandwidth loops, and
/// the decode benchmark's big points, use working sets several times this size.
size_t last_level_cache_bytes();

/// Measures this machine's ceilings.
Roofline measure_roofline(const RooflineOptions& options = {});

/// This machine's CPU model name (the first "model name" of /proc/cpuinfo), or "unknown" where
/// there is none: what a roofline or a benchmark's JSON records as "cpu".
std::string cpu_model_name();

/// Where `inferlab roofline` saves, and benchmarks look: $INFERLAB_ROOFLINE if set, else
/// build/roofline.json at the top of the source tree.
std::filesystem::path default_roofline_path();

/// Writes @p roofline as JSON to @p path.
void save_roofline(const Roofline& roofline, const std::filesystem::path& path);
/// Reads a roofline written by save_roofline(); nullopt when the file is absent or unreadable.
std::optional<Roofline> load_roofline(const std::filesystem::path& path);

/// The saved roofline if there is one, otherwise a fresh (shorter) measurement, which is saved.
/// Benchmarks call this so "% of roofline" is always relative to measured ceilings.
Roofline roofline_for_benchmarks();

/// A short human-readable summary (peak, bandwidths, ridge point).
std::string describe(const Roofline& roofline);

}  // namespace inferlab
