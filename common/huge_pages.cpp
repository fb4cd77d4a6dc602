#include "common/huge_pages.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>

#include "common/ceil_div.h"
#endif

namespace inferlab {
namespace {

constexpr size_t kLineBytes = 64;

// The bytes actually reserved for a request of @p bytes, and their alignment.
size_t reserved_bytes(size_t bytes) {
  if (bytes < kHugePageBytes) return bytes;
  return ceil_div(bytes, kHugePageBytes) * kHugePageBytes;
}
std::align_val_t alignment_for(size_t bytes) {
  return std::align_val_t(bytes < kHugePageBytes ? kLineBytes : kHugePageBytes);
}

}  // namespace

void* allocate_huge_page_bytes(size_t bytes) {
  if (bytes > SIZE_MAX - kHugePageBytes) throw std::bad_alloc();
  void* p = ::operator new(reserved_bytes(bytes), alignment_for(bytes));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Advice only: where transparent huge pages are off, the buffer keeps ordinary pages.
  if (bytes >= kHugePageBytes) (void)madvise(p, reserved_bytes(bytes), MADV_HUGEPAGE);
#endif
  return p;
}

void release_huge_page_bytes(void* p, size_t bytes) noexcept {
  ::operator delete(p, reserved_bytes(bytes), alignment_for(bytes));
}

bool advised_huge_pages(const void* p, size_t bytes) {
#if defined(__linux__)
  // /proc/self/smaps: a header line "start-end perms ..." per mapping, then fields; the
  // VmFlags field lists "hg" for a mapping advised MADV_HUGEPAGE.
  std::ifstream smaps("/proc/self/smaps");
  const auto begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  bool inside = false;
  std::string line;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2 && line.find('-') < line.find(' ')) {
      inside = lo <= begin && end <= hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      std::istringstream flags(line.substr(8));
      std::string flag;
      while (flags >> flag)
        if (flag == "hg") return true;
      return false;
    }
  }
#else
  (void)p;
  (void)bytes;
#endif
  return false;
}

}  // namespace inferlab
