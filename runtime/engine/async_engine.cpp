#include "runtime/engine/async_engine.h"

#include <map>
#include <tuple>
#include <utility>

namespace inferlab::engine {

std::optional<RequestDelta> RequestStream::next() {
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [&] { return readable(); });
  if (!deltas_.empty()) {
    RequestDelta delta = std::move(deltas_.front());
    deltas_.pop_front();
    if (delta.finish && ++finishes_read_ == choices_) read_all_ = true;
    return delta;
  }
  if (error_) std::rethrow_exception(error_);
  return std::nullopt;
}

bool RequestStream::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return ready_.wait_for(lock, timeout, [&] { return readable(); });
}

bool RequestStream::finished() const {
  const std::lock_guard lock(mutex_);
  return finished_;
}

std::optional<RequestMetrics> RequestStream::metrics() const {
  const std::lock_guard lock(mutex_);
  return read_all_ ? metrics_ : std::nullopt;
}

void RequestStream::push(RequestDelta delta, std::optional<RequestMetrics> metrics) {
  {
    const std::lock_guard lock(mutex_);
    if (delta.finish && ++finishes_pushed_ == choices_) {
      finished_ = true;
      metrics_ = std::move(metrics);
    }
    deltas_.push_back(std::move(delta));
  }
  ready_.notify_all();
}

void RequestStream::fail(std::exception_ptr error) {
  {
    const std::lock_guard lock(mutex_);
    finished_ = true;
    error_ = std::move(error);
  }
  ready_.notify_all();
}

namespace {

// The engine thread reads the deltas only (their finish carries the timings): no whole outputs kept.
EngineConfig without_outputs(EngineConfig config) {
  config.keep_outputs = false;
  return config;
}

}  // namespace

AsyncEngine::AsyncEngine(const model::LlamaModel& model, EngineConfig config)
    : engine_(model, without_outputs(std::move(config))) {
  stats_.num_blocks = engine_.config().num_blocks;
  stats_.free_blocks = engine_.blocks().num_free_blocks();
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() {
  shutdown(ShutdownMode::abort);
}

std::shared_ptr<RequestStream> AsyncEngine::submit(Request request) {
  auto stream = std::make_shared<RequestStream>();
  stream->choices_ = std::max<int32_t>(1, request.sampling.n);
  {
    const std::lock_guard lock(mutex_);
    if (stopping_ || failed_) throw EngineStopped("the engine is shutting down: no new requests");
    request.arrival = 0.0;  // now: the engine's clock is never behind 0
    inbox_.emplace_back(std::move(request), stream);
    ++stats_.submitted;
    ++stats_.waiting;
  }
  work_.notify_one();
  return stream;
}

bool AsyncEngine::abort(const std::shared_ptr<RequestStream>& stream, std::optional<int32_t> choice) {
  if (stream == nullptr || stream->finished()) return false;
  {
    const std::lock_guard lock(mutex_);
    aborts_.emplace_back(stream, choice);
  }
  work_.notify_one();
  return true;
}

void AsyncEngine::shutdown(ShutdownMode mode) {
  {
    const std::lock_guard lock(mutex_);
    if (!stopping_) stopping_ = mode;
  }
  work_.notify_one();
  std::call_once(joined_, [&] {
    thread_.join();
    stopped_ = true;
  });
}

AsyncEngineStats AsyncEngine::stats() const {
  const std::lock_guard lock(mutex_);
  return stats_;
}

const Engine& AsyncEngine::engine() const {
  if (!stopped_) throw std::logic_error("AsyncEngine::engine(): the engine thread is still running (call shutdown())");
  return engine_;
}

void AsyncEngine::snapshot() {
  stats_.running = engine_.num_running();
  stats_.waiting = engine_.num_waiting() + int64_t(inbox_.size());
  stats_.free_blocks = engine_.blocks().num_free_blocks();
  stats_.engine = engine_.stats();
  stats_.tokens_to_generate = engine_.tokens_to_generate();
  stats_.fewest_tokens_to_generate = engine_.fewest_tokens_to_generate();
  for (const auto& [request, stream] : inbox_) stats_.tokens_to_generate += request.sampling.max_new_tokens;
}

void AsyncEngine::loop() {
  std::map<int64_t, std::shared_ptr<RequestStream>> live;  // engine id → its stream
  try {
    while (true) {
      std::vector<std::pair<Request, std::shared_ptr<RequestStream>>> submissions;
      std::vector<std::pair<std::shared_ptr<RequestStream>, std::optional<int32_t>>> aborts;
      std::optional<ShutdownMode> stopping;
      {
        std::unique_lock lock(mutex_);
        work_.wait(lock, [&] { return !inbox_.empty() || !aborts_.empty() || stopping_ || !engine_.empty(); });
        submissions.swap(inbox_);
        aborts.swap(aborts_);
        stopping = stopping_;
      }
      int64_t rejected = 0;
      for (auto& [request, stream] : submissions) {
        try {
          request.arrival = engine_.now();  // its queue time starts here, on the engine's clock
          const int64_t id = engine_.add_request(std::move(request));
          stream->engine_id_ = id;
          live[id] = stream;
        } catch (...) {
          stream->fail(std::current_exception());
          ++rejected;
        }
      }
      if (stopping == ShutdownMode::abort)
        for (const auto& [id, stream] : live) aborts.emplace_back(stream, std::nullopt);
      bool aborted_any = false;  // its delta comes with the next step, even on an empty engine
      for (const auto& [stream, choice] : aborts)
        if (stream->engine_id_ && live.contains(*stream->engine_id_))
          aborted_any |= engine_.abort(*stream->engine_id_, choice);

      std::vector<RequestDelta> deltas;
      if (!engine_.empty() || aborted_any) deltas = engine_.step().deltas;
      // Who gets which delta. The counters and the snapshot are updated before any stream sees
      // its delta, so a caller that has read a finish finds it counted in stats().
      int64_t finished = 0, aborted = 0;
      std::vector<std::tuple<std::shared_ptr<RequestStream>, RequestDelta, std::optional<RequestMetrics>>> out;
      for (const RequestDelta& delta : deltas)  // checked first: a throw leaves every stream in live
        if (!live.contains(delta.id))
          throw std::logic_error("AsyncEngine: a delta for unknown request " + std::to_string(delta.id));
      for (RequestDelta& delta : deltas) {
        const auto it = live.find(delta.id);
        std::optional<RequestMetrics> timings;
        // A request leaves with its last choice's finish (one finish per choice).
        const bool left = delta.finish && ++it->second->finishes_counted_ == it->second->choices_;
        if (left) {
          ++(*delta.finish == FinishReason::aborted ? aborted : finished);
          timings = delta.metrics;
        }
        out.emplace_back(it->second, std::move(delta), std::move(timings));
        if (left) live.erase(it);
      }
      bool done = false;
      {
        const std::lock_guard lock(mutex_);
        stats_.rejected += rejected;
        stats_.finished += finished;
        stats_.aborted += aborted;
        snapshot();
        // Stopping, and nothing left: neither in the engine nor queued (submit() refuses now).
        done = stopping_ && engine_.empty() && inbox_.empty() && aborts_.empty();
      }
      for (auto& [stream, delta, timings] : out) stream->push(std::move(delta), std::move(timings));
      if (done) break;
    }
  } catch (...) {
    // A bug in the engine (a logic_error): every request still in flight gets it, none hangs.
    const std::exception_ptr error = std::current_exception();
    const std::lock_guard lock(mutex_);
    failed_ = true;
    for (const auto& [id, stream] : live) stream->fail(error);
    for (const auto& [request, stream] : inbox_) stream->fail(error);
    inbox_.clear();
  }
}

}  // namespace inferlab::engine
