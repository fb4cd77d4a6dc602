#pragma once
/// @file openai_server.h
/// The HTTP routes of `inferlab serve` (chapter 09) over an AsyncEngine
/// (runtime/engine/async_engine.h), on cpp-httplib's server:
///
///   GET  /health                 200 {"status": "ok"} and the engine's counters (running, waiting,
///                                free and total blocks, submitted / finished / aborted / rejected)
///   GET  /metrics                Prometheus text, vLLM's names (serving_metrics.h)
///   GET  /v1/models              the one model served
///   POST /v1/chat/completions    the chat template, then generation; JSON or SSE
///   POST /v1/completions         a prompt (text or ids), then generation; JSON or SSE
///
/// Each request's path: parse and check the body (openai_request.h: 400 naming the parameter),
/// check the model (404), tokenize (the chat template; usage counts from these ids), submit to
/// the engine, wait for the first delta (a request the engine refuses is a 400 before any byte
/// of the answer), then detokenize each delta's tokens on this HTTP thread — the engine thread
/// never waits for HTTP work — hiding the end-of-generation ids and holding back what may begin
/// a stop string (a match aborts the engine request: finish_reason "stop"). Before any of that,
/// admission control (admission.h): beyond --max-seqs + --max-waiting requests held, 429 with
/// Retry-After; a body over --max-body-bytes is 413 (cpp-httplib refuses it unread). Streamed: the deltas as
/// `chat.completion.chunk` / `text_completion` events (sse.h), the last with finish_reason, the
/// usage chunk when asked, `data: [DONE]`; a client gone (a failed write) has its request
/// aborted, so its blocks are free within a step. A request aborted by a shutdown is answered
/// 503 (or its stream cut). Every error body is OpenAI's error object.

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "runtime/engine/async_engine.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "tools/cli/admission.h"
#include "tools/cli/openai_request.h"
#include "tools/cli/openai_response.h"
#include "tools/cli/serving_metrics.h"

namespace inferlab::cli {

/// What the server serves.
struct ServedModel {
  std::string name;                 ///< the model's id in the API ("smollm2")
  int64_t default_max_tokens = 16;  ///< generated tokens when a request gives no max_tokens (cut to the context)
  int64_t max_seq_len = 0;          ///< prompt + generated tokens of one request (the engine's max_seq_len)
  int64_t max_running = 16;         ///< requests the engine runs at once (EngineConfig::max_num_seqs)
  int64_t max_waiting = 32;         ///< requests held waiting beyond those; more get 429
  size_t max_body_bytes = 1 << 20;  ///< the largest request body; more gets 413
};

/// The routes, installed on an httplib::Server.
class OpenAiServer {
 public:
  /// Serves @p model's name with @p engine and @p tokenizer (both must outlive the server).
  OpenAiServer(engine::AsyncEngine& engine, const tokenizer::BpeTokenizer& tokenizer, ServedModel model);

  /// Adds the routes, the body limit, an error handler (OpenAI's error object for an unknown
  /// path or an oversized body) and an exception handler (500 with the error object) to @p server.
  void install(httplib::Server& server);

  /// The metrics, as `GET /metrics` renders them.
  const ServingMetrics& metrics() const { return metrics_; }

 private:
  void generate(Endpoint endpoint, const httplib::Request& request, httplib::Response& response);
  engine::Request engine_request(const GenerationRequest& request, Endpoint endpoint) const;
  ResponseHeader new_header(Endpoint endpoint);

  engine::AsyncEngine& engine_;
  const tokenizer::BpeTokenizer& tokenizer_;
  ServedModel model_;
  AdmissionControl admission_;
  ServingMetrics metrics_;
  std::atomic<int64_t> next_response_ = 0;
};

}  // namespace inferlab::cli
