// The SIMT emulator's engine: every thread of a block is a fiber on one OS thread; blocks are
// spread over a pool of worker threads.
//
// A block runs in rounds. In a round every runnable thread runs, in the schedule's order, until
// it parks at a synchronisation point (__syncthreads, a warp collective) or exits. When nobody
// can run, the scheduler (1) completes warp collectives whose whole mask is parked on the same
// operation, else (2) releases a barrier at which every thread of the block waits at the same
// source line, else (3) reports what each thread waits for and unwinds the parked threads — so a
// wrong kernel fails with a message and never hangs.

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "simt/internal.h"

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

namespace simt {
namespace detail {
namespace {

// ---- settings ---------------------------------------------------------------------------------

std::mutex settings_mutex;
bool schedule_set = false;
Schedule current_schedule;
int worker_count = 0;

Schedule schedule_from_environment() {
  const char* text = std::getenv("SIMT_SCHEDULE");
  if (text == nullptr || *text == '\0') return {};
  return Schedule::parse(text);
}

int workers_from_environment() {
  if (const char* text = std::getenv("SIMT_WORKERS"); text != nullptr && *text != '\0') {
    const int count = std::atoi(text);
    if (count >= 1) return count;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

size_t stack_bytes() {
  static const size_t bytes = [] {
    size_t kib = SIMT_ASAN ? 1024 : 256;
    if (const char* text = std::getenv("SIMT_STACK_KIB"); text != nullptr && std::atoi(text) >= 16)
      kib = static_cast<size_t>(std::atoi(text));
    return kib * 1024;
  }();
  return bytes;
}

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

std::string where(const std::source_location& site) {
  std::string file = site.file_name();
  if (const auto slash = file.find_last_of('/'); slash != std::string::npos) file = file.substr(slash + 1);
  return file + ":" + std::to_string(site.line());
}

bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

std::string dims(uint3 d) {
  std::string text(1, '(');  // (built by appending: g++ 12 warns falsely on "(" + std::string)
  text.append(std::to_string(d.x)).append(1, ',').append(std::to_string(d.y)).append(1, ',');
  text.append(std::to_string(d.z)).append(1, ')');
  return text;
}

const char* op_name(Op op) {
  switch (op) {
    case Op::barrier:
      return "__syncthreads()";
    case Op::syncwarp:
      return "__syncwarp";
    case Op::shfl_idx:
      return "__shfl_sync";
    case Op::shfl_up:
      return "__shfl_up_sync";
    case Op::shfl_down:
      return "__shfl_down_sync";
    case Op::shfl_xor:
      return "__shfl_xor_sync";
    case Op::ballot:
      return "__ballot_sync";
    case Op::any:
      return "__any_sync";
    case Op::all:
      return "__all_sync";
    case Op::reduce_add:
      return "__reduce_add_sync";
    case Op::reduce_min_signed:
    case Op::reduce_min_unsigned:
      return "__reduce_min_sync";
    case Op::reduce_max_signed:
    case Op::reduce_max_unsigned:
      return "__reduce_max_sync";
    case Op::reduce_and:
      return "__reduce_and_sync";
    case Op::reduce_or:
      return "__reduce_or_sync";
    case Op::reduce_xor:
      return "__reduce_xor_sync";
    case Op::match_any:
      return "__match_any_sync";
  }
  return "?";
}

// "0-15, 17, 20-31": compact list of linear thread ids.
std::string id_ranges(const std::vector<unsigned>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (i != 0) out << ", ";
    out << ids[i];
    if (j > i) out << "-" << ids[j];
    i = j + 1;
  }
  return out.str();
}

// The symbol at exactly @p address from the ELF symbol table of the file that holds it: finds
// kernels with internal linkage (static, anonymous namespace), which dladdr cannot see.
std::string elf_symbol(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  if (info.dli_sname != nullptr && info.dli_saddr == address) return info.dli_sname;
  const char* path = info.dli_fname[0] != '\0' ? info.dli_fname : "/proc/self/exe";
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string found;
  if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) > sizeof(Elf64_Ehdr)) {
    void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
      const auto* bytes = static_cast<const unsigned char*>(map);
      const auto* header = static_cast<const Elf64_Ehdr*>(map);
      const size_t size = static_cast<size_t>(st.st_size);
      if (std::memcmp(header->e_ident, ELFMAG, SELFMAG) == 0 && header->e_ident[EI_CLASS] == ELFCLASS64 &&
          header->e_shoff + size_t{header->e_shnum} * sizeof(Elf64_Shdr) <= size) {
        const auto* sections = reinterpret_cast<const Elf64_Shdr*>(bytes + header->e_shoff);
        const uintptr_t bias = header->e_type == ET_DYN ? reinterpret_cast<uintptr_t>(info.dli_fbase) : 0;
        const uintptr_t wanted = reinterpret_cast<uintptr_t>(address) - bias;
        for (unsigned i = 0; i < header->e_shnum && found.empty(); ++i) {
          const Elf64_Shdr& table = sections[i];
          if (table.sh_type != SHT_SYMTAB || table.sh_link >= header->e_shnum) continue;
          const Elf64_Shdr& names = sections[table.sh_link];
          if (table.sh_offset + table.sh_size > size || names.sh_offset + names.sh_size > size) continue;
          const auto* symbols = reinterpret_cast<const Elf64_Sym*>(bytes + table.sh_offset);
          for (size_t j = 0; j < table.sh_size / sizeof(Elf64_Sym); ++j) {
            if (ELF64_ST_TYPE(symbols[j].st_info) != STT_FUNC || symbols[j].st_value != wanted) continue;
            if (symbols[j].st_name < names.sh_size)
              found = reinterpret_cast<const char*>(bytes + names.sh_offset + symbols[j].st_name);
            break;
          }
        }
      }
      munmap(map, size);
    }
  }
  close(fd);
  return found;
}

std::string kernel_name(const void* kernel, const std::source_location& site) {
  static std::mutex mutex;
  static std::map<const void*, std::string> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(kernel); it != cache.end()) return it->second;
  std::string name = kernel != nullptr ? elf_symbol(kernel) : "";
  if (!name.empty()) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status),
                                                     std::free);
    if (status == 0 && demangled) name = demangled.get();
  } else {
    name = "<kernel launched at " + where(site) + ">";
  }
  cache.emplace(kernel, name);
  return name;
}

// ---- fiber stacks -----------------------------------------------------------------------------

// One mmap per stack with a PROT_NONE guard page below it: an overflow faults at once.
class Stack {
 public:
  Stack() {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_ = stack_bytes();
    void* memory =
        mmap(nullptr, size_ + page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) throw std::bad_alloc();
    mprotect(memory, page_, PROT_NONE);
    base_ = static_cast<char*>(memory);
  }
  ~Stack() { munmap(base_, size_ + page_); }
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

struct Watch {
  std::mutex mutex;
  std::atomic<bool> active{false};
  const unsigned char* address = nullptr;
  std::vector<unsigned char> snapshot;
  std::vector<WatchedWrite> writes;
} watch;

// Per OS thread: fiber stacks and lanes, reused from block to block.
struct Worker {
  std::vector<std::unique_ptr<Stack>> stacks;
  std::vector<Lane> lanes;
  Lane* current = nullptr;
  Launch* launch = nullptr;
  unsigned live = 0;
  std::unique_ptr<unsigned char[]> shared;
  size_t shared_bytes = 0;
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

thread_local Worker* this_worker = nullptr;

Worker& worker() {
  thread_local std::unique_ptr<Worker> owned;
  if (!owned) owned = std::make_unique<Worker>();
  this_worker = owned.get();
  return *owned;
}

__extension__ typedef unsigned __int128 Wide;

struct Launch {
  const LaunchRequest* request = nullptr;
  std::string kernel;
  Schedule schedule;
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

// ---- context switches -------------------------------------------------------------------------

void lane_main(Worker& w, Lane& lane);

#if SIMT_USE_BOOST_CONTEXT
void fiber_entry(boost::context::detail::transfer_t from) {
  Lane& lane = *static_cast<Lane*>(from.data);
  Worker& w = *this_worker;
  w.scheduler = from.fctx;
  lane_main(w, lane);
}
#else
thread_local Lane* starting_lane = nullptr;
void fiber_entry() {
  lane_main(*this_worker, *starting_lane);
}
#endif

// Scheduler -> lane; returns when the lane parks or exits.
void switch_to_lane(Worker& w, Lane& lane) {
  w.current = &lane;
  threadIdx = lane.thread;
  if (!lane.started) {
    lane.started = true;
#if SIMT_ASAN
    if (lane.stack->dirty_from != nullptr) {
      ASAN_UNPOISON_MEMORY_REGION(lane.stack->dirty_from,
                                  static_cast<size_t>(lane.stack->top() - lane.stack->dirty_from));
      lane.stack->dirty_from = nullptr;
    }
#endif
#if SIMT_USE_BOOST_CONTEXT
    lane.context = boost::context::detail::make_fcontext(lane.stack->top(), lane.stack->size(), fiber_entry);
#else
    getcontext(&lane.context);
    lane.context.uc_stack.ss_sp = lane.stack->bottom();
    lane.context.uc_stack.ss_size = lane.stack->size();
    lane.context.uc_link = nullptr;
    makecontext(&lane.context, fiber_entry, 0);
    starting_lane = &lane;
#endif
#if SIMT_TSAN
    if (lane.tsan_fiber == nullptr) lane.tsan_fiber = __tsan_create_fiber(0);
#endif
  }
#if SIMT_TSAN
  __tsan_switch_to_fiber(lane.tsan_fiber, 0);
#endif
#if SIMT_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, lane.stack->bottom(), lane.stack->size());
#endif
#if SIMT_USE_BOOST_CONTEXT
  auto back = boost::context::detail::jump_fcontext(lane.context, &lane);
  if (lane.state != State::exited) lane.context = back.fctx;
#else
  swapcontext(&w.scheduler, &lane.context);
#endif
#if SIMT_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  w.current = nullptr;
}

// Lane -> scheduler (park). Returns when the scheduler resumes this lane.
void switch_to_scheduler(Worker& w, Lane& lane, bool final) {
#if SIMT_TSAN
  __tsan_switch_to_fiber(w.tsan_scheduler, 0);
#endif
#if SIMT_ASAN
  if (final)
    lane.stack->dirty_from = std::max(lane.stack->bottom(), static_cast<char*>(__builtin_frame_address(0)) - 4096);
  __sanitizer_start_switch_fiber(final ? nullptr : &lane.fake_stack, w.scheduler_stack_bottom, w.scheduler_stack_size);
#endif
#if SIMT_USE_BOOST_CONTEXT
  auto back = boost::context::detail::jump_fcontext(w.scheduler, nullptr);
  w.scheduler = back.fctx;
#else
  swapcontext(&lane.context, &w.scheduler);
#endif
#if SIMT_ASAN
  __sanitizer_finish_switch_fiber(lane.fake_stack, &w.scheduler_stack_bottom, &w.scheduler_stack_size);
#endif
  (void) final;
}

void lane_main(Worker& w, Lane& lane) {
#if SIMT_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &w.scheduler_stack_bottom, &w.scheduler_stack_size);
#endif
  try {
    w.launch->request->body();
  } catch (const LaneAbort&) {
  } catch (const std::exception& e) {
    w.launch->fail("simt: " + w.launch->header(blockIdx) + ", thread " + dims(lane.thread) +
                   ": the kernel threw an exception: " + e.what());
  } catch (...) {
    w.launch->fail("simt: " + w.launch->header(blockIdx) + ", thread " + dims(lane.thread) +
                   ": the kernel threw an exception");
  }
  lane.state = State::exited;
  --w.live;
  switch_to_scheduler(w, lane, true);
  std::abort();  // an exited lane is never resumed
}

// ---- one block --------------------------------------------------------------------------------

void record_watch(Worker& w, Lane& lane) {
  std::lock_guard lock(watch.mutex);
  if (watch.address == nullptr) return;
  if (std::memcmp(watch.snapshot.data(), watch.address, watch.snapshot.size()) == 0) return;
  std::memcpy(watch.snapshot.data(), watch.address, watch.snapshot.size());
  WatchedWrite write;
  write.kernel = w.launch->kernel;
  write.block = blockIdx;
  write.thread = lane.thread;
  write.from = lane.has_resumed_from
                   ? "after " + std::string(op_name(lane.resumed_from_op)) + " at " + where(lane.resumed_from)
                   : "kernel start";
  write.to = lane.state == State::exited ? "exit" : std::string(op_name(lane.op)) + " at " + where(lane.site);
  watch.writes.push_back(std::move(write));
}

class BlockRunner {
 public:
  BlockRunner(Worker& w, Launch& launch) : w_(w), launch_(launch), n_(launch.threads) {}

  void run(uint64_t linear_block) {
    const LaunchRequest& r = *launch_.request;
    blockIdx = uint3{static_cast<unsigned>(linear_block % r.grid.x),
                     static_cast<unsigned>((linear_block / r.grid.x) % r.grid.y),
                     static_cast<unsigned>(linear_block / (uint64_t{r.grid.x} * r.grid.y))};
    block_linear_ = linear_block;
    if (r.shared_bytes > 0) {
      if (w_.shared_bytes != r.shared_bytes) {  // exact size, so that ASan sees overruns
        w_.shared.reset(new unsigned char[r.shared_bytes]);
        w_.shared_bytes = r.shared_bytes;
      }
      std::memset(w_.shared.get(), 0xFF, r.shared_bytes);
    }
    for (unsigned i = 0; i < n_; ++i) {
      Lane& lane = w_.lanes[i];
      lane.thread = uint3{i % r.block.x, (i / r.block.x) % r.block.y, i / (r.block.x * r.block.y)};
      lane.linear = i;
      lane.state = State::ready;
      lane.started = false;
      lane.abort = false;
      lane.has_resumed_from = false;
    }
    w_.live = n_;
    order_.resize(n_);
    for (unsigned i = 0; i < n_; ++i) order_[i] = launch_.schedule.order == Order::reverse ? n_ - 1 - i : i;

    for (uint64_t round = 0;; ++round) {
      if (launch_.schedule.order == Order::random) {
        SplitMix rng{launch_.schedule.seed * 0x2545f4914f6cdd1dull ^ (linear_block << 20) ^ round};
        std::shuffle(order_.begin(), order_.end(), rng);
      }
      for (unsigned index : order_) {
        Lane& lane = w_.lanes[index];
        if (lane.state != State::ready) continue;
        switch_to_lane(w_, lane);
        if (watch.active.load(std::memory_order_relaxed)) record_watch(w_, lane);
        if (launch_.failed.load(std::memory_order_relaxed)) break;
      }
      if (launch_.failed.load(std::memory_order_relaxed)) break;
      if (w_.live == 0) return;
      if (resolve_warps()) continue;
      if (!error_.empty()) {
        launch_.fail(error_);
        break;
      }
      if (resolve_barrier()) continue;
      launch_.fail(diagnose());
      break;
    }
    unwind();
  }

 private:
  // Completes every warp collective whose mask's lanes are all parked on it. Returns whether any did.
  bool resolve_warps() {
    bool progressed = false;
    for (unsigned warp_base = 0; warp_base < n_; warp_base += 32) {
      const unsigned count = std::min(32u, n_ - warp_base);
      const unsigned existing = count == 32 ? ~0u : (1u << count) - 1;
      for (unsigned i = 0; i < count; ++i) {
        Lane& lane = w_.lanes[warp_base + i];
        if (lane.state != State::parked || lane.op == Op::barrier) continue;
        const unsigned mask = lane.mask;
        if (((mask >> i) & 1u) == 0 || (mask & ~existing) != 0) continue;  // reported by diagnose()
        bool complete = true;
        for (unsigned j = 0; j < count && complete; ++j) {
          if (((mask >> j) & 1u) == 0) continue;
          const Lane& other = w_.lanes[warp_base + j];
          complete = other.state == State::parked && other.op == lane.op && other.mask == mask;
        }
        if (!complete) continue;
        complete_collective(warp_base, count, mask, lane.op);
        progressed = true;
      }
    }
    return progressed;
  }

  void complete_collective(unsigned base, unsigned count, unsigned mask, Op op) {
    Lane* lanes = &w_.lanes[base];
    uint64_t combined = 0;
    bool first = true;
    for (unsigned j = 0; j < count; ++j) {
      if (((mask >> j) & 1u) == 0) continue;
      const uint64_t v = lanes[j].value;
      const auto s = static_cast<int32_t>(static_cast<uint32_t>(v));
      const auto u = static_cast<uint32_t>(v);
      switch (op) {
        case Op::ballot:
          combined |= (v != 0 ? 1ull : 0ull) << j;
          break;
        case Op::any:
          combined |= (v != 0);
          break;
        case Op::all:
          combined = first ? (v != 0) : (combined && v != 0);
          break;
        case Op::reduce_add:
          combined += u;
          break;
        case Op::reduce_min_signed:
          combined =
              first ? static_cast<uint32_t>(s) : static_cast<uint32_t>(std::min(static_cast<int32_t>(combined), s));
          break;
        case Op::reduce_max_signed:
          combined =
              first ? static_cast<uint32_t>(s) : static_cast<uint32_t>(std::max(static_cast<int32_t>(combined), s));
          break;
        case Op::reduce_min_unsigned:
          combined = first ? u : std::min<uint64_t>(combined, u);
          break;
        case Op::reduce_max_unsigned:
          combined = first ? u : std::max<uint64_t>(combined, u);
          break;
        case Op::reduce_and:
          combined = first ? u : (combined & u);
          break;
        case Op::reduce_or:
          combined |= u;
          break;
        case Op::reduce_xor:
          combined ^= u;
          break;
        default:
          break;
      }
      first = false;
    }
    for (unsigned j = 0; j < count; ++j) {
      if (((mask >> j) & 1u) == 0) continue;
      Lane& lane = lanes[j];
      const int width = lane.width;
      if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
        error_ = "simt: " + launch_.header(blockIdx) + ", thread " + dims(lane.thread) + ": " + op_name(op) + " at " +
                 where(lane.site) + " has width " + std::to_string(width) + " (must be a power of 2 up to 32)";
        lane.result = 0;
      }
      const unsigned segment = width >= 1 && width <= 32 ? j & ~static_cast<unsigned>(width - 1) : j;
      unsigned source = j;
      switch (op) {
        case Op::shfl_idx:
          source = segment + (static_cast<unsigned>(lane.arg) & static_cast<unsigned>(width - 1));
          break;
        case Op::shfl_up:
          source = j - segment >= static_cast<unsigned>(lane.arg) ? j - lane.arg : j;
          break;
        case Op::shfl_down:
          source = j - segment + lane.arg < static_cast<unsigned>(width) ? j + lane.arg : j;
          break;
        case Op::shfl_xor: {
          const unsigned target = j ^ static_cast<unsigned>(lane.arg);
          source = target < segment + width ? target : j;
          break;
        }
        default:
          break;
      }
      switch (op) {
        case Op::shfl_idx:
        case Op::shfl_up:
        case Op::shfl_down:
        case Op::shfl_xor:
          // Reading a lane outside the mask is undefined on a GPU: hand back poison.
          lane.result = source < count && ((mask >> source) & 1u) ? lanes[source].value : ~uint64_t{0};
          break;
        case Op::match_any: {
          uint64_t same = 0;
          for (unsigned k = 0; k < count; ++k)
            if (((mask >> k) & 1u) && lanes[k].value == lane.value) same |= 1ull << k;
          lane.result = same;
          break;
        }
        case Op::syncwarp:
          lane.result = 0;
          break;
        default:
          lane.result = combined;
          break;
      }
      resume_from(lane);
    }
  }

  void resume_from(Lane& lane) {
    lane.state = State::ready;
    lane.has_resumed_from = true;
    lane.resumed_from = lane.site;
    lane.resumed_from_op = lane.op;
  }

  // Releases the barrier when every thread of the block waits at the same __syncthreads.
  bool resolve_barrier() {
    const Lane* first = nullptr;
    uint64_t count = 0;
    for (unsigned i = 0; i < n_; ++i) {
      const Lane& lane = w_.lanes[i];
      if (lane.state != State::parked || lane.op != Op::barrier) return false;
      if (first == nullptr)
        first = &lane;
      else if (!same_site(first->site, lane.site))
        return false;
      count += lane.value != 0;
    }
    const uint64_t result = count | (uint64_t{n_} << 32);
    for (unsigned i = 0; i < n_; ++i) {
      w_.lanes[i].result = result;
      resume_from(w_.lanes[i]);
    }
    return true;
  }

  std::string thread_list(const std::vector<unsigned>& ids) const {
    std::string text = (ids.size() == 1 ? "thread " : "threads ") + id_ranges(ids);
    const LaunchRequest& r = *launch_.request;
    if (r.block.y > 1 || r.block.z > 1) text += " (threadIdx of the first: " + dims(w_.lanes[ids.front()].thread) + ")";
    return text;
  }

  // Nothing can progress: say why, naming every group of threads and where it waits.
  std::string diagnose() const {
    struct Group {
      const Lane* example;
      std::vector<unsigned> ids;
    };
    std::vector<Group> groups;
    std::vector<unsigned> exited;
    std::string headline;
    for (unsigned i = 0; i < n_; ++i) {
      const Lane& lane = w_.lanes[i];
      if (lane.state == State::exited) {
        exited.push_back(i);
        continue;
      }
      auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
        return g.example->op == lane.op && g.example->mask == lane.mask && same_site(g.example->site, lane.site) &&
               (lane.op == Op::barrier || g.example->linear / 32 == lane.linear / 32);
      });
      if (it == groups.end())
        groups.push_back(Group{&lane, {i}});
      else
        it->ids.push_back(i);
    }
    const auto is_exited = [&](unsigned id) { return w_.lanes[id].state == State::exited; };
    for (const Group& g : groups) {
      if (!headline.empty() || g.example->op == Op::barrier) continue;
      const unsigned base = g.example->linear / 32 * 32;
      const unsigned count = std::min(32u, n_ - base);
      const unsigned existing = count == 32 ? ~0u : (1u << count) - 1;
      std::vector<unsigned> missing, gone;
      for (unsigned j = 0; j < 32; ++j) {
        if (((g.example->mask >> j) & 1u) == 0) continue;
        if (((existing >> j) & 1u) == 0)
          missing.push_back(base + j);
        else if (is_exited(base + j))
          gone.push_back(base + j);
      }
      std::ostringstream mask;
      mask << "0x" << std::hex << g.example->mask;
      const std::string call =
          std::string(op_name(g.example->op)) + "(mask " + mask.str() + ") at " + where(g.example->site);
      if (!missing.empty())
        headline = call + " names " + thread_list(missing) + ", which do not exist (the block has " +
                   std::to_string(n_) + " threads)";
      else if (!gone.empty())
        headline = call + " names " + thread_list(gone) + ", which have already exited";
      else if (((g.example->mask >> (g.example->linear - base)) & 1u) == 0)
        headline = call + " is called by " + thread_list(g.ids) + ", which are not in its mask";
    }
    if (headline.empty()) {
      const bool all_barriers =
          std::all_of(groups.begin(), groups.end(), [](const Group& g) { return g.example->op == Op::barrier; });
      if (all_barriers && !exited.empty())
        headline = "barrier divergence: " + thread_list(exited) + " exited while others wait at __syncthreads()";
      else if (all_barriers)
        headline = "barrier divergence: threads wait at different __syncthreads() calls";
      else
        headline = "deadlock: the threads wait at synchronisation points that can never complete";
    }
    std::ostringstream out;
    out << "simt: " << headline << "\n  in " << launch_.header(blockIdx) << "; nothing can progress:";
    for (const Group& g : groups) {
      out << "\n    " << thread_list(g.ids) << " wait at " << op_name(g.example->op);
      if (g.example->op != Op::barrier) out << "(mask 0x" << std::hex << g.example->mask << std::dec << ")";
      out << " at " << where(g.example->site) << " in " << g.example->site.function_name();
    }
    if (!exited.empty()) out << "\n    " << thread_list(exited) << " exited";
    return out.str();
  }

  // After an error: unwind every started thread that has not exited (their destructors run).
  void unwind() {
    for (unsigned i = 0; i < n_; ++i) {
      Lane& lane = w_.lanes[i];
      if (!lane.started || lane.state == State::exited) continue;
      lane.abort = true;
      switch_to_lane(w_, lane);
    }
  }

  Worker& w_;
  Launch& launch_;
  unsigned n_;
  uint64_t block_linear_ = 0;
  std::vector<unsigned> order_;
  std::string error_;
};

void run_blocks(Launch& launch) {
  Worker& w = worker();
  w.launch = &launch;
  const LaunchRequest& r = *launch.request;
  blockDim = r.block;
  gridDim = r.grid;
  while (w.stacks.size() < launch.threads) w.stacks.push_back(std::make_unique<Stack>());
  if (w.lanes.size() < launch.threads) w.lanes.resize(launch.threads);
  for (unsigned i = 0; i < launch.threads; ++i) w.lanes[i].stack = w.stacks[i].get();
#if SIMT_TSAN
  w.tsan_scheduler = __tsan_get_current_fiber();
#endif
  BlockRunner runner(w, launch);
  while (!launch.failed.load(std::memory_order_relaxed)) {
    const uint64_t k = launch.next.fetch_add(1);
    if (k >= launch.blocks) break;
    runner.run(launch.block_at(k));
  }
  w.launch = nullptr;
}

// ---- worker pool ------------------------------------------------------------------------------

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  // Runs the launch's blocks on the calling thread plus (helpers) pool threads.
  void run(Launch& launch, unsigned helpers) {
    while (threads_.size() < helpers) threads_.emplace_back([this, index = threads_.size()] { loop(index); });
    {
      std::lock_guard lock(mutex_);
      job_ = &launch;
      helpers_ = helpers;
      pending_ = helpers;
      ++generation_;
    }
    if (helpers > 0) wake_.notify_all();
    run_blocks(launch);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  void loop(size_t index) {
    uint64_t seen = 0;
    for (;;) {
      Launch* job = nullptr;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && index < helpers_); });
        if (stopping_) return;
        seen = generation_;
        job = job_;
      }
      run_blocks(*job);
      {
        std::lock_guard lock(mutex_);
        --pending_;
      }
      done_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  Launch* job_ = nullptr;
  size_t helpers_ = 0;
  size_t pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

std::mutex launch_mutex;  // one launch at a time (the emulator is one device)

// After a sanitizer report (out-of-bounds access, …) inside a kernel: say which thread did it.
void on_sanitizer_death() {
  Worker* w = this_worker;
  if (w == nullptr || w->current == nullptr || w->launch == nullptr) return;
  const std::string text = "simt: the fault above happened in " + w->launch->header(blockIdx) + ", thread " +
                           dims(w->current->thread) + "\n";
  std::fputs(text.c_str(), stderr);
}

// Registers on_sanitizer_death with every sanitizer runtime in the process. With g++, ASan and
// UBSan are separate libraries, each with its own death callback, so look each one up.
void install_sanitizer_death_callbacks() {
  using Setter = void (*)(void (*)());
  if (auto set = reinterpret_cast<Setter>(dlsym(RTLD_DEFAULT, "__sanitizer_set_death_callback")))
    set(on_sanitizer_death);
  for (const char* library : {"libubsan.so.1", "libasan.so.8", "libtsan.so.2"}) {
    void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    if (auto set = reinterpret_cast<Setter>(dlsym(handle, "__sanitizer_set_death_callback"))) set(on_sanitizer_death);
    dlclose(handle);
  }
}
LaunchRecord last_record;

}  // namespace

// ---- the kernel-side entry points -------------------------------------------------------------

uint64_t park(Op op, unsigned mask, uint64_t value, int arg, int width, const std::source_location& site) {
  Worker* w = this_worker;
  if (w == nullptr || w->current == nullptr) {
    throw std::logic_error(std::string(op_name(op)) + " at " + where(site) + " called outside a kernel");
  }
  Lane& lane = *w->current;
  lane.op = op;
  lane.mask = mask;
  lane.value = value;
  lane.arg = arg;
  lane.width = width;
  lane.site = site;
  lane.state = State::parked;
  switch_to_scheduler(*w, lane, false);
  if (lane.abort) throw LaneAbort{};
  return lane.result;
}

unsigned active_mask() {
  Worker* w = this_worker;
  if (w == nullptr || w->current == nullptr) return 0;
  const unsigned base = w->current->linear / 32 * 32;
  const unsigned count = std::min(32u, static_cast<unsigned>(w->launch->threads) - base);
  unsigned mask = 0;
  for (unsigned j = 0; j < count; ++j)
    if (w->lanes[base + j].state != State::exited) mask |= 1u << j;
  return mask;
}

unsigned char* dynamic_shared_memory() {
  Worker* w = this_worker;
  if (w == nullptr || w->launch == nullptr || w->launch->request->shared_bytes == 0) return nullptr;
  return w->shared.get();
}

cudaError_t run_launch(const LaunchRequest& request) {
  std::lock_guard lock(launch_mutex);
  static const bool death_callbacks_installed = [] {
    install_sanitizer_death_callbacks();
    return true;
  }();
  (void)death_callbacks_installed;
  if (const cudaError_t sticky = sticky_error(); sticky != cudaSuccess) return sticky;
  Launch launch;
  launch.request = &request;
  launch.kernel = kernel_name(request.kernel, request.site);
  launch.schedule = schedule();
  last_record = LaunchRecord{launch.kernel, where(request.site), request.grid, request.block, request.shared_bytes};

  const uint3 b = request.block, g = request.grid;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  const std::string name = "simt: launch of '" + launch.kernel + "' at " + where(request.site) + ": ";
  if (b.x == 0 || b.y == 0 || b.z == 0 || g.x == 0 || g.y == 0 || g.z == 0)
    return set_error(cudaErrorInvalidConfiguration,
                     name + "grid " + dims(g) + " / block " + dims(b) + " has a zero dimension", false);
  if (threads > kMaxThreadsPerBlock || b.x > 1024 || b.y > 1024 || b.z > 64)
    return set_error(cudaErrorInvalidConfiguration,
                     name + "blockDim " + dims(b) + " = " + std::to_string(threads) +
                         " threads; a block holds at most 1024 (x, y <= 1024, z <= 64)",
                     false);
  if (g.x > 2147483647u || g.y > 65535 || g.z > 65535)
    return set_error(cudaErrorInvalidConfiguration, name + "gridDim " + dims(g) + " exceeds (2^31-1, 65535, 65535)",
                     false);
  const int limit = max_dynamic_shared_bytes(request.kernel);
  if (request.shared_bytes > static_cast<size_t>(limit))
    return set_error(
        cudaErrorInvalidValue,
        name + std::to_string(request.shared_bytes) + " bytes of dynamic shared memory exceed the limit of " +
            std::to_string(limit) +
            (limit == kDefaultSharedBytes ? " (raise it with cudaFuncSetAttribute(kernel, "
                                            "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), up to 227 KiB)"
                                          : ""),
        false);

  launch.blocks = uint64_t{g.x} * g.y * g.z;
  launch.threads = static_cast<unsigned>(threads);
  if (launch.schedule.order == Order::random && launch.blocks > 1) {
    SplitMix rng{launch.schedule.seed ^ 0x5bd1e995ull};
    launch.offset = rng() % launch.blocks;
    do launch.stride = rng() % launch.blocks;
    while (launch.stride == 0 || std::gcd(launch.stride, launch.blocks) != 1);
  }
  if (watch.active.load()) {  // host writes between launches are nobody's thread
    std::lock_guard watch_lock(watch.mutex);
    if (watch.address != nullptr) std::memcpy(watch.snapshot.data(), watch.address, watch.snapshot.size());
  }
  static Pool pool;
  const unsigned helpers =
      static_cast<unsigned>(std::min<uint64_t>(static_cast<uint64_t>(workers()), launch.blocks)) - 1;
  try {
    pool.run(launch, helpers);
  } catch (const std::exception& e) {
    launch.fail(std::string("simt: the emulator failed: ") + e.what());
  }
  if (launch.failed) return set_error(cudaErrorLaunchFailure, launch.error, true);
  return cudaSuccess;
}

}  // namespace detail

// ---- public controls --------------------------------------------------------------------------

Schedule Schedule::parse(std::string_view text) {
  if (text == "forward") return {Order::forward, 0};
  if (text == "reverse") return {Order::reverse, 0};
  if (text.starts_with("random:") && text.size() > 7) {
    const std::string digits(text.substr(7));
    char* end = nullptr;
    const uint64_t seed = std::strtoull(digits.c_str(), &end, 10);
    if (end != nullptr && *end == '\0') return {Order::random, seed};
  }
  throw std::invalid_argument("SIMT_SCHEDULE = " + std::string(text) + ": must be forward, reverse or random:SEED");
}

std::string Schedule::to_string() const {
  switch (order) {
    case Order::forward:
      return "forward";
    case Order::reverse:
      return "reverse";
    case Order::random:
      return "random:" + std::to_string(seed);
  }
  return "?";
}

Schedule schedule() {
  std::lock_guard lock(detail::settings_mutex);
  if (!detail::schedule_set) {
    detail::current_schedule = detail::schedule_from_environment();
    detail::schedule_set = true;
  }
  return detail::current_schedule;
}

void set_schedule(Schedule value) {
  std::lock_guard lock(detail::settings_mutex);
  detail::current_schedule = value;
  detail::schedule_set = true;
}

int workers() {
  std::lock_guard lock(detail::settings_mutex);
  if (detail::worker_count == 0) detail::worker_count = detail::workers_from_environment();
  return detail::worker_count;
}

void set_workers(int count) {
  if (count < 1) throw std::invalid_argument("simt::set_workers: count = " + std::to_string(count) + ": must be >= 1");
  std::lock_guard lock(detail::settings_mutex);
  detail::worker_count = count;
}

LaunchRecord last_launch() {
  std::lock_guard lock(detail::launch_mutex);
  return detail::last_record;
}

void watch_writes(const void* address, size_t bytes) {
  std::lock_guard lock(detail::watch.mutex);
  detail::watch.writes.clear();
  if (address == nullptr || bytes == 0) {
    detail::watch.address = nullptr;
    detail::watch.active = false;
    return;
  }
  detail::watch.address = static_cast<const unsigned char*>(address);
  detail::watch.snapshot.assign(detail::watch.address, detail::watch.address + bytes);
  detail::watch.active = true;
}

std::vector<WatchedWrite> watched_writes() {
  std::lock_guard lock(detail::watch.mutex);
  return detail::watch.writes;
}

}  // namespace simt
