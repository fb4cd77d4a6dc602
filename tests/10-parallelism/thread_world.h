#pragma once
// A world of p ranks that are threads of this process, joined by the contract's Link
// (exercises/10-parallelism/ch10.h): what exercise 10.2's graded tests run a ring all-reduce on —
// in the sandboxed child, for the graded test — and what the wrong fixtures run theirs on.
//
// Every send is a rendezvous: it returns only once the receiver has copied the floats, as MPI_Send
// does for large messages. So an order of calls that deadlocks under MPI deadlocks here too — and
// the world sees it: a deadlock is every rank that has not returned waiting in a send or a recv
// that nothing can complete any more. The last rank to block finds it, and every blocked call then
// throws; run_ring_world() reports what each rank was waiting for, never hangs. A message of
// another size than the receiver asks for fails the world the same way, naming both ranks. The
// Link counts what each rank sends (floats, messages) and to whom, and whom it receives from.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "10-parallelism/ch10.h"
#include "common/check.h"

namespace inferlab::testing::ch10 {

/// What one rank did on its Link (trivially copyable: it comes back from the sandbox as it is).
struct RankTraffic {
  int64_t floats_sent = 0;      ///< floats in all its messages
  int64_t messages_sent = 0;    ///< send() calls (an empty message counts)
  int64_t largest_message = 0;  ///< floats in its largest message
  int64_t sends_off_ring = 0;   ///< messages to a rank other than (rank + 1) % p
  int64_t recvs_off_ring = 0;   ///< receives from a rank other than (rank − 1 + p) % p
  int32_t first_off_ring_to = -1;    ///< the first such destination (-1: none)
  int32_t first_off_ring_from = -1;  ///< the first such source (-1: none)
};

/// Thrown by a Link call once the world has failed (a deadlock, a size mismatch): the student's
/// code on every rank is unwound. Not a std::exception, so that `catch (const std::exception&)` in
/// the code under test does not swallow it.
struct WorldFailed {};

/// The world: p ranks, a rendezvous mailbox per (from, to) pair, the traffic counts.
class ThreadWorld {
 public:
  /// A world of @p ranks ranks (≥ 1). @p stall_seconds: how long the ranks may all make no
  /// progress while one of them still runs (computing, or spinning) before the world fails.
  explicit ThreadWorld(int ranks, double stall_seconds = 30.0)
      : p_(ranks), stall_(stall_seconds), slots_(size_t(ranks) * size_t(ranks)), ranks_(size_t(ranks)),
        traffic_(size_t(ranks)) {
    require(ranks >= 1, "ranks", ranks, "must be ≥ 1");
  }

  /// Rank @p r's end of the world.
  class RankLink final : public student::Link {
   public:
    RankLink(ThreadWorld& world, int rank) : world_(world), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return world_.p_; }
    void send(std::span<const float> data, int to) override { world_.send(rank_, data, to); }
    void recv(std::span<float> data, int from) override { world_.recv(rank_, data, from); }

   private:
    ThreadWorld& world_;
    int rank_;
  };

  /// Marks rank @p r as returned from the code under test (a deadlock check: others may wait for it).
  void finished(int r, const std::string& how) {
    std::unique_lock lock(mutex_);
    ranks_[size_t(r)] = {State::done, -1, 0, how};
    check_deadlock();
    changed_.notify_all();
  }

  /// Why the world failed ("" when it did not).
  std::string failure() const {
    std::unique_lock lock(mutex_);
    return failure_;
  }
  /// The traffic of each rank (read once every rank has finished).
  const std::vector<RankTraffic>& traffic() const { return traffic_; }

 private:
  enum class State { running, sending, receiving, done };
  struct RankState {
    State state = State::running;
    int peer = -1;     ///< the rank it sends to or receives from
    size_t count = 0;  ///< the floats it sends or asks for
    std::string how;   ///< for a returned rank: "returned" or "threw …"
  };
  struct Slot {  // a message from → to, posted by the sender until the receiver has copied it
    const float* data = nullptr;
    size_t count = 0;
    bool posted = false;
    bool taken = false;
  };

  Slot& slot(int from, int to) { return slots_[size_t(from) * size_t(p_) + size_t(to)]; }

  void check_rank(int r, int other, const char* call, const char* what) {
    if (other >= 0 && other < p_) return;
    // A bad rank is the code's own mistake: thrown in its thread, as MPI's error would be.
    throw std::invalid_argument(std::string(call) + " on rank " + std::to_string(r) + ": " + what + " = " +
                                std::to_string(other) + " is not a rank of this world of " + std::to_string(p_));
  }

  void send(int r, std::span<const float> data, int to) {
    check_rank(r, to, "send", "to");
    std::unique_lock lock(mutex_);
    if (!failure_.empty()) throw WorldFailed{};
    RankTraffic& t = traffic_[size_t(r)];
    t.floats_sent += int64_t(data.size());
    ++t.messages_sent;
    t.largest_message = std::max(t.largest_message, int64_t(data.size()));
    if (to != (r + 1) % p_ && ++t.sends_off_ring == 1) t.first_off_ring_to = to;
    Slot& s = slot(r, to);
    s = {data.data(), data.size(), true, false};
    ranks_[size_t(r)] = {State::sending, to, data.size(), ""};
    ++progress_;
    changed_.notify_all();
    wait(lock, r, [&] { return s.taken; });
    s = {};
    ranks_[size_t(r)].state = State::running;
    ++progress_;
    changed_.notify_all();
  }

  void recv(int r, std::span<float> data, int from) {
    check_rank(r, from, "recv", "from");
    std::unique_lock lock(mutex_);
    if (!failure_.empty()) throw WorldFailed{};
    RankTraffic& t = traffic_[size_t(r)];
    if (from != (r + p_ - 1) % p_ && ++t.recvs_off_ring == 1) t.first_off_ring_from = from;
    ranks_[size_t(r)] = {State::receiving, from, data.size(), ""};
    Slot& s = slot(from, r);
    wait(lock, r, [&] { return s.posted && !s.taken; });
    if (s.count != data.size()) {
      fail("rank " + std::to_string(r) + " called recv(" + std::to_string(data.size()) + " floats, from rank " +
           std::to_string(from) + "), but rank " + std::to_string(from) + " sent it " + std::to_string(s.count) +
           " floats — sender and receiver disagree on a chunk's size (every rank must cut the data into the same "
           "chunks, and receive chunk c into a buffer of chunk c's size)");
      throw WorldFailed{};
    }
    std::copy(s.data, s.data + s.count, data.begin());
    s.taken = true;
    ranks_[size_t(r)].state = State::running;
    ++progress_;
    changed_.notify_all();
  }

  // Waits (the lock held) until @p ready or the world fails; fails it on a deadlock or a stall.
  template <class Ready>
  void wait(std::unique_lock<std::mutex>& lock, int r, const Ready& ready) {
    check_deadlock();
    auto last = progress_;
    auto since = std::chrono::steady_clock::now();
    while (!ready() && failure_.empty()) {
      changed_.wait_for(lock, std::chrono::milliseconds(200));
      if (progress_ != last) {
        last = progress_;
        since = std::chrono::steady_clock::now();
      } else if (!ready() && std::chrono::steady_clock::now() - since > std::chrono::duration<double>(stall_)) {
        fail("no message moved for " + std::to_string(int(stall_)) + " s while rank " + std::to_string(r) +
             " waits and a rank still runs (a loop that never ends?): " + describe_ranks());
      }
    }
    if (!failure_.empty() || !ready()) throw WorldFailed{};  // failed: a posted buffer may be gone
  }

  // Whether a blocked rank's call can complete.
  bool can_proceed(int r) {
    const RankState& s = ranks_[size_t(r)];
    if (s.state == State::sending) return slot(r, s.peer).taken;
    if (s.state == State::receiving) {
      const Slot& m = slot(s.peer, r);
      return m.posted && !m.taken;
    }
    return s.state == State::running;
  }

  // Fails the world when no rank runs, some rank waits, and no waiting call can complete.
  void check_deadlock() {
    if (!failure_.empty()) return;
    bool waiting = false;
    for (int r = 0; r < p_; ++r) {
      const State state = ranks_[size_t(r)].state;
      if (state == State::running) return;
      if (state == State::done) continue;
      if (can_proceed(r)) return;
      waiting = true;
    }
    if (!waiting) return;
    bool all_send = true;
    for (int r = 0; r < p_; ++r) all_send = all_send && ranks_[size_t(r)].state == State::sending;
    fail("deadlock: every rank that has not returned waits for another — " + describe_ranks() +
         (all_send ? ". Every rank is in send(): a send may wait until its receiver has called recv (MPI's "
                     "rendezvous, and this test's Link), so when all send first nothing moves — let even ranks "
                     "send first and odd ranks receive first"
                   : ". The ranks disagree on the messages: a recv with no send coming, or a send nobody "
                     "receives (every rank must make the same 2 (p − 1) steps)"));
  }

  std::string describe_ranks() {
    std::string out;
    for (int r = 0; r < p_; ++r) {
      const RankState& s = ranks_[size_t(r)];
      out += (r ? "; rank " : "rank ") + std::to_string(r) + " ";
      switch (s.state) {
        case State::running:
          out += "runs";
          break;
        case State::sending:
          out += "waits in send(" + std::to_string(s.count) + " floats, to rank " + std::to_string(s.peer) + ")";
          break;
        case State::receiving:
          out += "waits in recv(" + std::to_string(s.count) + " floats, from rank " + std::to_string(s.peer) + ")";
          break;
        case State::done:
          out += s.how;
          break;
      }
    }
    return out;
  }

  void fail(const std::string& why) {
    if (failure_.empty()) failure_ = why;
    changed_.notify_all();
  }

  const int p_;
  const double stall_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Slot> slots_;
  std::vector<RankState> ranks_;
  std::vector<RankTraffic> traffic_;
  uint64_t progress_ = 0;
  std::string failure_;
};

/// What a ring all-reduce left on every rank, and what each rank sent.
struct WorldResult {
  std::vector<std::vector<float>> data;  ///< per rank, its data after the call
  std::vector<RankTraffic> traffic;      ///< per rank
};

/// A ring all-reduce (the student's, or a wrong fixture's) on one rank's Link and data.
using RingFn = std::function<void(student::Link& link, std::span<float> data)>;

/// Runs @p ring on a thread world of inputs.size() ranks, rank r on @p inputs[r]. When a rank
/// throws NotImplemented it is rethrown as it is; when a rank throws anything else, or the world
/// fails (a deadlock, a message of the wrong size), std::runtime_error says which rank and why.
inline WorldResult run_ring_world(std::vector<std::vector<float>> inputs, const RingFn& ring) {
  const int p = int(inputs.size());
  ThreadWorld world(p);
  std::vector<std::exception_ptr> not_implemented(static_cast<size_t>(p));
  std::vector<std::string> threw(static_cast<size_t>(p));
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      std::string how = "returned";
      try {
        ThreadWorld::RankLink link(world, r);
        ring(link, std::span<float>(inputs[size_t(r)]));
      } catch (const WorldFailed&) {
        how = "was stopped";
      } catch (const NotImplemented&) {
        not_implemented[size_t(r)] = std::current_exception();
        how = "threw NotImplemented";
      } catch (const std::exception& e) {
        threw[size_t(r)] = e.what();
        how = std::string("threw \"") + e.what() + "\"";
      } catch (...) {
        threw[size_t(r)] = "a non-standard exception";
        how = "threw a non-standard exception";
      }
      world.finished(r, how);
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : not_implemented)
    if (e) std::rethrow_exception(e);
  for (int r = 0; r < p; ++r)
    if (!threw[size_t(r)].empty())
      throw std::runtime_error("rank " + std::to_string(r) + " of " + std::to_string(p) + " threw: " + threw[size_t(r)]);
  if (const std::string why = world.failure(); !why.empty())
    throw std::runtime_error("over " + std::to_string(p) + " ranks: " + why);
  return {std::move(inputs), world.traffic()};
}

}  // namespace inferlab::testing::ch10
