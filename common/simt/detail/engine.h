#pragma once
/// @file engine.h
/// The emulator engine's shared internals: lanes, workers and launches (its own sources only,
/// never kernels or tests).
//
// The SIMT emulator's engine: every thread of a block is a fiber on one OS thread; blocks are
// spread over a pool of worker threads. Its sources, one job each:
//   settings.cpp      schedules and the environment knobs (SIMT_SCHEDULE, SIMT_WORKERS, SIMT_STACK_KIB)
//   fiber.cpp         fiber stacks, a lane's life, sanitizer death callbacks; detail/fiber.h: the
//                     context switches with their sanitizer fiber annotations
//   block_runner.cpp  one block's threads in rounds: warp collectives, barriers, diagnose()
//   launch.cpp        the launch entry point and the pool of OS threads that blocks are spread over
//   messages.cpp      how messages name things: source lines, dimensions, operations, kernels
//   watch.cpp         simt::watch_writes(): which thread wrote a watched byte range
//   checks.cpp        memcheck, racecheck, initcheck (detail/checks.h); symbolize.cpp: source
//                     lines of the reports; device_memory.cpp: the device heap; host_access.cpp:
//                     the report of host code touching it

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "simt/detail/checks.h"
#include "simt/detail/messages.h"
#include "simt/internal.h"

/// @cond SIMT_DETAIL
#if SIMT_USE_BOOST_CONTEXT
#include <boost/context/detail/fcontext.hpp>
#else
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define SIMT_ASAN 1
#else
#define SIMT_ASAN 0
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/tsan_interface.h>
#define SIMT_TSAN 1
#else
#define SIMT_TSAN 0
#endif

namespace simt::detail {

// ---- settings (settings.cpp) ------------------------------------------------------------------

// Bytes of one fiber stack: SIMT_STACK_KIB (>= 16), else 256 KiB (1 MiB under ASan).
size_t stack_bytes();

// ---- small helpers ----------------------------------------------------------------------------

struct SplitMix {
  using result_type = uint64_t;
  uint64_t state;
  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return ~uint64_t{0}; }
  uint64_t operator()() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

// ---- fiber stacks (fiber.cpp) -----------------------------------------------------------------

// One mmap per stack with a PROT_NONE guard page below it: an overflow faults at once.
class Stack {
 public:
  Stack();
  ~Stack();
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  char* bottom() const { return base_ + page_; }  // lowest usable address
  char* top() const { return base_ + page_ + size_; }
  size_t size() const { return size_; }
  // ASan: a lane leaves its last frames (lane_main's) poisoned when it switches away for good;
  // the next lane on this stack must start clean. Only that small top region needs unpoisoning.
  char* dirty_from = nullptr;

 private:
  char* base_ = nullptr;
  size_t size_ = 0;
  size_t page_ = 0;
};

// ---- lanes, blocks, launches ------------------------------------------------------------------

enum class State : uint8_t { ready, parked, exited };

struct LaneAbort {};  // thrown inside a parked thread to unwind it after an error

struct Launch;

struct Lane {
#if SIMT_USE_BOOST_CONTEXT
  boost::context::detail::fcontext_t context = nullptr;
#else
  ucontext_t context{};
#endif
  Stack* stack = nullptr;
  uint3 thread{};
  unsigned linear = 0;
  State state = State::ready;
  bool started = false;
  bool abort = false;
  // the synchronisation point it is parked at
  Op op = Op::barrier;
  unsigned mask = 0;
  int arg = 0;
  int width = 32;
  uint64_t value = 0;
  uint64_t result = 0;
  std::source_location site;
  bool has_resumed_from = false;
  std::source_location resumed_from;
  Op resumed_from_op = Op::barrier;
#if SIMT_ASAN
  void* fake_stack = nullptr;
#endif
#if SIMT_TSAN
  void* tsan_fiber = nullptr;
#endif
};

// Per OS thread: fiber stacks and lanes, reused from block to block.
struct Worker {
  std::vector<std::unique_ptr<Stack>> stacks;
  std::vector<Lane> lanes;
  Lane* current = nullptr;
  Launch* launch = nullptr;
  unsigned live = 0;
  std::unique_ptr<unsigned char[]> shared;  // dynamic shared memory: kMaxSharedBytesOptin bytes, made once
  CheckState checks;
#if SIMT_USE_BOOST_CONTEXT
  boost::context::detail::fcontext_t scheduler = nullptr;
#else
  ucontext_t scheduler{};
#endif
#if SIMT_ASAN
  const void* scheduler_stack_bottom = nullptr;
  size_t scheduler_stack_size = 0;
#endif
#if SIMT_TSAN
  void* tsan_scheduler = nullptr;
#endif
};

// The worker of the calling OS thread once worker() has made it (else nullptr).
inline thread_local Worker* this_worker = nullptr;

__extension__ typedef unsigned __int128 Wide;

struct Launch {
  const LaunchRequest* request = nullptr;
  std::string kernel;
  Schedule schedule;
  Checks checks;
  uint64_t blocks = 0;
  unsigned threads = 0;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::string error;
  uint64_t stride = 1, offset = 0;  // random block order: k -> (stride * k + offset) mod blocks

  void fail(const std::string& message) {
    std::lock_guard lock(error_mutex);
    if (error.empty()) error = message;
    failed = true;
  }
  uint64_t block_at(uint64_t k) const {
    switch (schedule.order) {
      case Order::forward:
        return k;
      case Order::reverse:
        return blocks - 1 - k;
      case Order::random:
        return static_cast<uint64_t>((static_cast<Wide>(stride) * k + offset) % blocks);
    }
    return k;
  }
  std::string header(uint3 block) const {
    return "kernel '" + kernel + "' (launched at " + where(request->site) + "), block " + dims(block) + " of grid " +
           dims(request->grid) + ", blockDim " + dims(request->block);
  }
};

// ---- fibers (fiber.cpp) -----------------------------------------------------------------------

// The calling OS thread's worker, made on first use; also sets this_worker.
Worker& worker();
// Gives the worker a stack and a lane for each of @p threads threads (kept for later launches).
void prepare_lanes(Worker& w, unsigned threads);
// Registers a callback with every sanitizer runtime that names the kernel thread of a report.
void install_sanitizer_death_callbacks();

// ---- blocks (block_runner.cpp) ----------------------------------------------------------------

// Runs blocks of @p launch on the calling OS thread until none are left or the launch failed.
void run_blocks(Launch& launch);

// ---- the write watch (watch.cpp) --------------------------------------------------------------

struct Watch {
  std::mutex mutex;
  std::atomic<bool> active{false};
  const unsigned char* address = nullptr;
  std::vector<unsigned char> snapshot;
  std::vector<WatchedWrite> writes;
};
extern Watch watch;

// Records @p lane as a writer if the watched bytes changed while it ran.
void record_watch(Worker& w, Lane& lane);
// Takes a fresh snapshot of the watched bytes before a launch.
void snapshot_watch();

}  // namespace simt::detail
/// @endcond
