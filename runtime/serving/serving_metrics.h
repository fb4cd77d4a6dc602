#pragma once
/// @file serving_metrics.h
/// What `GET /metrics` reports (chapter 09), under vLLM's metric names so that a dashboard made
/// for vLLM reads it: the engine's state (gauges), its token and preemption counters, and four
/// latency histograms observed by the server as it answers — all labelled model_name.
///
///   vllm:num_requests_running / vllm:num_requests_waiting   gauges: the engine now
///   vllm:kv_cache_usage_perc        gauge, 0…1: the share of the pool's blocks in use
///   vllm:prompt_tokens_total        counter: prompt tokens admitted (prefix-cache hits included)
///   vllm:generation_tokens_total    counter: tokens sampled
///   vllm:num_preemptions_total      counter: requests preempted (each recomputes its tokens)
///   vllm:request_success_total{finished_reason="stop|length|abort"}   counter: requests ended
///   vllm:time_to_first_token_seconds   histogram: request received → its first token read
///   vllm:inter_token_latency_seconds   histogram: the gap between successive tokens
///   vllm:e2e_request_latency_seconds   histogram: request received → its last token
///   vllm:request_queue_time_seconds    histogram: added to the engine → its first step
///   inferlab:requests_rejected_total{reason="queue_full|invalid"}   counter: refused (429 / 400)
///
/// What each tells: a growing waiting gauge and queue time is demand above capacity (Little's
/// law: the queue grows while the arrival rate exceeds the completion rate); TTFT without queue
/// time is the prefill; ITL is the decode step, and its tail grows when prefill chunks share the
/// steps; preemptions mean the KV pool, not compute, is the limit.
///
/// Latencies are wall-clock seconds on the server's HTTP threads (where a client would measure
/// them, less the network); the queue time is on the engine's clock (RequestStream::metrics()).

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "runtime/engine/async_engine.h"
#include "runtime/serving/prometheus.h"

namespace inferlab::serving {

/// How a request ended, as vllm:request_success_total's finished_reason says it.
enum class FinishedReason { stop, length, abort };

/// One answered request, as the server observed it.
struct RequestTimings {
  double ttft = -1.0;            ///< seconds to its first token; < 0: it produced none
  std::vector<double> itl;       ///< the gaps between successive tokens, in seconds
  double e2e = -1.0;             ///< seconds from received to its last token
  double queue = -1.0;           ///< seconds waiting in the engine before its first step; < 0: unknown
  FinishedReason reason = FinishedReason::length;  ///< how it ended
};

/// The server's metrics; record() and render() may be called from any thread.
class ServingMetrics {
 public:
  /// Metrics labelled model_name = @p model_name.
  explicit ServingMetrics(std::string model_name);

  /// Counts a request that ended (an aborted one only in request_success, not in the latencies).
  void record(const RequestTimings& timings);
  /// Counts a request refused with 429 (@p queue_full) or 400.
  void reject(bool queue_full);
  /// The mean time a finished request spent in service (e2e − queue), for Retry-After; 0 before any.
  double mean_service_seconds() const;
  /// Requests recorded as ended for @p reason (the counts of vllm:request_success_total).
  int64_t finished(FinishedReason reason) const { return finished_[size_t(reason)].load(); }
  /// The exposition: the engine's state from @p stats, then the counters and histograms.
  std::string render(const engine::AsyncEngineStats& stats) const;

 private:
  std::string model_;
  Histogram ttft_, itl_, e2e_, queue_;
  std::array<std::atomic<int64_t>, 3> finished_{};  // by FinishedReason
  std::atomic<int64_t> rejected_full_ = 0, rejected_invalid_ = 0;
  Histogram service_;  // e2e − queue: its sum and count give mean_service_seconds()
};

}  // namespace inferlab::serving
