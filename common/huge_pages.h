#pragma once
/// @file huge_pages.h
/// Host storage for the KV caches: large buffers on 2 MiB ("huge") pages where the OS offers
/// them (Linux transparent huge pages), so a decode kernel streaming gigabytes of cache walks
/// one page table entry per 2 MiB instead of one per 4 KiB.
///
/// Why it matters (chapter 04's lesson, "Pages"): a decode step reads every cached byte once,
/// in order. With 4 KiB pages each new page costs a TLB miss — in a virtual machine a
/// two-dimensional page walk through the guest's and the host's tables — and the hardware
/// prefetcher stops at every page boundary. An INT8 decode-shaped stream (short rows) suffered
/// from 4 KiB pages where an fp32 stream of the same shape did not (the figures are in chapter
/// 04's lesson). Every cache format uses this storage, so the fp32, fp16 and INT8 decode kernels
/// are compared on the same footing.

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace inferlab {

/// The huge page size this storage aligns to: 2 MiB (x86-64 and arm64 Linux).
inline constexpr size_t kHugePageBytes = size_t(2) << 20;

/// Reserves @p bytes of host memory for a buffer: requests of at least kHugePageBytes are
/// aligned to kHugePageBytes, rounded up to a whole number of huge pages and advised as huge
/// pages (madvise(MADV_HUGEPAGE), Linux only; where the OS declines, ordinary pages serve);
/// smaller ones are 64-byte aligned (a cache line, a whole AVX-512 vector). Throws
/// std::bad_alloc when memory runs out. Release with release_huge_page_bytes() and the same
/// @p bytes.
void* allocate_huge_page_bytes(size_t bytes);

/// Releases what allocate_huge_page_bytes(@p bytes) returned.
void release_huge_page_bytes(void* p, size_t bytes) noexcept;

/// Whether the OS marked the pages of [@p p, @p p + @p bytes) eligible for transparent huge
/// pages (reads /proc/self/smaps; false off Linux or where the region is not found).
bool advised_huge_pages(const void* p, size_t bytes);

/// A standard allocator over allocate_huge_page_bytes(), for std::vector.
template <class T>
struct HugePageAllocator {
  using value_type = T;  ///< the element type
  HugePageAllocator() = default;
  /// Converting constructor (allocators of any element type are interchangeable).
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  /// Room for @p n elements.
  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(allocate_huge_page_bytes(n * sizeof(T)));
  }
  /// Releases @p p, which held room for @p n elements.
  void deallocate(T* p, size_t n) noexcept { release_huge_page_bytes(p, n * sizeof(T)); }
  /// All of them are equal: memory from one is released by any other.
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

/// A vector whose storage is on huge pages when it is large (the KV caches' storage).
template <class T>
using HugePageBuffer = std::vector<T, HugePageAllocator<T>>;

}  // namespace inferlab
