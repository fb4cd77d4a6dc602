#pragma once
/// @file sse.h
/// Server-sent events as the OpenAI API streams them (`inferlab serve`, chapter 09): each event
/// is one line `data: <JSON>` and a blank line; the stream ends with `data: [DONE]`. The JSON is
/// written on one line by nlohmann-json, which escapes every newline inside a string, so no event
/// can be cut short by the text it carries.

#include <string>

#include "common/json.h"

namespace inferlab::serving {

/// `data: <value as one line of JSON>\n\n`. Invalid UTF-8 in a string (none should reach here:
/// the detokenizer writes whole characters) becomes U+FFFD rather than an exception.
std::string sse_event(const Json& value);

/// `data: [DONE]\n\n`: the end of an OpenAI stream.
std::string sse_done();

/// The `Content-Type` of a stream of events: `text/event-stream`.
inline constexpr const char* kSseContentType = "text/event-stream";

}  // namespace inferlab::serving
