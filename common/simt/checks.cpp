// The emulator's compute-sanitizer: memcheck, racecheck and initcheck (how they work:
// detail/checks.h). The entry points are the functions that GCC's instrumentation calls — every
// load, store and atomic of a kernel (-fsanitize=thread's calls, without its runtime), array
// indices and pointer alignment (-fsanitize=bounds,alignment,null) — and the block runner's hooks
// at block starts, barriers and block ends.
//
// A check that fires inside a thread reports (kernel, block, thread, source line), fails the
// launch with the report as its sticky error, and stops the thread before its access: the thread
// is never resumed, so an out-of-bounds write never lands.

#include <cxxabi.h>
#include <link.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "simt/detail/device_memory.h"
#include "simt/detail/fiber.h"
#include "simt/detail/symbolize.h"

#ifndef SIMT_CHECKS
#define SIMT_CHECKS 0
#endif

namespace simt::detail {
namespace {

enum class Access : uint8_t { read, write, atomic };

const char* access_name(Access kind) {
  return kind == Access::read ? "read" : kind == Access::write ? "write" : "atomic";
}

std::string hex(uintptr_t value) {
  std::ostringstream out;
  out << "0x" << std::hex << value;
  return out.str();
}

// ---- the program's own memory: code, constants, globals (__constant__, __device__) ------------

struct ProgramImage {
  std::once_flag once;
  std::vector<std::pair<uintptr_t, uintptr_t>> segments;  // loaded segments of every module

  void load() {
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          auto* self = static_cast<ProgramImage*>(data);
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& h = info->dlpi_phdr[i];
            if (h.p_type != PT_LOAD) continue;
            self->segments.emplace_back(info->dlpi_addr + h.p_vaddr, info->dlpi_addr + h.p_vaddr + h.p_memsz);
          }
          return 0;
        },
        this);
  }
  bool contains(uintptr_t a) {
    std::call_once(once, [this] { load(); });
    for (const auto& [low, high] : segments)
      if (a >= low && a < high) return true;
    return false;
  }
};

ProgramImage& program_image() {
  static ProgramImage* instance = new ProgramImage;
  return *instance;
}

// Other modules' TLS blocks on this thread (libc's errno, …): memory that is neither shared nor
// a fault.
thread_local std::vector<std::pair<uintptr_t, uintptr_t>> other_tls;

void prepare_worker(Worker& w) {
  CheckState& s = w.checks;
  struct Found {
    uintptr_t low = 0;
    size_t bytes = 0;
  } exe;
  other_tls.clear();
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* found = static_cast<Found*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& h = info->dlpi_phdr[i];
          if (h.p_type != PT_TLS || info->dlpi_tls_data == nullptr) continue;
          const auto low = reinterpret_cast<uintptr_t>(info->dlpi_tls_data);
          if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') {
            if (found->bytes == 0) *found = Found{low, h.p_memsz};  // the executable: the first unnamed module
          } else {
            other_tls.emplace_back(low, low + h.p_memsz);
          }
        }
        return 0;
      },
      &exe);
  s.tls_low = exe.low;
  s.tls_bytes = exe.bytes;
  s.static_cells.assign(s.tls_bytes, Cell{});
  s.builtins[0] = reinterpret_cast<uintptr_t>(&threadIdx);
  s.builtins[1] = reinterpret_cast<uintptr_t>(&blockIdx);
  s.builtins[2] = reinterpret_cast<uintptr_t>(&blockDim);
  s.builtins[3] = reinterpret_cast<uintptr_t>(&gridDim);
  s.ready = true;
}

// ---- reports ----------------------------------------------------------------------------------

// "thread (64,0,0) in kernel 'k' (launched at f.cu:12), block (3,0,0) of grid …".
std::string who(const Worker& w, const Lane& lane) {
  return "by thread " + dims(lane.thread) + " in " + w.launch->header(blockIdx);
}

std::string thread_name(const Worker& w, unsigned linear) {
  return "thread " + dims(w.lanes[linear].thread);
}

// The kernel argument whose allocation starts at @p base, e.g. "; the kernel's argument 2
// (float*) points into it".
std::string argument_of(const Worker& w, uintptr_t base) {
  if (base == 0) return "";
  const LaunchRequest& r = *w.launch->request;
  for (unsigned i = 0; i < r.pointer_count; ++i) {
    const auto value = reinterpret_cast<uintptr_t>(r.pointers[i].value);
    const Allocation* owner = value == base ? nullptr : find_allocation(value, 1);
    if (value != base && (owner == nullptr || owner->base != base)) continue;
    int status = 0;
    char* plain = abi::__cxa_demangle(r.pointers[i].type, nullptr, nullptr, &status);
    const std::string type = status == 0 && plain != nullptr ? plain : r.pointers[i].type;
    std::free(plain);
    return "; the kernel's argument " + std::to_string(r.pointers[i].index) + " (" + type + ") points into it";
  }
  return "";
}

// Fails the launch with @p message and stops the running thread for good (never resumed: its
// access does not happen). Does not return.
[[noreturn]] void stop_thread(Worker& w, Lane& lane, const std::string& message) {
  w.launch->fail(message);
  lane.state = State::exited;
  --w.live;
  switch_to_scheduler(w, lane, true);
  std::abort();  // never resumed
}

// Where a shared-memory byte is, in the reader's words.
std::string dynamic_place(uintptr_t offset, size_t shared_bytes) {
  return "byte " + std::to_string(offset) + " of the block's " + std::to_string(shared_bytes) +
         " bytes of dynamic shared memory";
}

std::string static_place(uintptr_t offset) {
  TlsVariable v;
  if (tls_variable_at(offset, v)) {
    // "ns::kernel(float const*, int)::tile" -> 'tile' of kernel
    std::string variable = v.name, owner;
    if (const auto scope = v.name.rfind(")::"); scope != std::string::npos) {
      variable = v.name.substr(scope + 3);
      owner = v.name.substr(0, v.name.find('('));
      if (const auto colon = owner.rfind("::"); colon != std::string::npos) owner = owner.substr(colon + 2);
    } else if (const auto colon = v.name.rfind("::"); colon != std::string::npos) {
      variable = v.name.substr(colon + 2);
    }
    return "byte " + std::to_string(offset - v.offset) + " of __shared__ '" + variable + "'" +
           (owner.empty() ? "" : " in " + owner) + " (" + std::to_string(v.size) + " bytes)";
  }
  return "static __shared__ memory at TLS offset " + std::to_string(offset);
}

std::string shared_place(const Worker& w, bool dynamic, uintptr_t offset) {
  return dynamic ? dynamic_place(offset, w.launch->request->shared_bytes) : static_place(offset);
}

// ---- racecheck and initcheck on shared memory --------------------------------------------------

struct Now {
  uintptr_t pc;
  uint32_t interval;
  uint16_t thread;
  uint16_t warp_syncs;
};

// Whether @p earlier (another thread's access in this interval) is not ordered before now.
inline bool unordered(const Stamp& earlier, const Now& now, const CheckState& s) {
  if (earlier.interval != now.interval || earlier.thread == now.thread) return false;
  if (earlier.thread / 32 == now.thread / 32 && earlier.warp_syncs != s.warp_syncs[now.thread / 32]) return false;
  return true;
}

[[noreturn]] void report_race(Worker& w, Lane& lane, const char* hazard, const std::string& place, const Stamp& first,
                              const char* first_kind, uintptr_t pc, const char* second_kind) {
  std::ostringstream out;
  out << "simt: racecheck: " << hazard << " hazard on shared memory at " << code_location(pc) << "\n  "
      << thread_name(w, lane.linear) << " " << second_kind << " " << place << ", which " << thread_name(w, first.thread)
      << " " << first_kind << " at " << code_location(first.pc)
      << ", with no __syncthreads() between them: on a GPU either may come first (a missing barrier, or two "
         "threads touching one element by mistake)\n  "
      << who(w, lane);
  stop_thread(w, lane, out.str());
}

// One access of @p n bytes at @p offset of a shared-memory region (dynamic, or the static block).
void shared_access(Worker& w, Lane& lane, Cell* cells, bool dynamic, uintptr_t offset, size_t n, Access kind,
                   uintptr_t pc) {
  CheckState& s = w.checks;
  const Checks& c = w.launch->checks;
  const Now now{pc, s.interval, static_cast<uint16_t>(lane.linear), s.warp_syncs[lane.linear / 32]};
  const auto note_unwritten = [&](size_t i) {
    if (c.initcheck && cells[offset + i].written_in < s.block_first_interval && !s.pending.set)
      s.pending = PendingRead{true, true, dynamic, kind == Access::atomic, offset + i, n, now.thread, pc};
  };
  for (size_t i = 0; i < n; ++i) {
    Cell& cell = cells[offset + i];
    if (kind == Access::atomic) {  // atomics never race with atomics; they do initialise
      note_unwritten(i);
      cell.written_in = now.interval;
      continue;
    }
    if (kind == Access::read) {
      if (c.racecheck && cell.write.interval == now.interval && unordered(cell.write, now, s))
        report_race(w, lane, "read-after-write", shared_place(w, dynamic, offset + i), cell.write, "wrote", pc,
                    "reads");
      note_unwritten(i);
      if (c.racecheck) {
        const Stamp stamp{now.pc, now.interval, now.thread, now.warp_syncs};
        if (cell.read.interval != now.interval) {
          cell.read = stamp;
          cell.other_read = Stamp{};
        } else if (cell.read.thread != now.thread && cell.other_read.interval != now.interval) {
          cell.other_read = stamp;
        }
      }
      continue;
    }
    if (c.racecheck) {
      if (cell.write.interval == now.interval && unordered(cell.write, now, s))
        report_race(w, lane, "write-after-write", shared_place(w, dynamic, offset + i), cell.write, "wrote", pc,
                    "writes");
      if (cell.read.interval == now.interval && unordered(cell.read, now, s))
        report_race(w, lane, "write-after-read", shared_place(w, dynamic, offset + i), cell.read, "read", pc,
                    "writes");
      if (cell.other_read.interval == now.interval && unordered(cell.other_read, now, s))
        report_race(w, lane, "write-after-read", shared_place(w, dynamic, offset + i), cell.other_read, "read", pc,
                    "writes");
      cell.write = Stamp{now.pc, now.interval, now.thread, now.warp_syncs};
    }
    cell.written_in = now.interval;
  }
}

// ---- memcheck ---------------------------------------------------------------------------------

[[noreturn]] void report_out_of_bounds(Worker& w, Lane& lane, const std::string& what, uintptr_t pc,
                                       const std::string& detail) {
  stop_thread(w, lane, "simt: memcheck: " + what + " at " + code_location(pc) + "\n  " + detail + "\n  " + who(w, lane));
}

const Allocation* device_allocation(CheckState& s, uintptr_t a, size_t n) {
  const uint64_t generation = heap_generation.load(std::memory_order_acquire);
  if (s.cached_generation == generation) {
    for (const void* entry : s.cached) {
      const auto* cached = static_cast<const Allocation*>(entry);
      if (cached != nullptr && cached->contains(a, n)) return cached;
    }
  } else {
    std::fill(std::begin(s.cached), std::end(s.cached), nullptr);
    s.cached_generation = generation;
  }
  const Allocation* found = find_allocation(a, n);
  if (found != nullptr) {
    s.cached[s.cached_next] = found;
    s.cached_next = (s.cached_next + 1) % CheckState::kCachedAllocations;
  }
  return found;
}

void global_access(Worker& w, Lane& lane, uintptr_t a, size_t n, Access kind, uintptr_t pc) {
  CheckState& s = w.checks;
  const Checks& c = w.launch->checks;
  const Allocation* al = device_allocation(s, a, n);
  if (al == nullptr) {
    if (!c.memcheck) return;
    uintptr_t base = 0;
    const std::string where = describe_device_address(a, n, &base);
    const bool freed = where.find("freed by cudaFree") != std::string::npos;
    report_out_of_bounds(
        w, lane,
        std::string(freed ? "use after cudaFree: " : "out-of-bounds ") + access_name(kind) + " of " +
            std::to_string(n) + " bytes",
        pc,
        "address " + hex(a) + " is " + (where.empty() ? "in no device allocation" : where) +
            (base != 0 ? argument_of(w, base) : ""));
  }
  if (!c.initcheck) return;
  if (kind != Access::write && !s.pending.set && !al->all_written(a, n))
    s.pending = PendingRead{true, false, false, kind == Access::atomic, a, n, static_cast<uint16_t>(lane.linear), pc};
  if (kind != Access::read) const_cast<Allocation*>(al)->mark_written(a, n);
}

// ---- one access by a kernel's thread -----------------------------------------------------------

[[gnu::noinline]] void lane_access(Worker& w, Lane& lane, uintptr_t a, size_t n, Access kind, uintptr_t pc) {
  const Checks& c = w.launch->checks;
  if (!c.any()) return;
  // The thread's own stack: local arrays and spilled variables (their indices: -fsanitize=bounds).
  if (a - reinterpret_cast<uintptr_t>(lane.stack->bottom()) < lane.stack->size()) return;
  if (in_device_heap(a)) return global_access(w, lane, a, n, kind, pc);
  CheckState& s = w.checks;
  const LaunchRequest& r = *w.launch->request;
  const auto dynamic_low = reinterpret_cast<uintptr_t>(w.shared.get());
  if (w.shared && a - dynamic_low < static_cast<uintptr_t>(kMaxSharedBytesOptin)) {
    const uintptr_t offset = a - dynamic_low;
    if (offset + n > r.shared_bytes) {
      if (!c.memcheck) return;
      report_out_of_bounds(w, lane, std::string("out-of-bounds ") + access_name(kind) + " of " + std::to_string(n) +
                                        " bytes of dynamic shared memory",
                           pc,
                           dynamic_place(offset, r.shared_bytes) + ": " +
                               (r.shared_bytes == 0 ? std::string("the launch asked for none")
                                                    : std::to_string(offset + n - r.shared_bytes) +
                                                          " bytes past its end") +
                               " (the third launch argument sets its size)");
    }
    if (s.dynamic_cells.size() < r.shared_bytes) s.dynamic_cells.resize(r.shared_bytes);
    return shared_access(w, lane, s.dynamic_cells.data(), true, offset, n, kind, pc);
  }
  if (a - s.tls_low < s.tls_bytes) {
    for (uintptr_t builtin : s.builtins)
      if (a - builtin < sizeof(uint3)) return;
    const uintptr_t offset = a - s.tls_low;
    if (offset + n > s.tls_bytes) return;
    return shared_access(w, lane, s.static_cells.data(), false, offset, n, kind, pc);
  }
  if (a >= r.frame_low && a < r.frame_high) return;  // the launch's own copy of the arguments
  for (const auto& [low, high] : other_tls)
    if (a >= low && a < high) return;
  if (program_image().contains(a)) return;  // __constant__ / __device__ variables, tables, literals
  if (in_pinned_host_memory(a, n)) return;  // cudaMallocHost memory is mapped for kernels
  if (!c.memcheck) return;
  std::string why = a < 4096 ? "a null pointer (plus " + std::to_string(a) + ")"
                             : "not device memory: host memory, another thread's local variable, or a wild pointer";
  report_out_of_bounds(w, lane, std::string("invalid ") + access_name(kind) + " of " + std::to_string(n) + " bytes", pc,
                       "address " + hex(a) + " is " + why);
}

// Host code (outside any kernel) compiled with the checks touched device memory: on a GPU the
// CPU cannot dereference a device pointer. While the heap is closed to the host (outside
// launches and runtime calls, device_memory.h) the access itself faults and host_access.cpp
// reports it, naming the allocation's site; this report covers the rest: SIMT_HOST_ACCESS=allow,
// or an access while another thread's launch or copy holds the heap open.
[[gnu::noinline]] void host_access(uintptr_t a, size_t n, Access kind, uintptr_t pc) {
  if (!checks().memcheck) return;
  if (device_memory_guarded() && !device_memory_open.load(std::memory_order_acquire)) return;
  set_error(cudaErrorIllegalAddress,
            "simt: memcheck: host code " + std::string(kind == Access::read ? "reads " : "writes ") +
                std::to_string(n) + " bytes of device memory at " + code_location(pc) +
                "\n  address " + hex(a) +
                ": on a GPU the CPU cannot dereference a device pointer — copy with cudaMemcpy, or do the work "
                "in a kernel",
            true);
}

inline void on_access(uintptr_t a, size_t n, Access kind, uintptr_t pc) {
  Worker* w = this_worker;
  if (w == nullptr || w->current == nullptr) {
    if (in_device_heap(a)) host_access(a, n, kind, pc);
    return;
  }
  lane_access(*w, *w->current, a, n, kind, pc);
}

// ---- UBSan-style checks: array indices, alignment, null --------------------------------------

struct SourceLocation {
  const char* file;
  uint32_t line;
  uint32_t column;
};
struct TypeDescriptor {
  uint16_t kind;
  uint16_t info;
  char name[1];
};
struct OutOfBoundsData {
  SourceLocation location;
  const TypeDescriptor* array_type;
  const TypeDescriptor* index_type;
};
struct TypeMismatchData {
  SourceLocation location;
  const TypeDescriptor* type;
  unsigned char log_alignment;
  unsigned char check_kind;
};

std::string line_of(const SourceLocation& l) {
  const char* file = l.file != nullptr ? l.file : "?";
  if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
  return std::string(file) + ":" + std::to_string(l.line);
}

// In a kernel's thread: a report that stops it. In host code: printed, and the program goes on.
void ub_report(const std::string& headline, const std::string& detail) {
  Worker* w = this_worker;
  if (w != nullptr && w->current != nullptr && w->launch != nullptr) {
    if (!w->launch->checks.memcheck) return;
    stop_thread(*w, *w->current, "simt: memcheck: " + headline + "\n  " + detail + "\n  " + who(*w, *w->current));
  }
  std::fprintf(stderr, "simt: memcheck (host code): %s\n  %s\n", headline.c_str(), detail.c_str());
}

}  // namespace

// ---- the block runner's hooks -----------------------------------------------------------------

void checks_begin_block(Worker& w) {
  CheckState& s = w.checks;
  if (!s.ready) prepare_worker(w);
  if (s.interval > 0xFFFFFF00u) {  // wrap: forget every stamp
    std::fill(s.static_cells.begin(), s.static_cells.end(), Cell{});
    std::fill(s.dynamic_cells.begin(), s.dynamic_cells.end(), Cell{});
    s.interval = 0;
  }
  s.block_first_interval = ++s.interval;
  s.warp_syncs.assign((w.launch->threads + 31) / 32, 0);
  s.pending = PendingRead{};
}

bool checks_end_interval(Worker& w) {
  CheckState& s = w.checks;
  ++s.interval;
  if (!s.pending.set) return true;
  const PendingRead p = s.pending;
  s.pending = PendingRead{};
  std::ostringstream out;
  out << "simt: initcheck: read of uninitialised " << (p.shared ? "shared" : "device") << " memory at "
      << code_location(p.pc) << "\n  " << thread_name(w, p.thread) << " read ";
  if (p.shared) {
    out << shared_place(w, p.dynamic, p.address) << ", which no thread of this block had written";
  } else {
    uintptr_t base = 0;
    const std::string where = describe_device_address(p.address, p.bytes, &base);
    const Allocation* al = find_allocation(p.address, p.bytes);
    out << p.bytes << " bytes " << where << argument_of(w, base);
    if (p.atomic)
      out << ", with an atomic operation, but nothing had written them since cudaMalloc: zero (cudaMemset) or "
             "store a start value first";
    else if (al != nullptr && al->all_written(p.address, p.bytes))
      out << ", before any thread had written them (another thread wrote them later in the same barrier interval: "
             "a missing __syncthreads(), or a race between blocks)";
    else
      out << ", which nothing wrote since cudaMalloc (no cudaMemcpy, cudaMemset or kernel)";
  }
  out << "\n  in " << w.launch->header(blockIdx);
  w.launch->fail(out.str());
  return false;
}


}  // namespace simt::detail

namespace simt {
bool checks_compiled() {
  return SIMT_CHECKS != 0;
}
void prepare_reports() {
  detail::prepare_symbols();
}
}  // namespace simt

// ---- the instrumentation's entry points --------------------------------------------------------
// Defined only where the kernels are compiled with the checks: under the asan / tsan presets
// those runtimes own these names. GCC's -fsanitize=thread calls __tsan_readN / __tsan_writeN
// before every load and store (thread_local variables included: static __shared__), and the
// __tsan_atomic* functions for every atomic operation, which therefore happen here.
#if SIMT_CHECKS
using simt::detail::Access;
#define SIMT_PC reinterpret_cast<uintptr_t>(__builtin_return_address(0))
#define SIMT_ACCESS_HOOKS(size)                                                         \
  extern "C" void __tsan_read##size(void* a) {                                          \
    simt::detail::on_access(reinterpret_cast<uintptr_t>(a), size, Access::read, SIMT_PC);  \
  }                                                                                     \
  extern "C" void __tsan_write##size(void* a) {                                         \
    simt::detail::on_access(reinterpret_cast<uintptr_t>(a), size, Access::write, SIMT_PC); \
  }                                                                                     \
  extern "C" void __tsan_unaligned_read##size(void* a) {                                \
    simt::detail::on_access(reinterpret_cast<uintptr_t>(a), size, Access::read, SIMT_PC);  \
  }                                                                                     \
  extern "C" void __tsan_unaligned_write##size(void* a) {                               \
    simt::detail::on_access(reinterpret_cast<uintptr_t>(a), size, Access::write, SIMT_PC); \
  }
SIMT_ACCESS_HOOKS(1)
SIMT_ACCESS_HOOKS(2)
SIMT_ACCESS_HOOKS(4)
SIMT_ACCESS_HOOKS(8)
SIMT_ACCESS_HOOKS(16)
#undef SIMT_ACCESS_HOOKS
extern "C" void __tsan_read_range(void* a, unsigned long n) {
  simt::detail::on_access(reinterpret_cast<uintptr_t>(a), n, Access::read, SIMT_PC);
}
extern "C" void __tsan_write_range(void* a, unsigned long n) {
  simt::detail::on_access(reinterpret_cast<uintptr_t>(a), n, Access::write, SIMT_PC);
}
// Called by a constructor the instrumentation adds to every translation unit: nothing to set up.
extern "C" void __tsan_init() {}
extern "C" void __tsan_func_entry(void*) {}
extern "C" void __tsan_func_exit() {}
extern "C" void __tsan_vptr_update(void**, void*) {}
extern "C" void __tsan_vptr_read(void**) {}

// Atomics: the operation itself (sequentially consistent, whatever order was asked), after the
// checks' view of it: bounds and initcheck like any access, never a race with another atomic.
#define SIMT_ATOMIC_HOOKS(bits, type)                                                                           \
  extern "C" type __tsan_atomic##bits##_load(const volatile type* a, int) {                                     \
    simt::detail::on_access(reinterpret_cast<uintptr_t>(a), sizeof(type), Access::atomic, SIMT_PC);            \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                                \
  }                                                                                                             \
  extern "C" void __tsan_atomic##bits##_store(volatile type* a, type v, int) {                                  \
    simt::detail::on_access(reinterpret_cast<uintptr_t>(a), sizeof(type), Access::write, SIMT_PC);             \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                   \
  }                                                                                                             \
  extern "C" type __tsan_atomic##bits##_exchange(volatile type* a, type v, int) {                               \
    simt::detail::on_access(reinterpret_cast<uintptr_t>(a), sizeof(type), Access::atomic, SIMT_PC);            \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                         \
  }                                                                                                             \
  SIMT_ATOMIC_RMW_HOOK(bits, type, fetch_add)                                                                   \
  SIMT_ATOMIC_RMW_HOOK(bits, type, fetch_sub)                                                                   \
  SIMT_ATOMIC_RMW_HOOK(bits, type, fetch_and)                                                                   \
  SIMT_ATOMIC_RMW_HOOK(bits, type, fetch_or)                                                                    \
  SIMT_ATOMIC_RMW_HOOK(bits, type, fetch_xor)                                                                   \
  SIMT_ATOMIC_RMW_HOOK(bits, type, fetch_nand)                                                                  \
  extern "C" int __tsan_atomic##bits##_compare_exchange_strong(volatile type* a, type* c, type v, int, int) {  \
    simt::detail::on_access(reinterpret_cast<uintptr_t>(a), sizeof(type), Access::atomic, SIMT_PC);            \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                     \
  }                                                                                                             \
  extern "C" int __tsan_atomic##bits##_compare_exchange_weak(volatile type* a, type* c, type v, int, int) {    \
    simt::detail::on_access(reinterpret_cast<uintptr_t>(a), sizeof(type), Access::atomic, SIMT_PC);            \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                      \
  }                                                                                                             \
  extern "C" type __tsan_atomic##bits##_compare_exchange_val(volatile type* a, type c, type v, int, int) {     \
    simt::detail::on_access(reinterpret_cast<uintptr_t>(a), sizeof(type), Access::atomic, SIMT_PC);            \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                           \
    return c;                                                                                                   \
  }
#define SIMT_ATOMIC_RMW_HOOK(bits, type, op)                                                         \
  extern "C" type __tsan_atomic##bits##_##op(volatile type* a, type v, int) {                        \
    simt::detail::on_access(reinterpret_cast<uintptr_t>(a), sizeof(type), Access::atomic, SIMT_PC); \
    return __atomic_##op(a, v, __ATOMIC_SEQ_CST);                                                    \
  }
SIMT_ATOMIC_HOOKS(8, int8_t)
SIMT_ATOMIC_HOOKS(16, int16_t)
SIMT_ATOMIC_HOOKS(32, int32_t)
SIMT_ATOMIC_HOOKS(64, int64_t)
#undef SIMT_ATOMIC_RMW_HOOK
#undef SIMT_ATOMIC_HOOKS
extern "C" void __tsan_atomic_thread_fence(int) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
extern "C" void __tsan_atomic_signal_fence(int) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

extern "C" void __ubsan_handle_out_of_bounds(simt::detail::OutOfBoundsData* data, uintptr_t index) {
  const bool is_signed = (data->index_type->info & 1) != 0;
  const std::string value = is_signed ? std::to_string(static_cast<intptr_t>(index)) : std::to_string(index);
  // (UBSan's type names come quoted: 'float [16]'.)
  simt::detail::ub_report("out-of-bounds index " + value + " into an array of type " +
                              std::string(data->array_type->name) + " at " + simt::detail::line_of(data->location),
                          "the index must be at least 0 and less than the array's extent");
}
extern "C" void __ubsan_handle_out_of_bounds_abort(simt::detail::OutOfBoundsData* data, uintptr_t index) {
  __ubsan_handle_out_of_bounds(data, index);
}
extern "C" void __ubsan_handle_type_mismatch_v1(simt::detail::TypeMismatchData* data, uintptr_t pointer) {
  static const char* const kinds[] = {"load of",         "store to",         "reference binding to", "member access within",
                                      "member call on",   "constructor call on", "downcast of",        "downcast of",
                                      "upcast of",        "cast to virtual base of", "_Nonnull binding to",
                                      "dynamic operation on"};
  const char* kind = data->check_kind < sizeof(kinds) / sizeof(kinds[0]) ? kinds[data->check_kind] : "access to";
  const std::string type = data->type != nullptr ? data->type->name : "?";
  const std::string at = simt::detail::line_of(data->location);
  if (pointer == 0) {
    simt::detail::ub_report(std::string(kind) + " a null pointer of type " + type + " at " + at,
                            "the pointer is null: was it allocated (cudaMalloc) and passed to the kernel?");
    return;
  }
  const uintptr_t alignment = uintptr_t{1} << data->log_alignment;
  if ((pointer & (alignment - 1)) != 0)
    simt::detail::ub_report("misaligned " + std::string(kind) + " address " + simt::detail::hex(pointer) + " at " + at,
                            "type " + type + " needs " + std::to_string(alignment) +
                                "-byte alignment (a GPU faults: cudaErrorMisalignedAddress); the address is " +
                                std::to_string(pointer & (alignment - 1)) + " bytes past a multiple of it");
}
extern "C" void __ubsan_handle_type_mismatch_v1_abort(simt::detail::TypeMismatchData* data, uintptr_t pointer) {
  __ubsan_handle_type_mismatch_v1(data, pointer);
}
#endif
