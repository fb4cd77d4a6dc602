#pragma once
/// @file async_engine.h
/// The serving engine (engine.h) on its own thread (chapter 09), for a server whose HTTP threads
/// come and go: any thread submits a request and gets a RequestStream back, whose per-step deltas
/// (RequestDelta: new token ids, then the finish reason) arrive through a thread-safe queue as
/// the engine's steps produce them; any thread aborts a stream (a client that disconnected) and
/// its blocks are freed before the next step runs; shutdown() finishes or aborts what is in
/// flight and joins the thread.
///
/// One thread owns the Engine and nothing else touches it while that thread runs: submissions
/// and aborts wait in an inbox (one mutex, one condition variable) that the loop drains before
/// every step; each stream has its own mutex and condition variable for its deltas. Tokenizing
/// and detokenizing stay with the caller, off the engine thread: the loop only adds requests,
/// aborts them, steps and hands out token ids.
///
/// Guarantees (tests/09-serving/test_async_engine.cpp): every submitted request ends exactly
/// once — its stream gets exactly one delta with a finish, or a rejection (next() rethrows what
/// Engine::add_request() threw) — so none is lost or duplicated; the deltas of a stream,
/// concatenated, are the tokens the Engine generated for it, which with greedy sampling equal
/// generate_alone() of the request (the engine's batch invariance); after shutdown() the pool is
/// entirely free.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/engine/request.h"

namespace inferlab::engine {

/// Thrown by AsyncEngine::submit() once shutdown() has begun (a server answers 503).
class EngineStopped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One submitted request's deltas, in the order its steps produced them. Shared by the engine
/// thread (which pushes) and the caller (which reads, from one thread at a time).
class RequestStream {
 public:
  /// Blocks until the next delta and returns it; the last choice's finish is the last (a request
  /// of n choices has n deltas with a finish, one per RequestDelta::index), after which next()
  /// returns nullopt. Rethrows the exception that refused the request
  /// (std::invalid_argument from Engine::add_request(): an empty prompt, one too long, …) or that
  /// stopped the engine thread.
  std::optional<RequestDelta> next();

  /// Waits at most @p timeout for next() to have something: true when it would return at once (a
  /// delta, the end or an error), false when the time ran out. A server waits this way so that it
  /// can look at its client between two steps.
  bool wait_for(std::chrono::milliseconds timeout);

  /// True once the delta with the finish has been pushed (it may not have been read yet), or the
  /// request was refused.
  bool finished() const;

  /// The request's timings on the engine's clock (RequestMetrics: its arrival when the engine
  /// thread added it, its first scheduled step, its tokens, its finish; preemptions), once the
  /// delta with the finish has been read; nullopt before, or for a refused request. The clock
  /// counts the engine's busy time (ClockMode::real: each step's duration), so first_scheduled −
  /// arrival is the time it waited behind other requests' steps — a server's queue time.
  std::optional<RequestMetrics> metrics() const;

 private:
  friend class AsyncEngine;
  void push(RequestDelta delta, std::optional<RequestMetrics> metrics = std::nullopt);
  void fail(std::exception_ptr error);
  bool readable() const { return !deltas_.empty() || error_ || read_all_; }  // with mutex_: next() would not block

  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<RequestDelta> deltas_;
  std::exception_ptr error_;
  bool finished_ = false;  // the finish delta (or the error) has been pushed
  bool read_all_ = false;  // next() has returned the finish delta
  std::optional<RequestMetrics> metrics_;  // set with the finish delta
  int32_t choices_ = 1;          // SamplingParams::n: one finish each
  int32_t finishes_pushed_ = 0;  // with mutex_
  int32_t finishes_read_ = 0;    // with mutex_
  // Engine thread only: the Engine's id once added, and the finishes it has handed out.
  std::optional<int64_t> engine_id_;
  int32_t finishes_counted_ = 0;
};

/// How shutdown() treats the requests in flight.
enum class ShutdownMode {
  finish,  ///< run every submitted request to its end, then stop
  abort,   ///< abort every submitted request (FinishReason::aborted), then stop
};

/// A snapshot of the engine thread's state, taken after each step.
struct AsyncEngineStats {
  int64_t running = 0;      ///< requests running (Engine::num_running())
  int64_t waiting = 0;      ///< requests waiting, queued in the inbox included
  int64_t free_blocks = 0;  ///< allocatable blocks (free + evictable prefix-cache blocks)
  int64_t num_blocks = 0;   ///< blocks in the pool (EngineConfig::num_blocks)
  int64_t submitted = 0;    ///< submit() calls that returned a stream
  int64_t rejected = 0;     ///< of those, refused by Engine::add_request()
  int64_t finished = 0;     ///< ended with FinishReason::length or stop
  int64_t aborted = 0;      ///< ended with FinishReason::aborted
  int64_t tokens_to_generate = 0;  ///< Engine::tokens_to_generate(), the inbox's included: the queued work
  int64_t fewest_tokens_to_generate = 0;  ///< Engine::fewest_tokens_to_generate(): steps before a place frees, at most
  EngineStats engine;              ///< the Engine's own counters (steps, tokens, preemptions, busy time), as of this snapshot
};

/// The engine loop on its own thread.
class AsyncEngine {
 public:
  /// Builds the Engine (std::invalid_argument for a bad config, as Engine's constructor) and
  /// starts its thread. @p model must outlive this object.
  AsyncEngine(const model::LlamaModel& model, EngineConfig config);
  /// shutdown(ShutdownMode::abort) unless it has been called.
  ~AsyncEngine();
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  /// Queues @p request for the engine thread (any thread may call it) and returns its stream.
  /// The request is added to the Engine before its next step; a refusal arrives through the
  /// stream (RequestStream::next() rethrows it). Throws EngineStopped once shutdown() has begun.
  std::shared_ptr<RequestStream> submit(Request request);

  /// Asks the engine thread to abort @p stream's request (any thread may call it): its blocks
  /// are freed before the next step and its stream ends with FinishReason::aborted, unless it has
  /// already finished; only choice @p choice when given (a choice a stop string has ended).
  /// Returns false when the stream had already ended.
  bool abort(const std::shared_ptr<RequestStream>& stream, std::optional<int32_t> choice = std::nullopt);

  /// Stops accepting requests, finishes or aborts (@p mode) the ones submitted, waits for their
  /// streams' last deltas to be pushed and joins the engine thread. Later calls do nothing.
  void shutdown(ShutdownMode mode = ShutdownMode::finish);

  /// The state after the latest step (any thread).
  AsyncEngineStats stats() const;

  /// The Engine's settings (any thread: they never change).
  const EngineConfig& config() const { return engine_.config(); }

  /// The Engine, read-only (its pool, its invariants); only once shutdown() has returned:
  /// throws std::logic_error while the engine thread runs.
  const Engine& engine() const;

 private:
  void loop();
  void snapshot();  // with mutex_ held

  Engine engine_;  // the engine thread's alone while it runs
  mutable std::mutex mutex_;
  std::condition_variable work_;  // the inbox has something, or shutdown began
  std::vector<std::pair<Request, std::shared_ptr<RequestStream>>> inbox_;
  std::vector<std::pair<std::shared_ptr<RequestStream>, std::optional<int32_t>>> aborts_;
  std::optional<ShutdownMode> stopping_;
  bool failed_ = false;  // the engine thread stopped on an exception
  std::once_flag joined_;
  std::atomic<bool> stopped_{false};  // joined: engine() may be read
  AsyncEngineStats stats_;
  std::thread thread_;  // last: started when everything above exists
};

}  // namespace inferlab::engine
