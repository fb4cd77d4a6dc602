#pragma once
/// @file register_chains.h
/// The unrolling the ceiling measurements share (common/roofline.cpp's FMA peak,
/// common/dot_ceilings.cpp's dot products): 12 independent accumulator chains a thread, written as
/// separate variables so that the compiler keeps them in registers. An instruction with a latency of
/// 4–5 cycles issued 2 a cycle needs at least 8–10 chains in flight; fewer measure latency, not
/// throughput. Internal to those two files.

/// Expands BODY(n) for the chain indices 0 … 11.
#define INFERLAB_CHAINS(BODY) \
  BODY(0) BODY(1) BODY(2) BODY(3) BODY(4) BODY(5) BODY(6) BODY(7) BODY(8) BODY(9) BODY(10) BODY(11)

namespace inferlab {
/// The number of chains INFERLAB_CHAINS expands.
inline constexpr int kChains = 12;
}  // namespace inferlab
