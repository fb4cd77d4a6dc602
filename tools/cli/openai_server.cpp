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

// One request being answered: its stream, its detokenizer and what has been counted.
struct Generation {
  Generation(std::shared_ptr<engine::RequestStream> s, const tokenizer::BpeTokenizer& tokenizer,
             std::vector<int32_t> stop_ids, ResponseHeader h, int64_t prompt_tokens)
      : stream(std::move(s)), detokenizer(tokenizer), hidden(std::move(stop_ids)), header(std::move(h)) {
    usage.prompt_tokens = prompt_tokens;
  }

  // The text @p delta completes (its end-of-generation ids hidden; at its finish, what the
  // detokenizer held back), counting its tokens.
  std::string text_of(const engine::RequestDelta& delta) {
    std::string text;
    for (const int32_t id : delta.new_tokens) {
      ++usage.completion_tokens;
      if (std::find(hidden.begin(), hidden.end(), id) == hidden.end()) text += detokenizer.push(id);
    }
    if (delta.finish) text += detokenizer.flush();
    return text;
  }

  std::shared_ptr<engine::RequestStream> stream;
  tokenizer::IncrementalDetokenizer detokenizer;
  std::vector<int32_t> hidden;
  ResponseHeader header;
  Usage usage;
  std::optional<engine::RequestDelta> first;  // read before the answer's status was chosen
  bool include_usage = false;
  bool started = false;  // the first event has been written
  bool ended = false;    // the stream has been read to its finish
};

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
  const std::string text = g.text_of(*delta);
  if (!text.empty()) out += sse_event(chunk_json(g.header, std::nullopt, text, std::nullopt));
  if (delta->finish) {
    out += sse_event(chunk_json(g.header, std::nullopt, std::nullopt, delta->finish));
    if (g.include_usage) out += sse_event(usage_chunk_json(g.header, g.usage));
    out += sse_done();
  }
  if (!out.empty() && !sink.write(out.data(), out.size())) return false;  // the client has gone
  if (delta->finish) {
    g.ended = true;
    sink.done();
  }
  return true;
}

}  // namespace

OpenAiServer::OpenAiServer(engine::AsyncEngine& engine, const tokenizer::BpeTokenizer& tokenizer, ServedModel model)
    : engine_(engine), tokenizer_(tokenizer), model_(std::move(model)) {}

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
  r.sampling.stop_ids = tokenizer_.end_of_generation_ids();
  return r;
}

void OpenAiServer::generate(Endpoint endpoint, const httplib::Request& http, httplib::Response& response) {
  std::shared_ptr<Generation> g;
  bool stream = false;
  try {
    const GenerationRequest request =
        endpoint == Endpoint::chat ? parse_chat_request(http.body) : parse_completion_request(http.body);
    if (request.model != model_.name)
      throw ApiError(404, "the model '" + request.model + "' does not exist: this server serves '" + model_.name + "'",
                     "model", "not_found_error", "model_not_found");
    engine::Request r = engine_request(request, endpoint);
    const auto prompt_tokens = int64_t(r.prompt.size());
    std::vector<int32_t> stop_ids = r.sampling.stop_ids;
    std::shared_ptr<engine::RequestStream> handle;
    try {
      handle = engine_.submit(std::move(r));
    } catch (const engine::EngineStopped&) {
      throw shutting_down();
    }
    g = std::make_shared<Generation>(handle, tokenizer_, std::move(stop_ids), new_header(endpoint), prompt_tokens);
    g->include_usage = request.include_usage;
    stream = request.stream;
    try {
      g->first = handle->next();  // the engine's verdict before the status is chosen
    } catch (const std::invalid_argument& refused) {
      throw invalid_request(refused.what(), "");
    }
    if (!g->first || g->first->finish == engine::FinishReason::aborted) throw shutting_down();
  } catch (const ApiError& error) {
    send_error(response, error);
    return;
  }

  if (stream) {
    engine::AsyncEngine& engine = engine_;
    response.set_header("Cache-Control", "no-cache");
    response.set_chunked_content_provider(
        kSseContentType, [g](size_t, httplib::DataSink& sink) { return stream_events(*g, sink); },
        // Called once the response is over; a stream not read to its end lost its client.
        [g, &engine](bool) {
          if (!g->ended) engine.abort(g->stream);
        });
    return;
  }

  std::string text;
  engine::FinishReason reason = engine::FinishReason::aborted;
  for (std::optional<engine::RequestDelta> delta = std::exchange(g->first, std::nullopt); delta;
       delta = g->stream->next()) {
    text += g->text_of(*delta);
    if (delta->finish) reason = *delta->finish;
  }
  if (reason == engine::FinishReason::aborted) return send_error(response, shutting_down());
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
                   {"rejected", s.rejected}});
  });
  server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& response) {
    const Json model{{"id", model_.name},
                     {"object", "model"},
                     {"created", 0},
                     {"owned_by", "inferlab"},
                     {"max_model_len", model_.max_seq_len}};
    send_json(response, 200, Json{{"object", "list"}, {"data", Json::array({model})}});
  });
  server.Post("/v1/chat/completions", [this](const httplib::Request& request, httplib::Response& response) {
    generate(Endpoint::chat, request, response);
  });
  server.Post("/v1/completions", [this](const httplib::Request& request, httplib::Response& response) {
    generate(Endpoint::completions, request, response);
  });
  server.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& request,
                                                                   httplib::Response& response) {
    if (!response.body.empty() || response.is_chunked_content_provider_)
      return httplib::Server::HandlerResponse::Unhandled;
    const bool not_found = response.status == 404;
    const ApiError error(response.status, not_found ? "no route " + request.method + " " + request.path : "HTTP error",
                         "", not_found ? "not_found_error" : "invalid_request_error");
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
