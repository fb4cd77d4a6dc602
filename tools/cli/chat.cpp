// `inferlab chat` (chapter 08): a conversation with a GGUF model in the terminal. Each line read
// from stdin is a user message; the conversation so far is rendered with the model's chat
// template, and the reply streams out token by token through one long-lived serving engine whose
// prefix cache still holds the earlier turns, so each turn computes only its new tokens.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/ceil_div.h"
#include "common/check.h"
#include "runtime/engine/engine.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_files.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "tools/cli/command_line.h"
#include "tools/cli/commands.h"
#include "tools/cli/engine_options.h"
#include "tools/cli/interruptible_input.h"
#include "tools/cli/model_tokenizer.h"
#include "tools/cli/sampling_options.h"
#include "tools/cli/streamed_reply.h"
#include "tools/cli/text_stream.h"

namespace inferlab::cli {
namespace {

// What `inferlab chat` reads from its command line.
struct ChatOptions {
  std::string model;
  std::optional<std::string> system;
  std::optional<int64_t> max_seq_len;
  std::optional<WeightFormat> weights;
  SamplingOptions sampling;
};

// The option table of `inferlab chat`, bound to @p o: a reply is 256 tokens at most by default.
void add_chat_options(CLI::App& app, ChatOptions& o) {
  app.add_option("--model", o.model,
                 "smollm2 (models/SmolLM2-135M-Instruct.Q4_1.gguf, installed by ./inferlab setup) or another GGUF "
                 "file with a byte-level BPE tokenizer and a ChatML template")
      ->type_name("M")
      ->required();
  app.add_option("--system", o.system, "the system message")
      ->type_name("TEXT")
      ->default_str(
          "the template's own, if it has one — SmolLM2's \"You are a helpful AI assistant named SmolLM, "
          "trained by Hugging Face\"");
  app.add_option("--max-seq-len", o.max_seq_len,
                 "the longest conversation in tokens, reply included; the engine's KV pool holds that many")
      ->type_name("N")
      ->default_str("the model's, at most 4096");
  add_weights_option(app, o.weights);
  o.sampling.params.max_new_tokens = 256;
  add_sampling_options(app, o.sampling);
}

// One engine for the whole conversation: one sequence at a time, a pool that holds the longest
// conversation, prefix caching on (what makes the earlier turns free).
engine::EngineConfig chat_engine_config(const ChatOptions& o, const model::LlamaModel& m) {
  engine::EngineConfig c;
  c.max_seq_len = o.max_seq_len.value_or(std::min<int64_t>(m.config().max_seq_len, 4096));
  require(c.max_seq_len >= 1 && c.max_seq_len <= m.config().max_seq_len, "--max-seq-len", c.max_seq_len,
          "must be in [1, " + std::to_string(m.config().max_seq_len) + "] (the model's context)");
  c.max_num_seqs = 1;
  c.prefix_caching = true;
  c.num_blocks = ceil_div(c.max_seq_len, c.block_size);
  return c;
}

// The conversation: the system message (if any) and the turns so far.
class Conversation {
 public:
  explicit Conversation(std::vector<tokenizer::ChatMessage> start) : start_(std::move(start)), messages_(start_) {}
  void reset() { messages_ = start_; }
  void add(std::string role, std::string content) { messages_.push_back({std::move(role), std::move(content)}); }
  void drop_last() { messages_.pop_back(); }
  const std::vector<tokenizer::ChatMessage>& messages() const { return messages_; }

 private:
  std::vector<tokenizer::ChatMessage> start_;
  std::vector<tokenizer::ChatMessage> messages_;
};

// A line for the user on stderr, dim on a terminal (the replies alone go to stdout).
void note(const std::string& text) {
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  std::cerr << (terminal ? "\033[2m" : "") << text << (terminal ? "\033[0m" : "") << "\n";
}

}  // namespace

int chat(const std::vector<std::string>& argv) {
  ChatOptions o;
  const std::unique_ptr<CLI::App> app = command_app(
      "chat", "--model M",
      "An interactive chat: each line on stdin is your message; the reply streams out as it is generated, followed "
      "by a summary line on stderr (prompt tokens, how many were reused from the prefix cache, generated tokens, "
      "prefill and decode tokens/s). The whole conversation is the next prompt, rendered again with the model's "
      "chat template each turn; one engine serves every turn with prefix caching on, so the earlier turns' tokens "
      "are not computed again. A reply ends at the model's end-of-generation ids (SmolLM2: <|im_end|>, "
      "<|endoftext|>; not printed) or after --max-new-tokens. Reads a pipe as well as a terminal (\"> \" is shown "
      "only on a terminal).\n\nIn the chat: /reset clears the conversation (the system message stays), /quit exits "
      "(so do Ctrl-D and the end of piped input). Ctrl-C during a reply stops it: the partial reply is kept in the "
      "conversation, as shown; Ctrl-C at the prompt exits.");
  add_chat_options(*app, o);
  if (!parse_command_line(*app, argv)) return 0;
  const std::string path = model::resolve_model_path(o.model);
  const tokenizer::BpeTokenizer tokenizer = model_tokenizer(path, "--model");
  const engine::SamplingParams sampling = sampling_params(o.sampling, tokenizer.end_of_generation_ids());
  std::vector<tokenizer::ChatMessage> start;
  if (o.system) start.push_back({"system", *o.system});
  Conversation conversation(std::move(start));
  tokenizer.apply_chat_template(conversation.messages(), true);  // a template we cannot render fails now
  const model::LlamaModel m(model::load_model(path, o.weights));
  engine::Engine engine(m, chat_engine_config(o, m));

  const bool terminal = ::isatty(STDIN_FILENO) != 0;
  if (terminal)
    note("chat with " + path + ": /reset clears the conversation, /quit or Ctrl-D exits, Ctrl-C stops a reply");
  catch_sigint();  // from here on Ctrl-C stops a reply, or at the prompt ends the chat
  InterruptibleLines input(STDIN_FILENO);
  while (true) {
    if (terminal) std::cout << "> " << std::flush;
    std::string line;
    // A Ctrl-C that came after the last reply ended counts as one at the prompt.
    if (input.next(line) != InterruptibleLines::Result::line) {
      if (terminal) std::cout << "\n";
      return 0;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file with CRLF line ends
    if (line.empty()) continue;
    if (line == "/quit") return 0;
    if (line == "/reset") {
      conversation.reset();
      note("[conversation cleared]");
      continue;
    }
    if (line[0] == '/') {
      note("[unknown command " + line + ": /reset clears the conversation, /quit exits]");
      continue;
    }
    conversation.add("user", line);
    engine::Request request;
    request.prompt = tokenizer.encode_chat(conversation.messages(), true);
    request.sampling = sampling;
    const int64_t needed = int64_t(request.prompt.size()) + sampling.max_new_tokens;
    if (needed > engine.config().max_seq_len) {
      conversation.drop_last();
      note("[the conversation would reach " + std::to_string(needed) + " tokens with the reply, over --max-seq-len " +
           std::to_string(engine.config().max_seq_len) + ": /reset starts a new one]");
      continue;
    }
    TextStream text(tokenizer, std::cout, sampling.stop_ids);
    const StreamedReply reply = stream_reply(engine, std::move(request), text, &sigint_flag());
    std::cout << "\n" << std::flush;
    conversation.add("assistant", text.text());  // what was shown, an interrupted reply too
    print_summary(reply);
  }
}

}  // namespace inferlab::cli
