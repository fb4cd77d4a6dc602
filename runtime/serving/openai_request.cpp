#include "runtime/serving/openai_request.h"

#include <cmath>
#include <limits>
#include <utility>

#include "runtime/tokenizer/stop_strings.h"

namespace inferlab::serving {

ApiError::ApiError(int status, const std::string& message, std::string param, std::string type, std::string code)
    : std::runtime_error(message),
      status_(status),
      param_(std::move(param)),
      type_(std::move(type)),
      code_(std::move(code)) {}

Json ApiError::to_json() const {
  Json error;
  error["message"] = what();
  error["type"] = type_;
  error["param"] = param_.empty() ? Json(nullptr) : Json(param_);
  error["code"] = code_.empty() ? Json(nullptr) : Json(code_);
  return Json{{"error", error}};
}

ApiError invalid_request(const std::string& message, const std::string& param) {
  return ApiError(400, message, param);
}

namespace {

// The member @p name of @p body, or nullptr when it is absent or null.
const Json* field(const Json& body, const std::string& name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

Json parse_object(const std::string& text) {
  Json body;
  // The depth is checked as the parser goes: a body nested deeper is refused at the first bracket
  // past the limit, before anything deeper is built.
  const Json::parser_callback_t depth_limit = [](int depth, Json::parse_event_t event, Json&) {
    if (depth >= kMaxJsonDepth && (event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start))
      throw invalid_request("the body nests arrays and objects more than " + std::to_string(kMaxJsonDepth) +
                                " deep (this server's limit)",
                            "");
    return true;
  };
  try {
    body = Json::parse(text, depth_limit);
  } catch (const Json::parse_error& error) {
    throw invalid_request(std::string("the body is not valid JSON: ") + error.what(), "");
  } catch (const Json::out_of_range& error) {  // a number beyond a double (1e999)
    throw invalid_request(std::string("the body holds a number out of range: ") + error.what(), "");
  }
  if (!body.is_object()) throw invalid_request("the body must be a JSON object", "");
  return body;
}

std::string string_field(const Json& body, const std::string& name) {
  const Json* value = field(body, name);
  if (value == nullptr) throw invalid_request("'" + name + "' is required", name);
  if (!value->is_string()) throw invalid_request("'" + name + "' must be a string", name);
  return value->get<std::string>();
}

std::optional<int64_t> integer_field(const Json& body, const std::string& name) {
  const Json* value = field(body, name);
  if (value == nullptr) return std::nullopt;
  if (value->is_number_unsigned() && value->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw invalid_request("'" + name + "' is too large", name);
  if (!value->is_number_integer()) throw invalid_request("'" + name + "' must be an integer", name);
  return value->get<int64_t>();
}

std::optional<double> number_field(const Json& body, const std::string& name) {
  const Json* value = field(body, name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) throw invalid_request("'" + name + "' must be a number", name);
  return value->get<double>();
}

std::optional<bool> bool_field(const Json& body, const std::string& name, const std::string& param) {
  const Json* value = field(body, name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) throw invalid_request("'" + param + "' must be a boolean", param);
  return value->get<bool>();
}

// The fields both endpoints share.
GenerationRequest common_fields(const Json& body) {
  GenerationRequest r;
  r.model = string_field(body, "model");
  const std::optional<int64_t> max_tokens = integer_field(body, "max_tokens");
  const std::optional<int64_t> max_completion_tokens = integer_field(body, "max_completion_tokens");
  r.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  if (r.max_tokens && *r.max_tokens < 1) {
    const std::string name = max_completion_tokens ? "max_completion_tokens" : "max_tokens";
    throw invalid_request("'" + name + "' must be at least 1, not " + std::to_string(*r.max_tokens), name);
  }
  if (const auto t = number_field(body, "temperature")) {
    if (!(*t >= 0) || !(*t <= std::numeric_limits<float>::max()))  // also NaN, inf and what float cannot hold
      throw invalid_request("'temperature' must be a finite number ≥ 0", "temperature");
    r.temperature = float(*t);
  }
  if (const auto p = number_field(body, "top_p")) {
    if (!(*p > 0 && *p <= 1)) throw invalid_request("'top_p' must be in (0, 1]", "top_p");
    r.top_p = float(*p);
  }
  if (const auto seed = integer_field(body, "seed")) r.seed = uint64_t(*seed);
  if (const auto n = integer_field(body, "n")) {
    if (*n < 1 || *n > kMaxChoices)
      throw invalid_request("'n' must be in [1, " + std::to_string(kMaxChoices) + "]", "n");
    r.n = int32_t(*n);
  }
  if (const Json* stop = field(body, "stop")) {
    if (stop->is_string()) {
      r.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (size_t i = 0; i < stop->size(); ++i) {
        if (!(*stop)[i].is_string())
          throw invalid_request("'stop[" + std::to_string(i) + "]' must be a string", "stop");
        r.stop.push_back((*stop)[i].get<std::string>());
      }
    } else {
      throw invalid_request("'stop' must be a string or an array of strings", "stop");
    }
    try {
      (void)tokenizer::StopStringMatcher(r.stop);  // the matcher's own rule: ≤ 4, none empty
    } catch (const std::invalid_argument& e) {
      throw invalid_request(std::string("'stop' is refused: ") + e.what(), "stop");
    }
  }
  r.ignore_eos = bool_field(body, "ignore_eos", "ignore_eos").value_or(false);
  if (const Json* salt = field(body, "cache_salt")) {
    if (!salt->is_string() || salt->get<std::string>().empty())
      throw invalid_request("'cache_salt' must be a non-empty string", "cache_salt");
    r.cache_salt = salt->get<std::string>();
  }
  // Fields the server does not implement are refused rather than silently ignored, unless they
  // ask for what the server does anyway (false, 0).
  for (const char* name : {"echo", "frequency_penalty", "presence_penalty", "logit_bias",
                           "best_of", "suffix", "tools", "response_format"}) {
    const Json* value = field(body, name);
    if (value == nullptr) continue;
    const bool neutral = (value->is_boolean() && !value->get<bool>()) || (value->is_number() && value->get<double>() == 0) ||
                         (std::string(name) == "best_of" && value->is_number_integer() && value->get<int64_t>() == 1);
    if (!neutral) throw invalid_request("'" + std::string(name) + "' is not supported by this server", name);
  }
  r.stream = bool_field(body, "stream", "stream").value_or(false);
  if (const Json* options = field(body, "stream_options")) {
    if (!r.stream) throw invalid_request("'stream_options' is only allowed with stream: true", "stream_options");
    if (!options->is_object()) throw invalid_request("'stream_options' must be an object", "stream_options");
    r.include_usage = bool_field(*options, "include_usage", "stream_options.include_usage").value_or(false);
  }
  return r;
}


// An integer field in [0, engine::SamplingParams::kMaxLogprobs].
std::optional<int32_t> logprobs_count(const Json& body, const std::string& name) {
  const std::optional<int64_t> k = integer_field(body, name);
  if (k && (*k < 0 || *k > engine::SamplingParams::kMaxLogprobs))
    throw invalid_request("'" + name + "' must be in [0, " + std::to_string(engine::SamplingParams::kMaxLogprobs) + "]",
                          name);
  return k ? std::optional<int32_t>(int32_t(*k)) : std::nullopt;
}

}  // namespace

GenerationRequest parse_chat_request(const std::string& text) {
  const Json body = parse_object(text);
  GenerationRequest r = common_fields(body);
  // Chat: logprobs is a boolean, top_logprobs the alternatives (only with logprobs: true).
  const bool logprobs = bool_field(body, "logprobs", "logprobs").value_or(false);
  const std::optional<int32_t> top = logprobs_count(body, "top_logprobs");
  if (top && !logprobs) throw invalid_request("'top_logprobs' is only allowed with logprobs: true", "top_logprobs");
  if (logprobs) r.logprobs = top.value_or(0);
  const Json* messages = field(body, "messages");
  if (messages == nullptr) throw invalid_request("'messages' is required", "messages");
  if (!messages->is_array()) throw invalid_request("'messages' must be an array", "messages");
  if (messages->empty()) throw invalid_request("'messages' must hold at least one message", "messages");
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw invalid_request("'" + at + "' must be an object", at);
    const Json* role = field(m, "role");
    if (role == nullptr || !role->is_string())
      throw invalid_request("'" + at + ".role' must be a string", at + ".role");
    const std::string name = role->get<std::string>();
    if (name != "system" && name != "developer" && name != "user" && name != "assistant")
      throw invalid_request("'" + at + ".role' is '" + name + "': must be system, developer, user or assistant",
                            at + ".role");
    const Json* content = field(m, "content");
    std::string text;
    if (content != nullptr && content->is_string()) {
      text = content->get<std::string>();
    } else if (content != nullptr && content->is_array()) {  // content parts: text ones only
      for (size_t j = 0; j < content->size(); ++j) {
        const Json& part = (*content)[j];
        const std::string part_at = at + ".content[" + std::to_string(j) + "]";
        const Json* type = part.is_object() ? field(part, "type") : nullptr;
        if (type == nullptr || !type->is_string() || type->get<std::string>() != "text")
          throw invalid_request("'" + part_at + "': only parts of type 'text' are supported", part_at);
        const Json* part_text = field(part, "text");
        if (part_text == nullptr || !part_text->is_string())
          throw invalid_request("'" + part_at + ".text' must be a string", part_at + ".text");
        text += part_text->get<std::string>();
      }
    } else {
      throw invalid_request("'" + at + ".content' must be a string or an array of text parts", at + ".content");
    }
    // "developer" is the API's newer name for the system role (the chat template knows "system").
    r.messages.push_back({name == "developer" ? "system" : name, std::move(text)});
  }
  return r;
}

GenerationRequest parse_completion_request(const std::string& text) {
  const Json body = parse_object(text);
  GenerationRequest r = common_fields(body);
  // Completions: logprobs is the number of alternatives (0: the chosen token's only).
  if (const std::optional<int32_t> k = logprobs_count(body, "logprobs")) r.logprobs = *k;
  if (field(body, "top_logprobs") != nullptr)
    throw invalid_request("'top_logprobs' is a chat field: completions take logprobs: N", "top_logprobs");
  const Json* prompt = field(body, "prompt");
  if (prompt == nullptr) throw invalid_request("'prompt' is required", "prompt");
  if (prompt->is_string()) {
    r.prompt_text = prompt->get<std::string>();
    if (r.prompt_text->empty()) throw invalid_request("'prompt' must not be empty", "prompt");
    return r;
  }
  if (!prompt->is_array() || prompt->empty())
    throw invalid_request("'prompt' must be a string or a non-empty array of token ids", "prompt");
  if (prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    // One prompt in a batch of one: ["text"] or [[ids]] — read in place, one level down only.
    prompt = &(*prompt)[0];
    if (prompt->is_string()) {
      r.prompt_text = prompt->get<std::string>();
      if (r.prompt_text->empty()) throw invalid_request("'prompt' must not be empty", "prompt");
      return r;
    }
    if (prompt->empty()) throw invalid_request("'prompt' must be a string or a non-empty array of token ids", "prompt");
  }
  std::vector<int32_t> ids;
  for (const Json& id : *prompt) {
    if (id.is_string() || id.is_array())
      throw invalid_request("'prompt': one prompt per request (a string or an array of token ids)", "prompt");
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max())
      throw invalid_request("'prompt' token ids must be integers ≥ 0", "prompt");
    ids.push_back(int32_t(id.get<int64_t>()));
  }
  r.prompt_ids = std::move(ids);
  return r;
}

}  // namespace inferlab::serving
