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
// initcheck: every allocation has one bit per byte, set by every write (a kernel's store or
// atomic, cudaMemcpy into it, cudaMemset, cuBLAS's outputs); a kernel that reads a byte whose
// bit is clear reads memory that nothing wrote since cudaMalloc.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

/// @cond SIMT_DETAIL
namespace simt::detail {

struct Allocation {
  uintptr_t base = 0;
  size_t bytes = 0;     // what cudaMalloc asked for
  size_t span = 0;      // pages it occupies in the heap, its guard page included
  uint64_t serial = 0;  // the n-th cudaMalloc of the process (names it in reports)
  bool freed = false;
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

// cudaMalloc / cudaFree. allocate() returns nullptr when the heap is full; release() returns
// false when @p pointer is not the base of a live allocation.
void* device_allocate(size_t bytes);
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

// Bytes of device memory allocated now, and the peak since the last reset.
size_t device_bytes_now();
size_t device_bytes_high_water();
void reset_device_high_water();

}  // namespace simt::detail
/// @endcond
