#pragma once
/// @file streamed_reply.h
/// One request through a serving engine (runtime/engine/engine.h), its text streamed as the
/// engine's steps produce it — the loop of `inferlab generate --prompt` and of each turn of
/// `inferlab chat` — and the one-line summary both print after it.
///
/// The engine is the caller's and may live long: `chat` keeps one for the whole conversation, so
/// each turn's prompt finds the earlier turns' blocks in its prefix cache (EngineConfig::
/// prefix_caching) and computes only the new tokens.

#include <csignal>
#include <cstdint>
#include <string>

#include "runtime/engine/engine.h"
#include "runtime/engine/request.h"
#include "tools/cli/text_stream.h"

namespace inferlab::cli {

/// What one streamed request did.
struct StreamedReply {
  engine::RequestOutput output;  ///< the engine's output: every generated token (a stop id included), why it ended
  int64_t prompt_tokens = 0;     ///< the prompt's tokens
  int64_t reused_tokens = 0;     ///< of those, the ones served by the prefix cache (not computed)
  double prefill_seconds = 0;    ///< engine time from the first step that ran it to its first token (−1: none)
  double decode_seconds = 0;     ///< engine time from its first token to its end (−1: no token)
  /// Speculative decoding (the engine's counters: it ran this request alone): verification steps,
  /// guesses verified, guesses accepted.
  int64_t spec_drafts = 0, spec_draft_tokens = 0, spec_accepted_tokens = 0;
};

/// (summary_line() adds, when the engine speculated, the guesses accepted and the mean tokens
/// per verification step.)
///
/// Adds @p request to @p engine, which must hold no other request (its steps run this one only),
/// and steps it until the request leaves, pushing each step's new tokens into @p text. Before
/// every step, when @p interrupted is set and nonzero (a SIGINT handler's flag), the request is
/// aborted (Engine::abort(): FinishReason::aborted, with the tokens so far) and the flag is
/// cleared. Calls text.finish() at the end. Throws std::invalid_argument as
/// Engine::add_request() does (an empty prompt, one too long for the engine, …).
StreamedReply stream_reply(engine::Engine& engine, engine::Request request, TextStream& text,
                           volatile std::sig_atomic_t* interrupted = nullptr);

/// The summary line of @p reply, in brackets: "[37 prompt tokens, 32 reused from the prefix
/// cache, 8 generated (stop); prefill 310 tok/s, decode 95 tok/s]" — the prompt tokens that ran
/// over the prefill time, the generated tokens after the first over the decode time; a rate that
/// could not be measured prints as "-".
std::string summary_line(const StreamedReply& reply);

/// Writes summary_line(@p reply) and a newline to stderr (dim when stderr is a terminal), so that
/// stdout holds the generated text only.
void print_summary(const StreamedReply& reply);

}  // namespace inferlab::cli
