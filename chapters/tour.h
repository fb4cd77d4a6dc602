#pragma once
/// @file tour.h
/// Each chapter's part of `inferlab tour`: a short demonstration on the default backend that
/// prints what the chapter teaches, measured on this machine.

#include <ostream>

#include "common/roofline.h"

namespace inferlab {

/// Options shared by the chapter demos.
struct TourOptions {
  bool quick = false;  ///< smaller sizes (used by the test that runs the tour)
};

/// Chapter 01: naive CPU attention checked against the oracle, then a seq_len sweep with FLOPs,
/// bytes, AI, measured GFLOP/s and % of this machine's roofline.
void tour_chapter01(std::ostream& out, const Roofline& roofline, const TourOptions& options);

}  // namespace inferlab
