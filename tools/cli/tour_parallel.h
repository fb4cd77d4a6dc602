#pragma once
/// @file tour_parallel.h
/// Chapter 10's part of `inferlab tour` (in tools/cli, the layer above the chapters, because it
/// starts the ranks through this executable's own `generate --tp / --pp`).

#include <ostream>

#include "chapters/tour.h"

namespace inferlab::cli {

/// Chapter 10: the same greedy request through `inferlab generate` whole, split over 3
/// tensor-parallel ranks and cut into 2 pipeline stages (each started through mpirun), SmolLM2's
/// ids and text side by side with the wall time of each; a random model with 4 KV heads over
/// 2 ranks against 1; and the split SmolLM2's 9 query heads refuse (--tp 2), with the reason.
/// Skipped with a message when SmolLM2 is not installed or mpirun is missing. A few seconds.
void tour_chapter10(std::ostream& out, const TourOptions& options);

}  // namespace inferlab::cli
