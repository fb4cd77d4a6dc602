// The block runner: one block at a time on a worker, its threads (lanes) as fibers.
//
// A block runs in rounds. In a round every runnable thread runs, in the schedule's order, until
// it parks at a synchronisation point (__syncthreads, a warp collective) or exits. When nobody
// can run, the scheduler (1) completes warp collectives whose whole mask is parked on the same
// operation, else (2) releases a barrier at which every thread of the block waits at the same
// source line, else (3) reports what each thread waits for and unwinds the parked threads — so a
// wrong kernel fails with a message and never hangs.
//
// Also here: the kernel-side entry points (park(), active_mask(), dynamic_shared_memory()).

#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "simt/detail/fiber.h"

namespace simt::detail {
namespace {

// ---- one block --------------------------------------------------------------------------------

class BlockRunner {
 public:
  BlockRunner(Worker& w, Launch& launch) : w_(w), launch_(launch), n_(launch.threads) {}

  void run(uint64_t linear_block) {
    const LaunchRequest& r = *launch_.request;
    blockIdx = uint3{static_cast<unsigned>(linear_block % r.grid.x),
                     static_cast<unsigned>((linear_block / r.grid.x) % r.grid.y),
                     static_cast<unsigned>(linear_block / (uint64_t{r.grid.x} * r.grid.y))};
    if (r.shared_bytes > 0) {
      // One buffer per worker at the largest size, so that its address never changes; the
      // checks (or, under ASan, the poisoned tail) bound it to the launch's bytes.
      if (!w_.shared) w_.shared.reset(new unsigned char[kMaxSharedBytesOptin]);
#if SIMT_ASAN
      ASAN_UNPOISON_MEMORY_REGION(w_.shared.get(), kMaxSharedBytesOptin);
      ASAN_POISON_MEMORY_REGION(w_.shared.get() + r.shared_bytes, kMaxSharedBytesOptin - r.shared_bytes);
#endif
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
    checks_begin_block(w_);
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
      if (w_.live == 0) {
        checks_end_interval(w_);
        return;
      }
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
    checks_warp_synchronised(w_.checks, base / 32);
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
    // The interval ends here: a read of unwritten memory in it fails the launch now (the
    // threads stay parked; the caller sees the failure and unwinds them).
    if (!checks_end_interval(w_)) return true;
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
      // The first line names the source lines: it is what a grade report quotes.
      std::string sites;
      for (size_t i = 0; i < groups.size() && i < 3; ++i)
        sites += (i == 0 ? "" : i + 1 == groups.size() ? " and " : ", ") + where(groups[i].example->site);
      if (groups.size() > 3) sites += ", …";
      if (all_barriers && !exited.empty())
        headline = "barrier divergence: " + thread_list(exited) + " exited while others wait at __syncthreads() at " +
                   sites;
      else if (all_barriers)
        headline = "barrier divergence: threads wait at different __syncthreads() calls, at " + sites;
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

  // After an error: unwind every started thread that has not exited (their destructors run). A
  // thread that a check stopped inside an access counts as exited: it is never resumed.
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
  std::vector<unsigned> order_;
  std::string error_;
};

}  // namespace

void run_blocks(Launch& launch) {
  Worker& w = worker();
  w.launch = &launch;
  const LaunchRequest& r = *launch.request;
  blockDim = r.block;
  gridDim = r.grid;
  prepare_lanes(w, launch.threads);
  BlockRunner runner(w, launch);
  while (!launch.failed.load(std::memory_order_relaxed)) {
    const uint64_t k = launch.next.fetch_add(1);
    if (k >= launch.blocks) break;
    runner.run(launch.block_at(k));
  }
  w.launch = nullptr;
}

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

}  // namespace simt::detail
