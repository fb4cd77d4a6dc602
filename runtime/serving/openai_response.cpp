#include "runtime/serving/openai_response.h"

namespace inferlab::serving {
namespace {

Json envelope(const ResponseHeader& header, bool chunk) {
  const char* object = header.endpoint == Endpoint::completions ? "text_completion"
                       : chunk                                  ? "chat.completion.chunk"
                                                                : "chat.completion";
  return Json{{"id", header.id}, {"object", object}, {"created", header.created}, {"model", header.model}};
}

}  // namespace

Json usage_json(const Usage& usage) {
  return Json{{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

std::string finish_reason_name(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::stop:
      return "stop";
    case engine::FinishReason::length:
      return "length";
    case engine::FinishReason::aborted:
      return "abort";
  }
  return "abort";
}

Json logprobs_json(Endpoint endpoint, std::span<const TokenLogprobs> tokens) {
  const auto byte_values = [](const std::string& s) {
    Json bytes = Json::array();
    for (const char c : s) bytes.push_back(int(static_cast<unsigned char>(c)));
    return bytes;
  };
  if (endpoint == Endpoint::chat) {
    Json content = Json::array();
    for (const TokenLogprobs& t : tokens) {
      Json top = Json::array();
      for (const auto& [token, logprob] : t.top)
        top.push_back(Json{{"token", token}, {"logprob", logprob}, {"bytes", byte_values(token)}});
      content.push_back(
          Json{{"token", t.token}, {"logprob", t.logprob}, {"bytes", byte_values(t.token)}, {"top_logprobs", top}});
    }
    return Json{{"content", content}, {"refusal", nullptr}};
  }
  Json out{{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
           {"text_offset", Json::array()}};
  for (const TokenLogprobs& t : tokens) {
    out["tokens"].push_back(t.token);
    out["token_logprobs"].push_back(t.logprob);
    Json top = Json::object();
    for (const auto& [token, logprob] : t.top) top[token] = logprob;
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(t.text_offset);
  }
  return out;
}

Json completion_json(const ResponseHeader& header, std::span<const ChoiceText> choices, const Usage& usage) {
  Json out = envelope(header, false);
  out["choices"] = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceText& c = choices[i];
    Json choice{{"index", i}};
    if (header.endpoint == Endpoint::chat) {
      choice["message"] = Json{{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = c.logprobs ? *c.logprobs : Json(nullptr);
    choice["finish_reason"] = finish_reason_name(c.reason);
    out["choices"].push_back(std::move(choice));
  }
  out["usage"] = usage_json(usage);
  return out;
}

Json completion_json(const ResponseHeader& header, const std::string& text, engine::FinishReason reason,
                     const Usage& usage, const std::optional<Json>& logprobs) {
  const ChoiceText one{text, reason, logprobs};
  return completion_json(header, std::span<const ChoiceText>(&one, 1), usage);
}

Json chunk_json(const ResponseHeader& header, const std::optional<std::string>& role,
                const std::optional<std::string>& text, std::optional<engine::FinishReason> finish,
                const std::optional<Json>& logprobs, int32_t index) {
  Json out = envelope(header, true);
  Json choice{{"index", index}};
  if (header.endpoint == Endpoint::chat) {
    Json delta = Json::object();
    if (role) delta["role"] = *role;
    if (text) delta["content"] = *text;
    choice["delta"] = delta;
    if (logprobs) choice["logprobs"] = *logprobs;
  } else {
    choice["text"] = text.value_or("");
    choice["logprobs"] = logprobs ? *logprobs : Json(nullptr);
  }
  choice["finish_reason"] = finish ? Json(finish_reason_name(*finish)) : Json(nullptr);
  out["choices"] = Json::array({choice});
  return out;
}

Json usage_chunk_json(const ResponseHeader& header, const Usage& usage) {
  Json out = envelope(header, true);
  out["choices"] = Json::array();
  out["usage"] = usage_json(usage);
  return out;
}

}  // namespace inferlab::serving
