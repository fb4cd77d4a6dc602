#pragma once
/// @file timer.h
/// Wall-clock timing for host code (benchmarks use Google Benchmark; this is for the tour and
/// for one-off measurements). Warm up before timing: the first call pays for page faults.

#include <algorithm>
#include <chrono>
#include <limits>

namespace inferlab {

/// A steady-clock stopwatch started at construction.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  /// Restarts the stopwatch.
  void restart() { start_ = std::chrono::steady_clock::now(); }
  /// Seconds since construction or the last restart().
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

/// Runs @p work once untimed (warm-up), then @p repetitions times, and returns the fastest run
/// in seconds (the least disturbed by the rest of the machine).
template <class Work>
double best_time_seconds(int repetitions, Work&& work) {
  work();
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < repetitions; ++i) {
    Stopwatch stopwatch;
    work();
    best = std::min(best, stopwatch.seconds());
  }
  return best;
}

}  // namespace inferlab
