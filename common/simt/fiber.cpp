// Fibers: every thread of a block is a fiber with its own stack on the worker's OS thread.
// Stacks, a lane's life from its entry to its exit, and the sanitizer hooks: the fiber
// annotations of the context switches (inline, in detail/fiber.h) and a death callback that
// names the kernel thread of a sanitizer report.

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "simt/detail/fiber.h"

namespace simt::detail {

// ---- fiber stacks -----------------------------------------------------------------------------

Stack::Stack() {
  page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_ = stack_bytes();
  void* memory =
      mmap(nullptr, size_ + page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) throw std::bad_alloc();
  mprotect(memory, page_, PROT_NONE);
  base_ = static_cast<char*>(memory);
}

Stack::~Stack() {
#if SIMT_ASAN
  // A lane's frames leave their redzones in ASan's shadow, which munmap does not clear: the next
  // mapping at this address (libbacktrace's arena, say) would read as a stack-buffer-underflow.
  ASAN_UNPOISON_MEMORY_REGION(bottom(), size_);
#endif
  munmap(base_, size_ + page_);
}

Worker& worker() {
  thread_local std::unique_ptr<Worker> owned;
  if (!owned) owned = std::make_unique<Worker>();
  this_worker = owned.get();
  return *owned;
}

void prepare_lanes(Worker& w, unsigned threads) {
  while (w.stacks.size() < threads) w.stacks.push_back(std::make_unique<Stack>());
  if (w.lanes.size() < threads) w.lanes.resize(threads);
  for (unsigned i = 0; i < threads; ++i) w.lanes[i].stack = w.stacks[i].get();
#if SIMT_TSAN
  w.tsan_scheduler = __tsan_get_current_fiber();
#endif
}

// ---- a lane from its entry to its exit --------------------------------------------------------

namespace {
void lane_main(Worker& w, Lane& lane);
}  // namespace

#if SIMT_USE_BOOST_CONTEXT
void fiber_entry(boost::context::detail::transfer_t from) {
  Lane& lane = *static_cast<Lane*>(from.data);
  Worker& w = *this_worker;
  w.scheduler = from.fctx;
  lane_main(w, lane);
}
#else
void fiber_entry() {
  lane_main(*this_worker, *starting_lane);
}
#endif

namespace {

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

// ---- sanitizer reports ------------------------------------------------------------------------

// After a sanitizer report (out-of-bounds access, …) inside a kernel: say which thread did it.
void on_sanitizer_death() {
  Worker* w = this_worker;
  if (w == nullptr || w->current == nullptr || w->launch == nullptr) return;
  const std::string text = "simt: the fault above happened in " + w->launch->header(blockIdx) + ", thread " +
                           dims(w->current->thread) + "\n";
  std::fputs(text.c_str(), stderr);
}

}  // namespace

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

}  // namespace simt::detail
