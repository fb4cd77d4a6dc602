#pragma once
/// @file checks.h
/// The compute-sanitizer checks' state on one worker (the emulator's own sources only; checks.cpp
/// has the checks, the block runner calls the hooks below).
//
// How the checks see a kernel's memory: the kernels' sources are compiled with GCC's
// -fsanitize=thread instrumentation but without its runtime: every load, store and atomic of a
// kernel calls checks.cpp with its address, its size and (as return address) the instruction
// that made it. (-fsanitize=kernel-address would skip accesses that it proves in bounds of a
// variable — a scalar static __shared__, a constant index — exactly what racecheck must see.)
// -fsanitize=bounds,alignment,null adds checks of array indices and pointer alignment that
// report with their file and line. checks.cpp classifies the address
// (the thread's own stack, device memory, dynamic or static shared memory, program data) and:
//   memcheck  — device memory: the access must lie inside one live allocation (bounds, freed);
//               shared memory: inside the launch's dynamic bytes; anything else is not memory
//               a kernel can address (host memory, another thread's stack);
//   racecheck — shared memory: per byte, the last write and up to two reads since the last
//               barrier (with their thread, barrier interval and warp-synchronisation count);
//               a conflicting access by another thread in the same interval, not ordered by a
//               warp collective, is a hazard, whatever order the schedule ran the two in;
//   initcheck — shared memory: a byte the block has not written; device memory: a byte whose
//               written-bit is clear (device_memory.h). Reported at the end of the barrier
//               interval, unless a race on the same byte explains it first.

#include <cstddef>
#include <cstdint>
#include <vector>

/// @cond SIMT_DETAIL
namespace simt::detail {

struct Worker;

// One access, as racecheck remembers it.
struct Stamp {
  uintptr_t pc = 0;         // the return address of the check's call: just after the access
  uint32_t interval = 0;    // the barrier interval (0: never)
  uint16_t thread = 0;      // linear thread index in the block
  uint16_t warp_syncs = 0;  // warp collectives the thread's warp had completed at the time
};

// One byte of shared memory.
struct Cell {
  Stamp write, read, other_read;  // the last write; the first two readers of the interval
  uint32_t written_in = 0;        // the interval of the last write, atomics included (initcheck)
};

// The first read of unwritten memory in the current barrier interval.
struct PendingRead {
  bool set = false;
  bool shared = false;
  bool dynamic = false;
  bool atomic = false;
  uintptr_t address = 0;
  size_t bytes = 0;
  uint16_t thread = 0;
  uintptr_t pc = 0;
};

struct CheckState {
  bool ready = false;
  uintptr_t tls_low = 0;  // the executable's static TLS block on this thread: static __shared__
  size_t tls_bytes = 0;
  uintptr_t builtins[4] = {};  // &threadIdx, &blockIdx, &blockDim, &gridDim: not shared memory
  std::vector<Cell> static_cells, dynamic_cells;
  uint32_t interval = 0, block_first_interval = 0;
  std::vector<uint16_t> warp_syncs;
  PendingRead pending;
  // The Allocations of recent device accesses (valid for cached_generation): a kernel reads and
  // writes a handful of buffers, and the heap's lookup takes a lock, so each worker keeps them.
  static constexpr unsigned kCachedAllocations = 8;
  const void* cached[kCachedAllocations] = {};
  unsigned cached_next = 0;  // the entry the next miss replaces (round robin)
  uint64_t cached_generation = ~uint64_t{0};
};

// The block runner's hooks.
void checks_begin_block(Worker& w);
// At a barrier's release and at the block's end: reports a pending read of unwritten memory.
// Returns false when it failed the launch.
bool checks_end_interval(Worker& w);
// A warp collective completed for warp @p warp: it orders its threads' accesses.
inline void checks_warp_synchronised(CheckState& s, unsigned warp) {
  if (warp < s.warp_syncs.size()) ++s.warp_syncs[warp];
}

}  // namespace simt::detail
/// @endcond
