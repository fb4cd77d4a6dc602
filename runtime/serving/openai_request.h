#pragma once
/// @file openai_request.h
/// The bodies of `POST /v1/chat/completions` and `POST /v1/completions` (`inferlab serve`,
/// chapter 09), read and checked: the fields of the OpenAI API that the server implements, each
/// of the wrong type or out of range refused with an ApiError naming it — what the server answers
/// as HTTP 400 with OpenAI's error object. Unknown fields are ignored, as vLLM does.
///
/// Fields: model (a string, required); messages (chat: a non-empty array of {role, content},
/// role system / developer (read as system) / user / assistant, content a string or an array of
/// {type: "text", text} parts) or prompt (completions: a string, one prompt as an array of token
/// ids, or a batch of one of those); max_completion_tokens or max_tokens (an integer ≥ 1; the
/// first wins when both are given); temperature (a number ≥ 0, default 1 as in the API; 0 is
/// greedy); top_p (a number in (0, 1], default 1); seed (an integer: the request's own random
/// stream, so the same seed gives the same tokens, alone or in any batch); stream (a boolean);
/// stream_options.include_usage (a boolean, only with stream); n (choices, in [1, 128]); stop (a string or an
/// array of up to 4, each non-empty: tokenizer::StopStringMatcher's rule); ignore_eos (a boolean,
/// vLLM's extension: generate max_tokens tokens even past the end-of-text token — what a load
/// generator needs for exact lengths); logprobs — chat: a boolean, with top_logprobs an integer
/// in [0, 20]; completions: an integer in [0, 20] (the alternatives listed; top_logprobs refused). A null field is the same as an absent one. Fields the
/// server does not implement (echo, the penalties, logit_bias, best_of,
/// suffix, tools, response_format) are refused with 400 unless neutral (false, 0, best_of 1).
/// cache_salt (vLLM's extension: a non-empty string) keeps the request's prompt blocks apart from
/// those of other salts in the prefix cache. A body nested deeper than kMaxJsonDepth is refused
/// as it is parsed; temperature must be finite (as a float).

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/json.h"
#include "runtime/engine/request.h"
#include "runtime/tokenizer/chat_template.h"

namespace inferlab::serving {

/// An error the server answers with: its HTTP status and OpenAI's error object.
class ApiError : public std::runtime_error {
 public:
  /// @p status (400, 404, 503 …), the message, the parameter it names ("" for none), the error
  /// type and code ("" for a null code).
  ApiError(int status, const std::string& message, std::string param, std::string type = "invalid_request_error",
           std::string code = "");
  /// The HTTP status.
  int status() const { return status_; }
  /// The parameter named, or "".
  const std::string& param() const { return param_; }
  /// `{"error": {"message", "type", "param", "code"}}`, with null for an empty param or code.
  Json to_json() const;

 private:
  int status_;
  std::string param_, type_, code_;
};

/// A 400 invalid_request_error naming @p param.
ApiError invalid_request(const std::string& message, const std::string& param);

/// A generation request, from either endpoint.
struct GenerationRequest {
  std::string model;                               ///< the model asked for
  std::vector<tokenizer::ChatMessage> messages;    ///< chat: the conversation (non-empty)
  std::optional<std::string> prompt_text;          ///< completions: the prompt as text …
  std::optional<std::vector<int32_t>> prompt_ids;  ///< … or as token ids (not yet checked against a vocabulary)
  std::optional<int64_t> max_tokens;  ///< max_completion_tokens, else max_tokens; absent: the server's default
  float temperature = 1.0f;           ///< ≥ 0; 0 is greedy
  float top_p = 1.0f;                 ///< in (0, 1]
  std::optional<uint64_t> seed;       ///< absent: the server picks one
  bool stream = false;                ///< answer as server-sent events
  bool include_usage = false;         ///< stream_options.include_usage: a last chunk with the usage
  std::vector<std::string> stop;      ///< stop strings (none: stop only at the end of text or max_tokens)
  bool ignore_eos = false;            ///< do not stop at the model's end-of-generation tokens
  std::string cache_salt;             ///< "" or vLLM's cache_salt: prefix-cache hits only among requests with the same salt
  int32_t logprobs = -1;              ///< −1: none; k ≥ 0: each token's logprob and the k most likely
  int32_t n = 1;                      ///< choices: the prompt prefilled once, its blocks shared (engine::SamplingParams::n)
};

/// The deepest nesting of arrays and objects a body may have (OpenAI's deepest field, a chat
/// message's content part, is at depth 4): deeper is refused as the parser reaches it.
inline constexpr int kMaxJsonDepth = 16;

/// The most choices (`n`) a request may ask for; the server also refuses more than it runs at once.
inline constexpr int kMaxChoices = 128;

/// Reads a `/v1/chat/completions` body. Throws ApiError (400) for malformed JSON, a body that is
/// not an object, or a field that is missing, of the wrong type or out of range, naming it
/// ("messages[1].role", "max_tokens", …).
GenerationRequest parse_chat_request(const std::string& body);

/// Reads a `/v1/completions` body, as parse_chat_request() but with prompt instead of messages.
GenerationRequest parse_completion_request(const std::string& body);

}  // namespace inferlab::serving
