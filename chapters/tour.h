#pragma once
/// @file tour.h
/// Each chapter's part of `inferlab tour`: a short demonstration on the default backend that
/// prints what the chapter teaches, measured on this machine.

#include <ostream>

#include "common/roofline.h"

namespace inferlab {

/// Options shared by the chapter demos.
struct TourOptions {
  bool quick = false;  ///< smaller sizes and one timed run each (used by tests; well under a second)
};

/// Chapter 01: naive CPU attention checked against the float64 oracle (GQA, causal), then a
/// seq_len sweep (L = 64 … 2048, or 32 and 128 when @p options.quick) printing, per L: FLOPs,
/// bytes and AI under the article's traffic model, AI under the unfused model, the measured
/// GFLOP/s (fastest of a few runs), the roof min(peak, AI × triad) at that AI and the percentage
/// of it reached; then the AI of one decode step for contrast. @p roofline supplies the ceilings.
void tour_chapter01(std::ostream& out, const Roofline& roofline, const TourOptions& options);

/// Chapter 02: the CUDA versions run on the SIMT emulator (sim backend) against the float64
/// oracle, then the CPU versions (cpu/naive, cpu/blocked, cpu/openblas) timed side by side at one
/// size with GFLOP/s, % of the measured FMA peak and the speed-up over cpu/naive.
void tour_chapter02(std::ostream& out, const Roofline& roofline, const TourOptions& options);

/// The tour's closing table: prefill measured at several L (cpu/blocked) beside one decode step,
/// with AI under the article's, the unfused and the fused traffic models, GFLOP/s, % of the roof
/// and whether each is memory- or compute-bound on this machine.
void tour_summary(std::ostream& out, const Roofline& roofline, const TourOptions& options);

}  // namespace inferlab
