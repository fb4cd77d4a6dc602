#include "tools/cli/streamed_reply.h"

#include <unistd.h>

#include <iostream>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace inferlab::cli {

StreamedReply stream_reply(engine::Engine& engine, engine::Request request, TextStream& text,
                           volatile std::sig_atomic_t* interrupted) {
  if (!engine.empty()) throw std::logic_error("stream_reply: the engine is already serving another request");
  const int64_t id = engine.add_request(std::move(request));
  bool left = false, aborted = false;
  while (!left) {
    if (interrupted != nullptr && *interrupted != 0 && !aborted) {
      *interrupted = 0;
      aborted = engine.abort(id);
    }
    const engine::StepOutput step = engine.step();
    for (const engine::RequestDelta& delta : step.deltas) {
      if (delta.id != id) continue;
      text.push(delta.new_tokens);
      left = left || delta.finish.has_value();
    }
    if (!step.more) break;  // the engine is empty: the request has left
  }
  text.finish();
  StreamedReply reply;
  for (engine::RequestOutput& out : engine.take_outputs())
    if (out.id == id) reply.output = std::move(out);
  const engine::RequestMetrics& m = reply.output.metrics;
  reply.prompt_tokens = int64_t(reply.output.prompt.size());
  reply.reused_tokens = m.cached_prompt_tokens;
  reply.prefill_seconds = m.first_token < 0 ? -1.0 : m.first_token - m.first_scheduled;
  reply.decode_seconds = m.first_token < 0 ? -1.0 : m.finish - m.first_token;
  reply.spec_drafts = engine.stats().spec_drafts;
  reply.spec_draft_tokens = engine.stats().spec_draft_tokens;
  reply.spec_accepted_tokens = engine.stats().spec_accepted_tokens;
  return reply;
}

namespace {

// "310 tok/s", or "-" when there is no time or nothing to count.
std::string rate(int64_t tokens, double seconds) {
  if (tokens <= 0 || !(seconds > 0)) return "-";
  std::ostringstream s;
  s.precision(0);
  s << std::fixed << double(tokens) / seconds << " tok/s";
  return s.str();
}

}  // namespace

std::string summary_line(const StreamedReply& reply) {
  const int64_t generated = int64_t(reply.output.tokens.size());
  std::ostringstream s;
  s << "[" << reply.prompt_tokens << " prompt tokens, " << reply.reused_tokens << " reused from the prefix cache, "
    << generated << " generated (" << engine::to_string(reply.output.reason) << "); prefill "
    << rate(reply.prompt_tokens - reply.reused_tokens, reply.prefill_seconds) << ", decode "
    << rate(generated - 1, reply.decode_seconds);
  if (reply.spec_drafts > 0) {  // speculative decoding: how much of the guessing paid
    s.precision(2);
    s << std::fixed << "; speculative: " << reply.spec_accepted_tokens << " of " << reply.spec_draft_tokens
      << " guesses accepted (" << 100.0 * double(reply.spec_accepted_tokens) / double(reply.spec_draft_tokens)
      << "%), mean accepted length "
      << double(reply.spec_accepted_tokens + reply.spec_drafts) / double(reply.spec_drafts)
      << " tokens per verification step";
  }
  s << "]";
  return s.str();
}

void print_summary(const StreamedReply& reply) {
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  std::cerr << (terminal ? "\033[2m" : "") << summary_line(reply) << (terminal ? "\033[0m" : "") << "\n";
}

}  // namespace inferlab::cli
