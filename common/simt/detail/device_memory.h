#pragma once
/// @file device_memory.h
/// The emulator's device heap (its own sources only): where cudaMalloc puts memory, and what the
/// checks know about every allocation.
//
// One range of virtual memory is reserved once (PROT_NONE). Every allocation starts on a page of
// it and is followed by at least one inaccessible page, so that an overrun that escapes the
// checks (code compiled without them) faults instead of corrupting a neighbour. cudaFree makes
// the pages inaccessible again and keeps the allocation's record in a quarantine, so that a use
// after cudaFree is named as such and its addresses are not handed out again soon.
//
// Host access (host_access.cpp): outside launches and the runtime's own calls (copies, memset,
// cuBLAS) every live allocation is inaccessible too, so that host code dereferencing a device
// pointer faults as on a GPU, and the fault is reported with the host line and the allocation's
// site. A launch or a runtime call opens the heap for its duration (open_device_memory(); counted,
// so that copies on other threads and a launch may overlap); the last one to finish closes it.
// Opening costs nothing by itself: while the heap is open, the first access to an allocation
// faults and the handler makes that allocation's pages accessible (open_on_fault()); closing
// makes only those inaccessible again. So a launch pays for the allocations it touches, not for
// every live one. SIMT_HOST_ACCESS=allow leaves the heap open (see device_memory_guarded()).
//
// initcheck: every allocation has one bit per byte, set by every write (a kernel's store or
// atomic, cudaMemcpy into it, cudaMemset, cuBLAS's outputs); a kernel that reads a byte whose
// bit is clear reads memory that nothing wrote since cudaMalloc.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

/// @cond SIMT_DETAIL
namespace simt::detail {

// Return addresses of the cudaMalloc call that made an allocation, innermost first (0: none).
inline constexpr size_t kSiteFrames = 8;
using CallSite = std::array<uintptr_t, kSiteFrames>;

struct Allocation {
  uintptr_t base = 0;
  size_t bytes = 0;     // what cudaMalloc asked for
  size_t span = 0;      // pages it occupies in the heap, its guard page included
  uint64_t serial = 0;  // the n-th cudaMalloc of the process (names it in reports)
  bool freed = false;
  CallSite site{};      // where cudaMalloc was called (the host-access report names it)
  bool opened = false;  // its pages are accessible (the heap is open and it was touched)
  std::unique_ptr<std::atomic<uint64_t>[]> written;  // initcheck: bit i = byte base + i was written

  bool contains(uintptr_t address, size_t n) const { return address >= base && address - base + n <= bytes; }
  // Whether every byte of [address, address + n) was written; the range lies inside.
  bool all_written(uintptr_t address, size_t n) const {
    size_t i = address - base;
    const size_t end = i + n;
    while (i < end) {
      const size_t word = i / 64, bit = i % 64, take = std::min<size_t>(64 - bit, end - i);
      const uint64_t mask = (take == 64 ? ~uint64_t{0} : ((uint64_t{1} << take) - 1)) << bit;
      if ((written[word].load(std::memory_order_relaxed) & mask) != mask) return false;
      i += take;
    }
    return true;
  }
  // Marks [address, address + n) written (thread-safe: blocks on other workers write too).
  void mark_written(uintptr_t address, size_t n) {
    size_t i = address - base;
    const size_t end = i + n;
    while (i < end) {
      const size_t word = i / 64, bit = i % 64, take = std::min<size_t>(64 - bit, end - i);
      const uint64_t mask = (take == 64 ? ~uint64_t{0} : ((uint64_t{1} << take) - 1)) << bit;
      if ((written[word].load(std::memory_order_relaxed) & mask) != mask)
        written[word].fetch_or(mask, std::memory_order_relaxed);
      i += take;
    }
  }
};

// The heap's reserved range [heap_low, heap_high): set once, before the first allocation.
inline uintptr_t heap_low = 0, heap_high = 0;
inline bool in_device_heap(uintptr_t address) {
  return address - heap_low < heap_high - heap_low;
}

// Bumped by every cudaFree: a cached Allocation* is valid while the generation it saw is current.
inline std::atomic<uint64_t> heap_generation{0};

// cudaMalloc / cudaFree. allocate() returns memory filled with 0xFF (poison: a read of an element
// nobody wrote shows up as NaN or -1), or nullptr when the heap is full; @p site is the call's
// stack. release() returns false when @p pointer is not the base of a live allocation.
void* device_allocate(size_t bytes, const CallSite& site);
bool device_release(void* pointer);

// The live allocation holding [address, address + n), else nullptr (takes the heap's lock).
const Allocation* find_allocation(uintptr_t address, size_t n);
// Marks bytes written by code outside kernels (copies, memset, cuBLAS); ignores non-heap memory.
void mark_device_written(const void* pointer, size_t bytes);
// "" when [pointer, pointer + bytes) lies inside one live allocation, else why not (for the
// runtime's argument checks), naming @p role ("the destination").
std::string device_range_problem(const void* pointer, size_t bytes, const char* role);
// Where @p address lies relative to the allocations, for a report: "4 bytes past the end of the
// 4096-byte allocation #3 (base 0x…)", "inside the 512-byte allocation #7, freed by cudaFree",
// or "" when no allocation is near. @p base_out receives the allocation's base (0 if none).
std::string describe_device_address(uintptr_t address, size_t n, uintptr_t* base_out);

// ---- host access ------------------------------------------------------------------------------

// Whether live allocations are inaccessible outside launches and runtime calls: true unless
// SIMT_HOST_ACCESS=allow (read once).
bool device_memory_guarded();
// True while the heap is open (some launch or runtime call in flight); read by the fault handler.
inline std::atomic<bool> device_memory_open{false};
// Opens the heap for the calling launch or runtime call (counted); close_device_memory() ends it.
void open_device_memory();
void close_device_memory();
// The heap open for one scope: what a launch, a copy or a cuBLAS call holds while it touches
// device memory from the host side of the emulator.
class DeviceAccess {
 public:
  DeviceAccess() { open_device_memory(); }
  ~DeviceAccess() { close_device_memory(); }
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};
// While the heap is open: makes the live allocation holding @p address accessible (now), or finds
// it accessible already (another thread opened it); no when the heap is closed or no live
// allocation holds it. Called by the fault handler: unless no, the access may run again.
enum class Opened { no, now, already };
Opened open_on_fault(uintptr_t address);
// The call stack of the caller's caller (for an allocation's site), innermost first.
CallSite capture_call_site();
// Where the live allocation holding @p address was made; false when none holds it.
bool allocation_site(uintptr_t address, CallSite& site);
// Installs the fault handler that reports host code touching device memory (host_access.cpp);
// once, by the heap when it is reserved.
void install_host_access_report();

// Bytes of device memory allocated now, and the peak since the last reset.
size_t device_bytes_now();
size_t device_bytes_high_water();
void reset_device_high_water();

}  // namespace simt::detail
/// @endcond
