#include "runtime/serving/serving_metrics.h"

#include <utility>

namespace inferlab::serving {
namespace {

// Buckets for this lab's scale: a SmolLM2 decode step on 2 CPU cores is ~7–20 ms, a 512-token
// prefill ~1 s; a GPU step is ~1 ms. (vLLM's own bucket lists reach minutes; these stop earlier.)
std::vector<double> token_buckets() {
  return {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075,
          0.1,   0.15,   0.2,   0.3,    0.5,  0.75,  1.0,  2.5,  5.0,  10.0};
}
std::vector<double> request_buckets() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0};
}

const char* reason_name(FinishedReason r) {
  switch (r) {
    case FinishedReason::stop: return "stop";
    case FinishedReason::length: return "length";
    case FinishedReason::abort: return "abort";
  }
  return "abort";
}

}  // namespace

ServingMetrics::ServingMetrics(std::string model_name)
    : model_(std::move(model_name)),
      ttft_(token_buckets()),
      itl_(token_buckets()),
      e2e_(request_buckets()),
      queue_(request_buckets()),
      service_(request_buckets()) {}

void ServingMetrics::record(const RequestTimings& t) {
  ++finished_[size_t(t.reason)];
  if (t.reason == FinishedReason::abort) return;
  if (t.ttft >= 0) ttft_.observe(t.ttft);
  for (const double gap : t.itl) itl_.observe(gap);
  if (t.e2e >= 0) e2e_.observe(t.e2e);
  if (t.queue >= 0) queue_.observe(t.queue);
  if (t.e2e >= 0) service_.observe(std::max(0.0, t.e2e - std::max(0.0, t.queue)));
}

void ServingMetrics::reject(bool queue_full) {
  ++(queue_full ? rejected_full_ : rejected_invalid_);
}

double ServingMetrics::mean_service_seconds() const {
  const HistogramSnapshot s = service_.snapshot();
  return s.count == 0 ? 0.0 : s.sum / double(s.count);
}

std::string ServingMetrics::render(const engine::AsyncEngineStats& s) const {
  const Labels model{{"model_name", model_}};
  MetricsText m;
  m.scalar("vllm:num_requests_running", "gauge", "Requests running in the engine's batch.", model, double(s.running));
  m.scalar("vllm:num_requests_waiting", "gauge", "Requests waiting for the engine (queued or preempted).", model,
           double(s.waiting));
  const double used = s.num_blocks == 0 ? 0.0 : double(s.num_blocks - s.free_blocks) / double(s.num_blocks);
  m.scalar("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage: the share of the pool's blocks in use (1 = full).",
           model, used);
  m.scalar("vllm:prompt_tokens_total", "counter", "Prompt tokens admitted.", model, double(s.engine.prompt_tokens));
  m.scalar("vllm:generation_tokens_total", "counter", "Tokens generated.", model, double(s.engine.generated_tokens));
  m.scalar("vllm:num_preemptions_total", "counter", "Requests preempted (their KV blocks taken back).", model,
           double(s.engine.preemptions));
  // Speculative decoding (chapter 12), vLLM v1's counters (its Prometheus client adds _total).
  m.scalar("vllm:spec_decode_num_drafts_total", "counter", "Verification steps of a sequence with guesses.", model,
           double(s.engine.spec_drafts));
  m.scalar("vllm:spec_decode_num_draft_tokens_total", "counter", "Guessed tokens verified.", model,
           double(s.engine.spec_draft_tokens));
  m.scalar("vllm:spec_decode_num_accepted_tokens_total", "counter", "Guessed tokens accepted.", model,
           double(s.engine.spec_accepted_tokens));
  m.family("vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Guessed tokens accepted, by their position in the guess (0: the first).");
  for (size_t i = 0; i < s.engine.spec_accepted_per_position.size(); ++i)
    m.sample("vllm:spec_decode_num_accepted_tokens_per_pos_total", {model[0], {"position", std::to_string(i)}},
             double(s.engine.spec_accepted_per_position[i]));
  m.family("vllm:request_success_total", "counter", "Requests ended, by finish reason.");
  for (const FinishedReason r : {FinishedReason::stop, FinishedReason::length, FinishedReason::abort}) {
    Labels labels = model;
    labels.emplace_back("finished_reason", reason_name(r));
    m.sample("vllm:request_success_total", labels, double(finished_[size_t(r)].load()));
  }
  m.family("inferlab:requests_rejected_total", "counter",
           "Requests refused: queue_full (429, admission control) or invalid (400).");
  m.sample("inferlab:requests_rejected_total", {model[0], {"reason", "queue_full"}}, double(rejected_full_.load()));
  m.sample("inferlab:requests_rejected_total", {model[0], {"reason", "invalid"}}, double(rejected_invalid_.load()));
  m.histogram("vllm:time_to_first_token_seconds", "Time to first token: request received to its first token.", model,
              ttft_.snapshot());
  m.histogram("vllm:inter_token_latency_seconds", "Inter-token latency: the gap between successive tokens.", model,
              itl_.snapshot());
  m.histogram("vllm:e2e_request_latency_seconds", "End-to-end latency: request received to its last token.", model,
              e2e_.snapshot());
  m.histogram("vllm:request_queue_time_seconds", "Queue time: added to the engine to its first step.", model,
              queue_.snapshot());
  return m.str();
}

}  // namespace inferlab::serving
