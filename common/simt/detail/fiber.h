#pragma once
/// @file fiber.h
/// The context switches between the scheduler and a lane, with their sanitizer fiber
/// annotations (the emulator's own sources only; fiber.cpp has the rest of the fibers).
//
// Inline: they run twice per thread and synchronisation point, and a call into another source
// file made a 128-thread block with two barriers ~40% slower (bench_simt).

#include "simt/detail/engine.h"

/// @cond SIMT_DETAIL
namespace simt::detail {

// Where a new lane starts (fiber.cpp): runs the kernel, then switches away for good.
#if SIMT_USE_BOOST_CONTEXT
void fiber_entry(boost::context::detail::transfer_t from);
#else
inline thread_local Lane* starting_lane = nullptr;
void fiber_entry();
#endif

// Scheduler -> lane; returns when the lane parks or exits.
inline void switch_to_lane(Worker& w, Lane& lane) {
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
inline void switch_to_scheduler(Worker& w, Lane& lane, bool final) {
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

}  // namespace simt::detail
/// @endcond
