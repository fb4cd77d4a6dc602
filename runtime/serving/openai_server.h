#pragma once
/// @file openai_server.h
/// The HTTP routes of `inferlab serve` (chapter 09) over an AsyncEngine
/// (runtime/engine/async_engine.h), served by HttpServer (http_server.h):
///
///   GET  /health                 200 {"status": "ok"}, the engine's state (running, waiting, free
///                                and total blocks), its requests submitted and rejected, and how
///                                they ended — finished (stop + length) and aborted, by the
///                                finish_reason vocabulary of /metrics (finished_reason)
///   GET  /metrics                Prometheus text, vLLM's names (serving_metrics.h)
///   GET  /v1/models              the one model served
///   POST /v1/chat/completions    the chat template, then generation; JSON or SSE
///   POST /v1/completions         a prompt (text or ids), then generation; JSON or SSE
///
/// Each request's path. On the transport's I/O thread (http_server.h), in microseconds: parse and
/// check the body (openai_request.h: 400 naming the parameter; a body nested too deep is refused
/// as it is parsed), check the model (404), take a place (admission.h: beyond --max-seqs +
/// --max-waiting requests held, 429 with Retry-After). Then on a worker thread: tokenize (the
/// chat template, the messages' text never read as control tokens; usage counts these ids),
/// submit to the engine, wait for the first delta (a request the engine refuses is a 400 before
/// any byte of the answer), then detokenize each delta's tokens on this thread — the engine
/// thread never waits for HTTP work — hiding the end-of-generation ids and holding back what may
/// begin a stop string (a match aborts the engine request: finish_reason "stop"). Streamed: the
/// deltas as `chat.completion.chunk` / `text_completion` events (sse.h), the last with
/// finish_reason, the usage chunk when asked, `data: [DONE]`. Between two deltas the worker looks
/// at its client: one that has gone — streamed or not — has its request aborted within a step,
/// so its blocks are free and the engine's running count drops. A request aborted by a shutdown
/// is answered 503 (or its stream cut). Every error body is OpenAI's error object.

#include <atomic>
#include <chrono>
#include <memory>
#include <cstdint>
#include <string>

#include "runtime/engine/async_engine.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "runtime/serving/admission.h"
#include "runtime/serving/http_server.h"
#include "runtime/serving/openai_request.h"
#include "runtime/serving/openai_response.h"
#include "runtime/serving/serving_metrics.h"

namespace inferlab::serving {

/// What the server serves.
struct ServedModel {
  std::string name;                 ///< the model's id in the API ("smollm2")
  int64_t default_max_tokens = 16;  ///< generated tokens when a request gives no max_tokens (cut to the context)
  int64_t max_seq_len = 0;          ///< prompt + generated tokens of one request: what the engine and its pool hold
  int64_t max_running = 16;         ///< requests the engine runs at once (EngineConfig::max_num_seqs)
  int64_t max_waiting = 32;         ///< requests held waiting beyond those; more get 429
};

/// The routes, as an HttpRouter over an AsyncEngine.
class OpenAiServer {
 public:
  /// Serves @p model's name with @p engine and @p tokenizer (both must outlive the server).
  OpenAiServer(engine::AsyncEngine& engine, const tokenizer::BpeTokenizer& tokenizer, ServedModel model);

  /// The answer to @p request (HttpServer's router: runs on the I/O thread and never waits).
  HttpAnswer route(const HttpRequest& request);

  /// The metrics, as `GET /metrics` renders them.
  const ServingMetrics& metrics() const { return metrics_; }

  /// Seconds a client refused now should wait (the Retry-After of a 429): Little's law
  /// (admission.h) with the mean service time measured, or — when larger, or before any request
  /// has finished — estimated from the queued work: the held requests' tokens still to generate,
  /// per request, times the engine's mean step time; and at least the time the running request
  /// nearest its max_tokens needs to leave (its tokens left × the mean step time: an upper bound,
  /// as an end-of-text token may end it sooner).
  int64_t retry_after_seconds() const;

 private:
  HttpAnswer health() const;
  HttpAnswer generate(Endpoint endpoint, const HttpRequest& request);
  void answer(Endpoint endpoint, const GenerationRequest& request, std::chrono::steady_clock::time_point received,
              std::shared_ptr<AdmissionControl::Ticket> ticket, ResponseWriter& writer);
  engine::Request engine_request(const GenerationRequest& request, Endpoint endpoint) const;
  ResponseHeader new_header(Endpoint endpoint);

  engine::AsyncEngine& engine_;
  const tokenizer::BpeTokenizer& tokenizer_;
  ServedModel model_;
  AdmissionControl admission_;
  ServingMetrics metrics_;
  std::atomic<int64_t> next_response_ = 0;
  Json model_object_;  // the model as /v1/models lists it (it never changes)
};

}  // namespace inferlab::serving
