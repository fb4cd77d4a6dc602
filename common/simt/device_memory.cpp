// The device heap (detail/device_memory.h): a reserved range of virtual memory in which every
// allocation starts on a page and ends before an inaccessible guard page, a quarantine for freed
// allocations, the initcheck bits of every allocation, and the opening and closing of the live
// allocations around launches and runtime calls (host code outside them faults): opened one at a
// time at its first access while the heap is open, all closed when it closes.

#include <sys/mman.h>
#include <unistd.h>
#include <unwind.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>

#include "simt/detail/device_memory.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace simt::detail {
namespace {

constexpr size_t kQuarantineRecords = 4096;
constexpr size_t kQuarantineBytes = size_t{4} << 30;

struct Heap {
  std::mutex mutex;
  size_t page = 0;
  uintptr_t top = 0;                                           // never used above this
  std::map<uintptr_t, std::unique_ptr<Allocation>> live;       // base -> allocation
  std::deque<std::unique_ptr<Allocation>> quarantine;          // freed, oldest first
  size_t quarantined_bytes = 0;
  std::map<uintptr_t, size_t> holes;                           // reusable ranges below top: base -> bytes
  uint64_t serial = 0;
  size_t in_use = 0, peak = 0;
  unsigned open_count = 0;  // launches and runtime calls in flight (device_memory_open: > 0)

  // Reserves the range once: 4x the physical memory, at least 16 GiB, at most 1 TiB (halved
  // until the system accepts it). PROT_NONE and MAP_NORESERVE: it costs no memory.
  bool reserve() {
    if (heap_high != 0) return true;
    page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t physical = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * page;
    size_t bytes = std::clamp(physical * 4, size_t{16} << 30, size_t{1} << 40);
    for (; bytes >= (size_t{1} << 30); bytes /= 2) {
      void* range = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (range == MAP_FAILED) continue;
      heap_low = reinterpret_cast<uintptr_t>(range);
      heap_high = heap_low + bytes;
      top = heap_low;
      if (device_memory_guarded()) install_host_access_report();
      return true;
    }
    return false;
  }

  void add_hole(uintptr_t base, size_t bytes) {
    auto next = holes.lower_bound(base);
    if (next != holes.end() && base + bytes == next->first) {  // merge with the hole above
      bytes += next->second;
      next = holes.erase(next);
    }
    if (next != holes.begin()) {
      auto previous = std::prev(next);
      if (previous->first + previous->second == base) {  // and with the one below
        previous->second += bytes;
        return;
      }
    }
    holes.emplace(base, bytes);
  }

  // Returns the oldest quarantined allocations' pages to the holes until the quarantine fits.
  void drain_quarantine(size_t records, size_t bytes) {
    while (!quarantine.empty() && (quarantine.size() > records || quarantined_bytes > bytes)) {
      const Allocation& oldest = *quarantine.front();
      quarantined_bytes -= oldest.span;
      add_hole(oldest.base, oldest.span);
      quarantine.pop_front();
    }
  }

  uintptr_t take(size_t span) {
    for (auto it = holes.begin(); it != holes.end(); ++it) {  // first fit
      if (it->second < span) continue;
      const uintptr_t base = it->first;
      const size_t left = it->second - span;
      holes.erase(it);
      if (left > 0) holes.emplace(base + span, left);
      return base;
    }
    if (heap_high - top < span) return 0;
    const uintptr_t base = top;
    top += span;
    return base;
  }

  // Makes the allocations opened since the heap was opened inaccessible again (one mprotect each;
  // the others are still closed).
  void close_opened() {
    for (const auto& [base, a] : live)
      if (a->opened) {
        mprotect(reinterpret_cast<void*>(base), a->span - page, PROT_NONE);
        a->opened = false;
      }
  }

  // The live or quarantined allocation holding @p address, else the nearest one below it.
  const Allocation* nearest(uintptr_t address) const {
    const Allocation* best = nullptr;
    auto it = live.upper_bound(address);
    if (it != live.begin()) best = std::prev(it)->second.get();
    for (const auto& freed : quarantine)
      if (freed->base <= address && (best == nullptr || freed->base > best->base)) best = freed.get();
    return best;
  }
};

Heap& heap() {
  static Heap* instance = new Heap;  // never destroyed: kernels may run during static destruction
  return *instance;
}

std::string hex(uintptr_t value) {
  std::ostringstream out;
  out << "0x" << std::hex << value;
  return out.str();
}

}  // namespace

bool device_memory_guarded() {
  static const bool guarded = [] {
    const char* text = std::getenv("SIMT_HOST_ACCESS");
    if (text == nullptr || *text == '\0' || std::strcmp(text, "fault") == 0) return true;
    if (std::strcmp(text, "allow") == 0) return false;
    std::fprintf(stderr, "simt: SIMT_HOST_ACCESS = %s: must be fault (the default) or allow; using fault\n", text);
    return true;
  }();
  return guarded;
}

void open_device_memory() {
  if (!device_memory_guarded()) return;
  Heap& h = heap();
  std::lock_guard lock(h.mutex);
  if (h.open_count++ == 0) device_memory_open.store(true, std::memory_order_release);
}

void close_device_memory() {
  if (!device_memory_guarded()) return;
  Heap& h = heap();
  std::lock_guard lock(h.mutex);
  if (--h.open_count > 0) return;
  device_memory_open.store(false, std::memory_order_release);
  h.close_opened();
}

Opened open_on_fault(uintptr_t address) {
  Heap& h = heap();
  std::lock_guard lock(h.mutex);
  if (h.open_count == 0) return Opened::no;
  auto it = h.live.upper_bound(address);
  if (it == h.live.begin()) return Opened::no;
  Allocation& a = *std::prev(it)->second;
  if (!a.contains(address, 1)) return Opened::no;
  if (a.opened) return Opened::already;  // another thread opened it since the fault
  if (mprotect(reinterpret_cast<void*>(a.base), a.span - h.page, PROT_READ | PROT_WRITE) != 0) return Opened::no;
  a.opened = true;
  return Opened::now;
}

namespace {
struct Unwound {
  CallSite* site;
  size_t skip;
  size_t count;
};
_Unwind_Reason_Code collect_return_address(_Unwind_Context* context, void* data) {
  auto* u = static_cast<Unwound*>(data);
  if (u->skip > 0) {
    --u->skip;
    return _URC_NO_REASON;
  }
  if (u->count == u->site->size()) return _URC_END_OF_STACK;
  (*u->site)[u->count++] = _Unwind_GetIP(context);
  return _URC_NO_REASON;
}
}  // namespace

CallSite capture_call_site() {
  CallSite site{};
  Unwound u{&site, 2, 0};  // this function and its caller (cudaMalloc)
  _Unwind_Backtrace(collect_return_address, &u);
  return site;
}

bool allocation_site(uintptr_t address, CallSite& site) {
  Heap& h = heap();
  std::lock_guard lock(h.mutex);
  auto it = h.live.upper_bound(address);
  if (it == h.live.begin()) return false;
  const Allocation& a = *std::prev(it)->second;
  if (!a.contains(address, 1)) return false;
  site = a.site;
  return true;
}

void* device_allocate(size_t bytes, const CallSite& site) {
  Heap& h = heap();
  std::lock_guard lock(h.mutex);
  if (!h.reserve()) return nullptr;
  const size_t pages = (std::max<size_t>(bytes, 1) + h.page - 1) / h.page * h.page;
  const size_t span = pages + h.page;  // + the guard page
  uintptr_t base = h.take(span);
  if (base == 0) {
    h.drain_quarantine(0, 0);
    base = h.take(span);
  }
  if (base == 0) return nullptr;
  if (mprotect(reinterpret_cast<void*>(base), pages, PROT_READ | PROT_WRITE) != 0) {
    h.add_hole(base, span);
    return nullptr;
  }
#if defined(__SANITIZE_ADDRESS__)
  // The page's tail past the requested size: ASan reports the first byte past the end.
  if (pages > bytes) ASAN_POISON_MEMORY_REGION(reinterpret_cast<void*>(base + bytes), pages - bytes);
#endif
  auto record = std::make_unique<Allocation>();
  record->base = base;
  record->bytes = bytes;
  record->span = span;
  record->serial = ++h.serial;
  record->site = site;
  record->written = std::make_unique<std::atomic<uint64_t>[]>((bytes + 63) / 64);
  std::memset(reinterpret_cast<void*>(base), 0xFF, bytes);
  // Closed like every live allocation when no launch or runtime call is in flight; else open
  // until the heap closes.
  if (device_memory_guarded() && h.open_count == 0) mprotect(reinterpret_cast<void*>(base), pages, PROT_NONE);
  record->opened = device_memory_guarded() && h.open_count > 0;
  h.live.emplace(base, std::move(record));
  h.in_use += bytes;
  h.peak = std::max(h.peak, h.in_use);
  return reinterpret_cast<void*>(base);
}

bool device_release(void* pointer) {
  Heap& h = heap();
  std::lock_guard lock(h.mutex);
  const auto it = h.live.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == h.live.end()) return false;
  std::unique_ptr<Allocation> record = std::move(it->second);
  h.live.erase(it);
  h.in_use -= record->bytes;
  const size_t pages = record->span - h.page;
#if defined(__SANITIZE_ADDRESS__)
  ASAN_UNPOISON_MEMORY_REGION(pointer, pages);
#endif
  // Inaccessible again, and its memory returned to the system.
  mprotect(pointer, pages, PROT_NONE);
  madvise(pointer, pages, MADV_DONTNEED);
  record->freed = true;
  record->written.reset();
  h.quarantined_bytes += record->span;
  h.quarantine.push_back(std::move(record));
  h.drain_quarantine(kQuarantineRecords, kQuarantineBytes);
  heap_generation.fetch_add(1, std::memory_order_release);
  return true;
}

const Allocation* find_allocation(uintptr_t address, size_t n) {
  Heap& h = heap();
  std::lock_guard lock(h.mutex);
  auto it = h.live.upper_bound(address);
  if (it == h.live.begin()) return nullptr;
  const Allocation* a = std::prev(it)->second.get();
  return a->contains(address, n) ? a : nullptr;
}

void mark_device_written(const void* pointer, size_t bytes) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  if (bytes == 0 || !in_device_heap(address)) return;
  if (const Allocation* a = find_allocation(address, bytes)) const_cast<Allocation*>(a)->mark_written(address, bytes);
}

std::string device_range_problem(const void* pointer, size_t bytes, const char* role) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  if (!in_device_heap(address)) return std::string(role) + " is not device memory (allocate it with cudaMalloc)";
  if (find_allocation(address, std::max<size_t>(bytes, 1)) != nullptr) return "";
  uintptr_t base = 0;
  const std::string where = describe_device_address(address, std::max<size_t>(bytes, 1), &base);
  return std::string(role) + ": " + std::to_string(bytes) + " bytes " +
         (where.empty() ? "in no allocation" : where);
}

std::string describe_device_address(uintptr_t address, size_t n, uintptr_t* base_out) {
  Heap& h = heap();
  std::lock_guard lock(h.mutex);
  if (base_out != nullptr) *base_out = 0;
  const Allocation* a = h.nearest(address);
  if (a == nullptr) return "";
  if (base_out != nullptr) *base_out = a->base;
  const std::string name = "the " + std::to_string(a->bytes) + "-byte allocation #" + std::to_string(a->serial) +
                           " (cudaMalloc'd at " + hex(a->base) + ")";
  const uintptr_t offset = address - a->base;
  if (a->freed) {
    if (address < a->base + a->span)
      return "at byte offset " + std::to_string(offset) + " of " + name + ", which was freed by cudaFree";
    return "";
  }
  if (address >= a->base + a->span) return "";  // beyond its guard: nothing to relate it to
  if (offset >= a->bytes)
    return "at byte offset " + std::to_string(offset) + " of " + name + ": " + std::to_string(offset - a->bytes) +
           " bytes past its end";
  if (offset + n <= a->bytes) return "at byte offset " + std::to_string(offset) + " of " + name;
  return "at byte offset " + std::to_string(offset) + " of " + name + ": its last " +
         std::to_string(offset + n - a->bytes) + " of " + std::to_string(n) + " bytes are past its end";
}

size_t device_bytes_now() {
  Heap& h = heap();
  std::lock_guard lock(h.mutex);
  return h.in_use;
}

size_t device_bytes_high_water() {
  Heap& h = heap();
  std::lock_guard lock(h.mutex);
  return h.peak;
}

void reset_device_high_water() {
  Heap& h = heap();
  std::lock_guard lock(h.mutex);
  h.peak = h.in_use;
}

}  // namespace simt::detail
