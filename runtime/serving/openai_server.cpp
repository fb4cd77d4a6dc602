#include "runtime/serving/openai_server.h"

#include <algorithm>
#include <cmath>
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
#include "runtime/serving/prometheus.h"
#include "runtime/serving/sse.h"

namespace inferlab::serving {
namespace {

constexpr const char* kJson = "application/json";

HttpResponse json_response(int status, const Json& body) {
  return {status, kJson, body.dump(-1, ' ', false, Json::error_handler_t::replace), {}};
}

HttpResponse error_response(const ApiError& error) { return json_response(error.status(), error.to_json()); }

HttpAnswer now(HttpResponse response) { return {std::move(response), {}}; }

ApiError shutting_down() {
  return ApiError(503, "the server is shutting down", "", "unavailable_error");
}

using Clock = std::chrono::steady_clock;

// How often a worker waiting for a delta looks at its client.
constexpr std::chrono::milliseconds kClientCheck{50};

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// One choice of an answer (the API's n): its detokenizer, stop strings and logprobs, and how it
// ended.
struct Choice {
  Choice(const tokenizer::BpeTokenizer& tokenizer, std::vector<std::string> stops)
      : detokenizer(tokenizer), stop(std::move(stops)) {}
  tokenizer::IncrementalDetokenizer detokenizer;
  tokenizer::StopStringMatcher stop;
  bool stopped = false;  // a stop string matched
  std::optional<engine::FinishReason> reason;  // set once it has ended (stop for a stop string)
  std::string text;                            // the non-streamed answer's text
  std::vector<TokenLogprobs> logprobs;         // of the tokens not yet sent
  int64_t text_offset = 0;                     // bytes of answer so far (the tokens' bytes)
};

// One request being answered: its stream, its choices, what has been counted and when its tokens
// came; it holds its admission ticket until it is destroyed.
struct Generation {
  Generation(std::shared_ptr<engine::RequestStream> s, const tokenizer::BpeTokenizer& tokenizer,
             std::vector<int32_t> hidden_ids, const std::vector<std::string>& stops, int32_t n, ResponseHeader h,
             int64_t prompt_tokens, Clock::time_point received_at, std::shared_ptr<AdmissionControl::Ticket> t)
      : stream(std::move(s)),
        tokenizer(tokenizer),
        hidden(std::move(hidden_ids)),
        header(std::move(h)),
        received(received_at),
        ticket(std::move(t)) {
    usage.prompt_tokens = prompt_tokens;
    for (int32_t i = 0; i < n; ++i) choices.emplace_back(tokenizer, stops);
  }

  // The text @p delta completes for its choice, counting and timing its tokens: end-of-generation
  // ids hidden, what may begin a stop string held back, nothing after a stop string matched (the
  // choice is aborted in the engine: it ends "stop"); at its finish, what the detokenizer and the
  // matcher held. A choice that has ended takes nothing more (a stopped one's aborted finish).
  std::string text_of(const engine::RequestDelta& delta, engine::AsyncEngine& engine) {
    Choice& c = choices.at(size_t(delta.index));
    if (c.reason) return "";
    const Clock::time_point now = Clock::now();
    std::string text;
    for (size_t j = 0; j < delta.new_tokens.size() && !c.stopped; ++j) {
      const int32_t id = delta.new_tokens[j];
      ++usage.completion_tokens;
      if (timings.ttft < 0) {
        timings.ttft = seconds_between(received, now);
      } else if (delta.index == 0) {  // the gap since choice 0's last delta, shared by this delta's tokens
        timings.itl.push_back(seconds_between(last_token, now) / double(delta.new_tokens.size()));
      }
      if (std::find(hidden.begin(), hidden.end(), id) == hidden.end()) {
        text += c.stop.push(c.detokenizer.push(id));
        if (j < delta.logprobs.size()) note_logprobs(c, id, delta.logprobs[j]);
      }
      c.stopped = c.stop.stopped();
    }
    if (!delta.new_tokens.empty() && delta.index == 0) last_token = now;
    if (delta.finish && !c.stopped) {
      text += c.stop.push(c.detokenizer.flush());
      c.stopped = c.stop.stopped();
      if (!c.stopped) text += c.stop.flush();
    }
    if (c.stopped) {
      c.reason = engine::FinishReason::stop;
      if (!delta.finish) engine.abort(stream, delta.index);  // the rest of this choice is not needed
    } else if (delta.finish) {
      c.reason = *delta.finish;
    }
    if (c.reason) ++choices_ended;
    return text;
  }

  // Keeps @p id's log-probabilities as the API shows them (the token's bytes as its text).
  void note_logprobs(Choice& c, int32_t id, const engine::SampledLogprobs& lp) {
    TokenLogprobs t{tokenizer.token_bytes(id), lp.logprob, {}, c.text_offset};
    for (const engine::TokenLogprob& alt : lp.top) t.top.emplace_back(tokenizer.token_bytes(alt.id), alt.logprob);
    c.text_offset += int64_t(t.token.size());
    c.logprobs.push_back(std::move(t));
  }

  // The logprobs of @p c kept since the last call, as a choice's `logprobs`; nullopt when none
  // were asked (or, with @p only_if_any, none are left).
  std::optional<Json> take_logprobs(Choice& c, bool only_if_any = false) {
    if (!want_logprobs || (only_if_any && c.logprobs.empty())) return std::nullopt;
    Json out = logprobs_json(header.endpoint, c.logprobs);
    c.logprobs.clear();
    return out;
  }

  // Every choice has ended.
  bool done() const { return choices_ended == int32_t(choices.size()); }

  // The next delta, looking at the client while waiting for it: a client that has gone has its
  // request aborted (the aborted deltas then end the stream within a step).
  std::optional<engine::RequestDelta> next(engine::AsyncEngine& engine, ResponseWriter& writer) {
    if (first) return std::exchange(first, std::nullopt);
    for (;;) {  // every kClientCheck, whether deltas keep coming (a decode) or not (a queue)
      if (!abandoned && Clock::now() >= next_check) {
        next_check = Clock::now() + kClientCheck;
        if (writer.client_gone()) {
          abandoned = true;
          engine.abort(stream);
        }
      }
      if (stream->wait_for(kClientCheck)) break;
    }
    std::optional<engine::RequestDelta> delta = stream->next();
    if (!delta || (delta->finish && ++finishes_read == int32_t(choices.size()))) ended = true;
    return delta;
  }

  // Once answered (or given up): a request that has not ended — a choice stopped by a stop
  // string, its client gone — is aborted and its stream read to its end (within a step), for its
  // queue time; then the metrics count it, once.
  void conclude(engine::AsyncEngine& engine, ServingMetrics& metrics, FinishedReason how) {
    if (concluded) return;
    concluded = true;
    if (!ended) {
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
  const tokenizer::BpeTokenizer& tokenizer;
  std::vector<Choice> choices;
  int32_t choices_ended = 0;
  std::vector<int32_t> hidden;
  ResponseHeader header;
  Usage usage;
  Clock::time_point received, last_token;
  Clock::time_point next_check;  // when to look at the client again
  RequestTimings timings;
  std::shared_ptr<AdmissionControl::Ticket> ticket;
  std::optional<engine::RequestDelta> first;  // read before the answer's status was chosen
  int32_t finishes_read = 0;  // finish deltas read (one per choice)
  bool ended = false;         // the stream has been read to its end
  bool abandoned = false;     // the client went away: the request was aborted
  bool concluded = false;     // counted in the metrics
  bool want_logprobs = false;  // the request asked for logprobs
};

FinishedReason finished_reason(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::stop:
      return FinishedReason::stop;
    case engine::FinishReason::length:
      return FinishedReason::length;
    case engine::FinishReason::aborted:
      break;
  }
  return FinishedReason::abort;
}

// The answer as server-sent events, one per delta, each naming its choice; a choice's last chunk
// has its finish_reason; once every choice has ended, the usage chunk and [DONE]. The finish is
// counted before the last event is written (a client that reads [DONE] finds it counted).
void stream_events(Generation& g, engine::AsyncEngine& engine, ServingMetrics& metrics, bool include_usage,
                   ResponseWriter& writer) {
  bool open = writer.begin_events();
  if (open && g.header.endpoint == Endpoint::chat)
    for (int32_t i = 0; i < int32_t(g.choices.size()) && open; ++i)
      open = writer.write_events(sse_event(chunk_json(g.header, "assistant", "", std::nullopt, std::nullopt, i)));
  while (open) {
    std::optional<engine::RequestDelta> delta;
    try {
      delta = g.next(engine, writer);
    } catch (const std::exception&) {  // the engine thread failed: cut the stream
      break;
    }
    if (!delta) break;
    Choice& c = g.choices.at(size_t(delta->index));
    const bool was_over = c.reason.has_value();
    // An aborted finish of a choice still going: a shutdown or a client gone — cut.
    if (!was_over && delta->finish == engine::FinishReason::aborted) break;
    std::string out;
    if (const std::string text = g.text_of(*delta, engine); !text.empty())
      out += sse_event(chunk_json(g.header, std::nullopt, text, std::nullopt, g.take_logprobs(c), delta->index));
    if (!was_over && c.reason)  // its last chunk carries the logprobs of text held back to the end
      out += sse_event(chunk_json(g.header, std::nullopt, std::nullopt, *c.reason, g.take_logprobs(c, true),
                                  delta->index));
    if (g.done()) {
      g.conclude(engine, metrics, finished_reason(*g.choices[0].reason));
      if (include_usage) out += sse_event(usage_chunk_json(g.header, g.usage));
      out += sse_done();
      if (writer.write_events(out)) writer.end_events();
      return;
    }
    open = writer.write_events(out);
  }
  g.conclude(engine, metrics, FinishedReason::abort);  // cut: aborted (if it had not ended)
}

}  // namespace

OpenAiServer::OpenAiServer(engine::AsyncEngine& engine, const tokenizer::BpeTokenizer& tokenizer, ServedModel model)
    : engine_(engine),
      tokenizer_(tokenizer),
      model_(std::move(model)),
      admission_(model_.max_running, model_.max_waiting),
      metrics_(model_.name),
      model_object_{{"id", model_.name},
                    {"object", "model"},
                    {"created", 0},
                    {"owned_by", "inferlab"},
                    {"max_model_len", model_.max_seq_len}} {}

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

int64_t OpenAiServer::retry_after_seconds() const {
  const engine::AsyncEngineStats s = engine_.stats();
  const int64_t held = s.running + s.waiting;
  double service = metrics_.mean_service_seconds();
  double first_leaves = 0.0;
  if (held > 0 && s.engine.steps > 0) {  // the queued work: each step advances every running request by a token
    const double step = s.engine.busy_seconds / double(s.engine.steps);
    service = std::max(service, double(s.tokens_to_generate) / double(held) * step);
    first_leaves = double(s.fewest_tokens_to_generate) * step;  // the soonest a running request must leave
  }
  const auto queued = int64_t(std::ceil(std::min(first_leaves, 3600.0)));
  return std::max(admission_.retry_after_seconds(service), queued);
}

engine::Request OpenAiServer::engine_request(const GenerationRequest& g, Endpoint endpoint) const {
  engine::Request r;
  const std::string prompt_param = endpoint == Endpoint::chat ? "messages" : "prompt";
  if (endpoint == Endpoint::chat) {
    r.prompt = tokenizer_.encode_chat(g.messages, /*add_generation_prompt=*/true);
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
  r.cache_salt = g.cache_salt;
  r.sampling.logprobs = g.logprobs;
  if (g.n > model_.max_running)
    throw invalid_request("'n' is " + std::to_string(g.n) + ": this server runs at most " +
                              std::to_string(model_.max_running) + " sequences at once (--max-seqs)",
                          "n");
  r.sampling.n = g.n;
  return r;
}

HttpAnswer OpenAiServer::generate(Endpoint endpoint, const HttpRequest& http) {
  const Clock::time_point received = Clock::now();
  try {
    GenerationRequest request =
        endpoint == Endpoint::chat ? parse_chat_request(http.body) : parse_completion_request(http.body);
    if (request.model != model_.name)
      throw ApiError(404, "the model '" + request.model + "' does not exist: this server serves '" + model_.name + "'",
                     "model", "not_found_error", "model_not_found");
    // Backpressure: a place among the requests held, or 429 now (before any tokenizing).
    std::optional<AdmissionControl::Ticket> ticket = admission_.try_admit();
    if (!ticket) {
      const int64_t retry = retry_after_seconds();
      HttpResponse refused = error_response(
          ApiError(429,
                   "the server holds " + std::to_string(admission_.in_flight()) + " requests, its limit (" +
                       std::to_string(model_.max_running) + " running + " + std::to_string(model_.max_waiting) +
                       " waiting): retry after " + std::to_string(retry) + " s",
                   "", "rate_limit_error", "queue_full"));
      refused.headers.emplace_back("Retry-After", std::to_string(retry));
      metrics_.reject(true);
      return now(std::move(refused));
    }
    auto place = std::make_shared<AdmissionControl::Ticket>(std::move(*ticket));
    return {{}, [this, endpoint, request = std::move(request), received, place](ResponseWriter& writer) {
              answer(endpoint, request, received, place, writer);
            }};
  } catch (const ApiError& error) {
    if (error.status() == 400) metrics_.reject(false);
    return now(error_response(error));
  }
}

void OpenAiServer::answer(Endpoint endpoint, const GenerationRequest& request, Clock::time_point received,
                          std::shared_ptr<AdmissionControl::Ticket> ticket, ResponseWriter& writer) {
  std::unique_ptr<Generation> g;
  try {
    engine::Request r = engine_request(request, endpoint);
    const auto prompt_tokens = int64_t(r.prompt.size());
    std::shared_ptr<engine::RequestStream> handle;
    try {
      handle = engine_.submit(std::move(r));
    } catch (const engine::EngineStopped&) {
      throw shutting_down();
    }
    g = std::make_unique<Generation>(handle, tokenizer_, tokenizer_.end_of_generation_ids(), request.stop, request.n,
                                     new_header(endpoint), prompt_tokens, received, std::move(ticket));
    g->want_logprobs = request.logprobs >= 0;
    try {
      g->first = g->next(engine_, writer);  // the engine's verdict before the status is chosen
    } catch (const std::invalid_argument& refused) {
      g->ended = g->concluded = true;  // refused: never ran, counted as rejected below
      throw invalid_request(refused.what(), "");
    }
    if (!g->first || g->first->finish == engine::FinishReason::aborted) {
      g->conclude(engine_, metrics_, FinishedReason::abort);
      if (g->abandoned) return;  // nobody to answer
      throw shutting_down();
    }
  } catch (const ApiError& error) {
    if (error.status() == 400) metrics_.reject(false);
    writer.send(error_response(error));
    return;
  }

  if (request.stream) return stream_events(*g, engine_, metrics_, request.include_usage, writer);

  bool cut = false;  // a choice aborted while still going: a shutdown, or the client gone
  while (!g->done() && !cut) {
    std::optional<engine::RequestDelta> delta = g->next(engine_, writer);
    if (!delta) break;
    Choice& c = g->choices.at(size_t(delta->index));
    if (!c.reason && delta->finish == engine::FinishReason::aborted) cut = true;
    c.text += g->text_of(*delta, engine_);
  }
  if (cut || !g->done()) {
    g->conclude(engine_, metrics_, FinishedReason::abort);
    if (!g->abandoned) writer.send(error_response(shutting_down()));
    return;
  }
  g->conclude(engine_, metrics_, finished_reason(*g->choices[0].reason));
  std::vector<ChoiceText> choices;
  for (Choice& c : g->choices) choices.push_back({c.text, *c.reason, g->take_logprobs(c)});
  writer.send(json_response(200, completion_json(g->header, choices, g->usage)));
}

HttpAnswer OpenAiServer::health() const {
  const engine::AsyncEngineStats s = engine_.stats();
  const int64_t stop = metrics_.finished(FinishedReason::stop), length = metrics_.finished(FinishedReason::length),
                abort = metrics_.finished(FinishedReason::abort);
  return now(json_response(200, Json{{"status", "ok"},
                                     {"running", s.running},
                                     {"waiting", s.waiting},
                                     {"free_blocks", s.free_blocks},
                                     {"num_blocks", s.num_blocks},
                                     {"submitted", s.submitted},
                                     {"rejected", s.rejected},
                                     {"finished", stop + length},
                                     {"aborted", abort},
                                     {"finished_reason", {{"stop", stop}, {"length", length}, {"abort", abort}}},
                                     {"config", engine::config_json(engine_.config())},
                                     {"server",
                                      {{"max_model_len", model_.max_seq_len},
                                       {"max_waiting", model_.max_waiting},
                                       {"default_max_tokens", model_.default_max_tokens}}}}));
}

HttpAnswer OpenAiServer::route(const HttpRequest& request) {
  const bool get = request.method == "GET", post = request.method == "POST";
  if (get && request.path == "/health") return health();
  if (get && request.path == "/metrics")
    return now({200, kPrometheusContentType, metrics_.render(engine_.stats()), {}});
  if (get && request.path == "/v1/models")
    return now(json_response(200, Json{{"object", "list"}, {"data", Json::array({model_object_})}}));
  if (get && request.path.starts_with("/v1/models/")) {
    const std::string id = request.path.substr(std::string("/v1/models/").size());
    if (id != model_.name)
      return now(error_response(ApiError(
          404, "the model '" + id + "' does not exist: this server serves '" + model_.name + "'", "model",
          "not_found_error", "model_not_found")));
    return now(json_response(200, model_object_));
  }
  if (post && request.path == "/v1/chat/completions") return generate(Endpoint::chat, request);
  if (post && request.path == "/v1/completions") return generate(Endpoint::completions, request);
  return now(error_response(
      ApiError(404, "no route " + request.method + " " + request.path, "", "not_found_error")));
}

}  // namespace inferlab::serving
