#pragma once
/// @file openai_response.h
/// The JSON objects `inferlab serve` answers with (chapter 09), as the OpenAI API defines them:
/// a whole completion (`chat.completion`, `text_completion`), one streamed chunk
/// (`chat.completion.chunk`; a streamed text completion's chunks are `text_completion` objects
/// too) and the usage chunk of `stream_options.include_usage` (no choices, only usage).

#include <cstdint>
#include <optional>
#include <string>

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

/// `{"prompt_tokens", "completion_tokens", "total_tokens"}`.
Json usage_json(const Usage& usage);

/// "stop" or "length"; "abort" for an aborted request (vLLM's word; not sent to a client that
/// is still there, the server answers a shutdown with an error instead).
std::string finish_reason_name(engine::FinishReason reason);

/// The whole answer: chat `{id, object: "chat.completion", created, model, choices: [{index,
/// message: {role: "assistant", content}, finish_reason}], usage}`, or completions' with
/// `choices: [{index, text, logprobs: null, finish_reason}]`.
Json completion_json(const ResponseHeader& header, const std::string& text, engine::FinishReason reason,
                     const Usage& usage);

/// One streamed chunk with one choice: chat's `delta` holds @p role and @p text when given
/// (the first chunk carries the role), completions' `text` is @p text (or ""); finish_reason is
/// @p finish's name or null.
Json chunk_json(const ResponseHeader& header, const std::optional<std::string>& role,
                const std::optional<std::string>& text, std::optional<engine::FinishReason> finish);

/// The usage chunk: `choices: []` and usage.
Json usage_chunk_json(const ResponseHeader& header, const Usage& usage);

}  // namespace inferlab::serving
