#pragma once
/// @file openai_response.h
/// The JSON objects `inferlab serve` answers with (chapter 09), as the OpenAI API defines them:
/// a whole completion (`chat.completion`, `text_completion`), one streamed chunk
/// (`chat.completion.chunk`; a streamed text completion's chunks are `text_completion` objects
/// too) and the usage chunk of `stream_options.include_usage` (no choices, only usage).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "runtime/engine/request.h"

namespace inferlab::serving {

/// Which endpoint a response is for.
enum class Endpoint {
  chat,         ///< POST /v1/chat/completions
  completions,  ///< POST /v1/completions
};

/// What identifies one response: its id ("chatcmpl-…", "cmpl-…"), creation time (Unix
/// seconds) and model name; every chunk of a stream repeats them.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::chat;  ///< the endpoint
  std::string id;                      ///< the response's id
  int64_t created = 0;                 ///< Unix time, seconds
  std::string model;                   ///< the model's name
};

/// Token counts: the prompt's (as the tokenizer encoded it) and the generated ones (a stop id
/// included, as vLLM counts them).
struct Usage {
  int64_t prompt_tokens = 0;      ///< tokens of the prompt
  int64_t completion_tokens = 0;  ///< tokens generated
};

/// One generated token's log-probabilities as the API shows them: the token's text (its bytes),
/// its logprob, the most likely tokens at its position, and where its text starts in the answer.
struct TokenLogprobs {
  std::string token;                                   ///< the token's bytes
  float logprob = 0.0f;                                ///< log p(token)
  std::vector<std::pair<std::string, float>> top;      ///< the most likely tokens and their log p
  int64_t text_offset = 0;                             ///< bytes of answer before this token (completions)
};

/// The `logprobs` of a choice: chat's `{"content": [{token, logprob, bytes, top_logprobs:
/// [{token, logprob, bytes}]}], "refusal": null}`, or completions' `{"tokens", "token_logprobs",
/// "top_logprobs": [{token: logprob}], "text_offset"}`.
Json logprobs_json(Endpoint endpoint, std::span<const TokenLogprobs> tokens);

/// `{"prompt_tokens", "completion_tokens", "total_tokens"}`.
Json usage_json(const Usage& usage);

/// "stop" or "length"; "abort" for an aborted request (vLLM's word; not sent to a client that
/// is still there, the server answers a shutdown with an error instead).
std::string finish_reason_name(engine::FinishReason reason);

/// One choice of a whole answer.
struct ChoiceText {
  std::string text;                                     ///< its text
  engine::FinishReason reason = engine::FinishReason::length;  ///< why it ended
  std::optional<Json> logprobs;                         ///< logprobs_json() of its tokens, or none
};

/// The whole answer with one choice per element of @p choices (index = position), as below.
Json completion_json(const ResponseHeader& header, std::span<const ChoiceText> choices, const Usage& usage);

/// The whole answer: chat `{id, object: "chat.completion", created, model, choices: [{index,
/// message: {role: "assistant", content}, finish_reason}], usage}`, or completions' with
/// `choices: [{index, text, logprobs, finish_reason}]`; chat's choice has `logprobs` too. Both
/// are @p logprobs (logprobs_json()) or null.
Json completion_json(const ResponseHeader& header, const std::string& text, engine::FinishReason reason,
                     const Usage& usage, const std::optional<Json>& logprobs = std::nullopt);

/// One streamed chunk with one choice: chat's `delta` holds @p role and @p text when given
/// (the first chunk carries the role), completions' `text` is @p text (or ""); finish_reason is
/// @p finish's name or null; @p logprobs, when given, those of this chunk's tokens (completions'
/// is null otherwise, chat's absent); the choice is @p index.
Json chunk_json(const ResponseHeader& header, const std::optional<std::string>& role,
                const std::optional<std::string>& text, std::optional<engine::FinishReason> finish,
                const std::optional<Json>& logprobs = std::nullopt, int32_t index = 0);

/// The usage chunk: `choices: []` and usage.
Json usage_chunk_json(const ResponseHeader& header, const Usage& usage);

}  // namespace inferlab::serving
