#pragma once
/// @file roofline.h
/// The measured ceilings of this machine: fp32 FMA peak (all cores, SIMD) and main-memory
/// bandwidth (read and triad, working set well beyond the last-level cache). Benchmarks divide
/// by these to print "% of roofline". `inferlab roofline` measures and saves them as JSON.

#include <filesystem>
#include <optional>
#include <string>

namespace inferlab {

/// One machine's measured ceilings.
struct Roofline {
  double peak_gflops = 0.0;     ///< fp32 FMA throughput, GFLOP/s, all cores
  double read_gbs = 0.0;        ///< streaming read bandwidth, GB/s (10^9 bytes/s)
  double triad_gbs = 0.0;       ///< STREAM triad a[i] = b[i] + s·c[i], GB/s, counting 3 arrays
  int threads = 0;              ///< OpenMP threads used
  std::string simd;             ///< the vector ISA of the FMA loop ("avx512", "avx2", "scalar")
  std::string cpu;              ///< CPU model name
  double working_set_mib = 0.0; ///< bytes touched by the bandwidth loops, MiB
  std::string measured_at;      ///< UTC time of the measurement (ISO 8601)

  /// The ridge point: FLOP/byte where the compute and the (triad) bandwidth roofs meet.
  double ridge_point() const { return triad_gbs > 0.0 ? peak_gflops / triad_gbs : 0.0; }
  /// The attainable GFLOP/s at arithmetic intensity @p ai: min(peak, ai · bandwidth).
  double attainable_gflops(double ai) const;
};

/// Options of measure_roofline().
struct RooflineOptions {
  double working_set_mib = 0.0;  ///< 0: max(4 × last-level cache, 1 GiB), capped at RAM/4
  double seconds_per_test = 0.5; ///< time spent per ceiling (best of several passes)
  int threads = 0;               ///< 0: all cores (OpenMP default)
};

/// Measures this machine's ceilings.
Roofline measure_roofline(const RooflineOptions& options = {});

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
