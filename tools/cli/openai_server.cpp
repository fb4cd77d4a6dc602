#include "tools/cli/openai_server.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "runtime/tokenizer/detokenizer.h"
#include "runtime/tokenizer/stop_strings.h"
#include "runtime/engine/trace.h"
#include "tools/cli/sse.h"

namespace inferlab::cli {
namespace {

constexpr const char* kJson = "application/json";

void send_json(httplib::Response& response, int status, const Json& body) {
  response.status = status;
  response.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), kJson);
}

void send_error(httplib::Response& response, const ApiError& error) {
  send_json(response, error.status(), error.to_json());
}

ApiError shutting_down() {
  return ApiError(503, "the server is shutting down", "", "unavailable_error");
}

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// One request being answered: its stream, its detokenizer and stop strings, what has been
// counted and when its tokens came; it holds its admission ticket until it is destroyed.
struct Generation {
  Generation(std::shared_ptr<engine::RequestStream> s, const tokenizer::BpeTokenizer& tokenizer,
             std::vector<int32_t> hidden_ids, std::vector<std::string> stops, ResponseHeader h, int64_t prompt_tokens,
             Clock::time_point received_at, AdmissionControl::Ticket t)
      : stream(std::move(s)),
        detokenizer(tokenizer),
        stop(std::move(stops)),
        hidden(std::move(hidden_ids)),
        header(std::move(h)),
        received(received_at),
        ticket(std::move(t)) {
    usage.prompt_tokens = prompt_tokens;
  }

  // The text @p delta completes, counting and timing its tokens: end-of-generation ids hidden,
  // what may begin a stop string held back, nothing after a stop string matched (stopped); at
  // its finish, what the detokenizer and the matcher held.
  std::string text_of(const engine::RequestDelta& delta) {
    const Clock::time_point now = Clock::now();
    std::string text;
    for (const int32_t id : delta.new_tokens) {
      if (stopped) break;
      ++usage.completion_tokens;
      if (timings.ttft < 0) {
        timings.ttft = seconds_between(received, now);
      } else {  // the gap since the last delta, shared by this delta's tokens
        timings.itl.push_back(seconds_between(last_token, now) / double(delta.new_tokens.size()));
      }
      if (std::find(hidden.begin(), hidden.end(), id) == hidden.end()) text += stop.push(detokenizer.push(id));
      stopped = stop.stopped();
    }
    if (!delta.new_tokens.empty()) last_token = now;
    if (delta.finish && !stopped) {
      text += stop.push(detokenizer.flush());
      stopped = stop.stopped();
      if (!stopped) text += stop.flush();
    }
    return text;
  }

  // finish_reason: "stop" for a stop string, else the engine's.
  engine::FinishReason reason(engine::FinishReason engine_reason) const {
    return stopped ? engine::FinishReason::stop : engine_reason;
  }

  // Once answered: a request stopped by a stop string is aborted in the engine and its stream
  // read to its end (within a step), for its queue time; then the metrics count it.
  void conclude(engine::AsyncEngine& engine, ServingMetrics& metrics, FinishedReason how) {
    if (concluded) return;
    concluded = true;
    if (stopped && !ended) {
      engine.abort(stream);
      try {
        while (stream->next()) {
        }
      } catch (const std::exception&) {
      }
      ended = true;
    }
    if (const std::optional<engine::RequestMetrics> m = stream->metrics(); m && m->first_scheduled >= 0)
      timings.queue = m->first_scheduled - m->arrival;
    if (timings.ttft >= 0) timings.e2e = seconds_between(received, last_token);
    timings.reason = how;
    metrics.record(timings);
  }

  std::shared_ptr<engine::RequestStream> stream;
  tokenizer::IncrementalDetokenizer detokenizer;
  tokenizer::StopStringMatcher stop;
  std::vector<int32_t> hidden;
  ResponseHeader header;
  Usage usage;
  Clock::time_point received, last_token;
  RequestTimings timings;
  AdmissionControl::Ticket ticket;
  std::optional<engine::RequestDelta> first;  // read before the answer's status was chosen
  bool include_usage = false;
  bool started = false;    // the first event has been written
  bool ended = false;      // the stream has been read to its finish (or cut)
  bool stopped = false;    // a stop string matched
  bool answered = false;   // the last event ([DONE]) was written
  engine::FinishReason final_reason = engine::FinishReason::aborted;  // as the last event said
  bool concluded = false;  // counted in the metrics
};

FinishedReason finished_reason(engine::FinishReason r) {
  return r == engine::FinishReason::stop ? FinishedReason::stop : FinishedReason::length;
}

// Writes the next events of @p g to @p sink; false ends the response (a client gone, a shutdown).
bool stream_events(Generation& g, httplib::DataSink& sink) {
  std::string out;
  if (!g.started) {
    g.started = true;
    if (g.header.endpoint == Endpoint::chat) out += sse_event(chunk_json(g.header, "assistant", "", std::nullopt));
  }
  std::optional<engine::RequestDelta> delta;
  if (g.first) {
    delta = std::exchange(g.first, std::nullopt);
  } else {
    try {
      delta = g.stream->next();
    } catch (const std::exception&) {  // the engine thread failed: cut the stream
      g.ended = true;
      return false;
    }
  }
  if (!delta) {
    g.ended = true;
    return false;
  }
  if (delta->finish == engine::FinishReason::aborted) {  // a shutdown: no [DONE], the stream is cut
    g.ended = true;
    return false;
  }
  if (delta->finish) g.ended = true;
  const std::string text = g.text_of(*delta);
  if (!text.empty()) out += sse_event(chunk_json(g.header, std::nullopt, text, std::nullopt));
  const bool last = delta->finish || g.stopped;
  if (last) {
    g.final_reason = g.reason(delta->finish.value_or(engine::FinishReason::stop));
    out += sse_event(chunk_json(g.header, std::nullopt, std::nullopt, g.final_reason));
    if (g.include_usage) out += sse_event(usage_chunk_json(g.header, g.usage));
    out += sse_done();
  }
  if (!out.empty() && !sink.write(out.data(), out.size())) return false;  // the client has gone
  if (last) {
    g.answered = true;
    sink.done();
  }
  return true;
}

}  // namespace

OpenAiServer::OpenAiServer(engine::AsyncEngine& engine, const tokenizer::BpeTokenizer& tokenizer, ServedModel model)
    : engine_(engine),
      tokenizer_(tokenizer),
      model_(std::move(model)),
      admission_(model_.max_running, model_.max_waiting),
      metrics_(model_.name) {}

ResponseHeader OpenAiServer::new_header(Endpoint endpoint) {
  ResponseHeader h;
  h.endpoint = endpoint;
  std::ostringstream id;
  id << (endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") << std::hex << next_response_++;
  h.id = id.str();
  h.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  h.model = model_.name;
  return h;
}

engine::Request OpenAiServer::engine_request(const GenerationRequest& g, Endpoint endpoint) const {
  engine::Request r;
  const std::string prompt_param = endpoint == Endpoint::chat ? "messages" : "prompt";
  if (endpoint == Endpoint::chat) {
    r.prompt = tokenizer_.encode_prompt(tokenizer_.apply_chat_template(g.messages, /*add_generation_prompt=*/true));
  } else if (g.prompt_text) {
    r.prompt = tokenizer_.encode_prompt(*g.prompt_text);
  } else {
    r.prompt = *g.prompt_ids;
    for (const int32_t id : r.prompt)
      if (id >= tokenizer_.size())
        throw invalid_request("'prompt': token id " + std::to_string(id) + " is not in the vocabulary (" +
                                  std::to_string(tokenizer_.size()) + " tokens)",
                              "prompt");
  }
  if (r.prompt.empty()) throw invalid_request("'" + prompt_param + "' gives no tokens", prompt_param);
  const auto prompt_len = int64_t(r.prompt.size());
  if (prompt_len >= model_.max_seq_len)
    throw invalid_request("'" + prompt_param + "' is " + std::to_string(prompt_len) + " tokens: the context holds " +
                              std::to_string(model_.max_seq_len) + ", the reply included",
                          prompt_param);
  const int64_t room = model_.max_seq_len - prompt_len;
  if (g.max_tokens && *g.max_tokens > room)
    throw invalid_request("'max_tokens' is " + std::to_string(*g.max_tokens) + ": the prompt's " +
                              std::to_string(prompt_len) + " tokens leave room for " + std::to_string(room) +
                              " in a context of " + std::to_string(model_.max_seq_len),
                          "max_tokens");
  r.sampling.max_new_tokens = g.max_tokens.value_or(std::min(model_.default_max_tokens, room));
  r.sampling.temperature = g.temperature;
  r.sampling.top_p = g.top_p;
  r.sampling.seed = g.seed ? *g.seed : (uint64_t(std::random_device{}()) << 32 | std::random_device{}());
  if (!g.ignore_eos) r.sampling.stop_ids = tokenizer_.end_of_generation_ids();
  return r;
}

void OpenAiServer::generate(Endpoint endpoint, const httplib::Request& http, httplib::Response& response) {
  const Clock::time_point received = Clock::now();
  std::shared_ptr<Generation> g;
  bool stream = false;
  try {
    const GenerationRequest request =
        endpoint == Endpoint::chat ? parse_chat_request(http.body) : parse_completion_request(http.body);
    if (request.model != model_.name)
      throw ApiError(404, "the model '" + request.model + "' does not exist: this server serves '" + model_.name + "'",
                     "model", "not_found_error", "model_not_found");
    // Backpressure: a place among the requests held, or 429 now (before any tokenizing).
    std::optional<AdmissionControl::Ticket> ticket = admission_.try_admit();
    if (!ticket) {
      const int64_t retry = admission_.retry_after_seconds(metrics_.mean_service_seconds());
      response.set_header("Retry-After", std::to_string(retry));
      throw ApiError(429,
                     "the server holds " + std::to_string(admission_.in_flight()) + " requests, its limit (" +
                         std::to_string(model_.max_running) + " running + " + std::to_string(model_.max_waiting) +
                         " waiting): retry after " + std::to_string(retry) + " s",
                     "", "rate_limit_error", "queue_full");
    }
    engine::Request r = engine_request(request, endpoint);
    const auto prompt_tokens = int64_t(r.prompt.size());
    std::vector<int32_t> hidden = tokenizer_.end_of_generation_ids();
    std::shared_ptr<engine::RequestStream> handle;
    try {
      handle = engine_.submit(std::move(r));
    } catch (const engine::EngineStopped&) {
      throw shutting_down();
    }
    g = std::make_shared<Generation>(handle, tokenizer_, std::move(hidden), request.stop, new_header(endpoint),
                                     prompt_tokens, received, std::move(*ticket));
    g->include_usage = request.include_usage;
    stream = request.stream;
    try {
      g->first = handle->next();  // the engine's verdict before the status is chosen
    } catch (const std::invalid_argument& refused) {
      throw invalid_request(refused.what(), "");
    }
    if (!g->first || g->first->finish == engine::FinishReason::aborted) throw shutting_down();
  } catch (const ApiError& error) {
    if (error.status() == 400 || error.status() == 429) metrics_.reject(error.status() == 429);
    send_error(response, error);
    return;
  }

  if (stream) {
    engine::AsyncEngine& engine = engine_;
    ServingMetrics& metrics = metrics_;
    response.set_header("Cache-Control", "no-cache");
    response.set_chunked_content_provider(
        kSseContentType, [g](size_t, httplib::DataSink& sink) { return stream_events(*g, sink); },
        // Called once the response is over. A stream not read to its end lost its client (or a
        // shutdown cut it): aborted. One whose stop string matched is aborted by conclude().
        [g, &engine, &metrics](bool) {
          if (!g->ended && !g->stopped) engine.abort(g->stream);
          g->conclude(engine, metrics, g->answered ? finished_reason(g->final_reason) : FinishedReason::abort);
        });
    return;
  }

  std::string text;
  engine::FinishReason reason = engine::FinishReason::aborted;
  for (std::optional<engine::RequestDelta> delta = std::exchange(g->first, std::nullopt); delta;
       delta = g->stream->next()) {
    text += g->text_of(*delta);
    if (delta->finish) {
      reason = *delta->finish;
      g->ended = true;
    }
    if (g->stopped) {
      reason = engine::FinishReason::stop;
      break;
    }
  }
  if (reason == engine::FinishReason::aborted) {
    g->conclude(engine_, metrics_, FinishedReason::abort);
    return send_error(response, shutting_down());
  }
  g->conclude(engine_, metrics_, finished_reason(reason));
  send_json(response, 200, completion_json(g->header, text, reason, g->usage));
}

void OpenAiServer::install(httplib::Server& server) {
  server.Get("/health", [this](const httplib::Request&, httplib::Response& response) {
    const engine::AsyncEngineStats s = engine_.stats();
    send_json(response, 200,
              Json{{"status", "ok"},
                   {"running", s.running},
                   {"waiting", s.waiting},
                   {"free_blocks", s.free_blocks},
                   {"num_blocks", s.num_blocks},
                   {"submitted", s.submitted},
                   {"finished", s.finished},
                   {"aborted", s.aborted},
                   {"rejected", s.rejected},
                   {"config", engine::config_json(engine_.config())},
                   {"server",
                    {{"max_waiting", model_.max_waiting},
                     {"max_body_bytes", model_.max_body_bytes},
                     {"default_max_tokens", model_.default_max_tokens}}}});
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    response.set_content(metrics_.render(engine_.stats()), kPrometheusContentType);
  });
  const Json model{{"id", model_.name},
                   {"object", "model"},
                   {"created", 0},
                   {"owned_by", "inferlab"},
                   {"max_model_len", model_.max_seq_len}};
  server.Get("/v1/models", [model](const httplib::Request&, httplib::Response& response) {
    send_json(response, 200, Json{{"object", "list"}, {"data", Json::array({model})}});
  });
  server.Get(R"(/v1/models/(.+))", [this, model](const httplib::Request& request, httplib::Response& response) {
    if (request.matches[1] != model_.name)
      return send_error(response, ApiError(404, "the model '" + std::string(request.matches[1]) +
                                                    "' does not exist: this server serves '" + model_.name + "'",
                                           "model", "not_found_error", "model_not_found"));
    send_json(response, 200, model);
  });
  server.Post("/v1/chat/completions", [this](const httplib::Request& request, httplib::Response& response) {
    generate(Endpoint::chat, request, response);
  });
  server.Post("/v1/completions", [this](const httplib::Request& request, httplib::Response& response) {
    generate(Endpoint::completions, request, response);
  });
  // cpp-httplib answers 413 itself, without reading the body, when Content-Length is above this.
  server.set_payload_max_length(model_.max_body_bytes);
  server.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& request,
                                                                       httplib::Response& response) {
    if (!response.body.empty() || response.is_chunked_content_provider_)
      return httplib::Server::HandlerResponse::Unhandled;
    const bool not_found = response.status == 404;
    std::string message = not_found ? "no route " + request.method + " " + request.path : "HTTP error";
    if (response.status == 413)
      message = "the request body is larger than this server's limit of " + std::to_string(model_.max_body_bytes) +
                " bytes (inferlab serve --max-body-bytes)";
    const ApiError error(response.status, message, "", not_found ? "not_found_error" : "invalid_request_error");
    send_json(response, response.status, error.to_json());
    return httplib::Server::HandlerResponse::Handled;
  }));
  server.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr error) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(response, ApiError(500, what, "", "internal_error"));
  });
}

}  // namespace inferlab::cli
