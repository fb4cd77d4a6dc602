#include "runtime/tokenizer/chat_template.h"

#include <stdexcept>

namespace inferlab::tokenizer {
namespace {

// The template without the whitespace outside its single-quoted strings, and with the escape
// \n inside them written as a newline: the form the shapes below are written in.
std::string squeeze(std::string_view source) {
  std::string out;
  bool quoted = false;
  for (size_t i = 0; i < source.size(); ++i) {
    const char c = source[i];
    if (c == '\'') quoted = !quoted;
    if (!quoted && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) continue;
    if (quoted && c == '\\' && i + 1 < source.size() && source[i + 1] == 'n') {
      out += '\n';
      ++i;
      continue;
    }
    out += c;
  }
  return out;
}

// The parts of a ChatML template, squeezed.
constexpr std::string_view kLoop = "{%formessageinmessages%}";
constexpr std::string_view kSystemOpen = "{%ifloop.firstandmessages[0]['role']!='system'%}{{'<|im_start|>system\n";
constexpr std::string_view kSystemClose = "<|im_end|>\n'}}{%endif%}";
constexpr std::string_view kMessage =
    "{{'<|im_start|>'+message['role']+'\n'+message['content']+'<|im_end|>'+'\n'}}{%endfor%}";
constexpr std::string_view kGenerationPrompt = "{%ifadd_generation_prompt%}{{'<|im_start|>assistant\n'}}{%endif%}";

bool consume(std::string_view& text, std::string_view prefix) {
  if (text.substr(0, prefix.size()) != prefix) return false;
  text.remove_prefix(prefix.size());
  return true;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string_view jinja_source) {
  const std::string squeezed = squeeze(jinja_source);
  std::string_view rest = squeezed;
  bool ok = consume(rest, kLoop);
  if (ok && consume(rest, kSystemOpen)) {
    const size_t end = rest.find(kSystemClose);
    ok = end != std::string_view::npos && rest.substr(0, end).find('\'') == std::string_view::npos;
    if (ok) {
      default_system_ = std::string(rest.substr(0, end));
      rest.remove_prefix(end + kSystemClose.size());
    }
  }
  ok = ok && consume(rest, kMessage);
  if (ok) has_generation_prompt_ = consume(rest, kGenerationPrompt);
  if (!ok || !rest.empty()) {
    const std::string_view start = jinja_source.substr(0, 80);
    throw std::invalid_argument("tokenizer.chat_template = \"" + std::string(start) +
                                (jinja_source.size() > start.size() ? "…" : "") +
                                "\": not a ChatML template of the shape this tokenizer renders (chat_template.h)");
  }
}

std::vector<ChatPiece> ChatTemplate::pieces(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  std::vector<ChatPiece> out;
  const auto message = [&](const std::string& role, const std::string& content) {
    out.push_back({"<|im_start|>", true});
    out.push_back({role + "\n", false});
    out.push_back({content, false});
    out.push_back({"<|im_end|>", true});
    out.push_back({"\n", false});
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0 && default_system_ && messages[0].role != "system") message("system", *default_system_);
    message(messages[i].role, messages[i].content);
  }
  if (add_generation_prompt && has_generation_prompt_) {
    out.push_back({"<|im_start|>", true});
    out.push_back({"assistant\n", false});
  }
  return out;
}

std::string ChatTemplate::apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  std::string out;
  for (const ChatPiece& piece : pieces(messages, add_generation_prompt)) out += piece.text;
  return out;
}

}  // namespace inferlab::tokenizer
