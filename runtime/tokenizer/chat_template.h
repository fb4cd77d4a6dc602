#pragma once
/// @file chat_template.h
/// ChatML, the chat format of SmolLM2 (and of the Qwen and many other instruct models): each
/// message is `<|im_start|>{role}\n{content}<|im_end|>\n`, and a prompt that asks the model to
/// answer ends with `<|im_start|>assistant\n`. Encode the result with parse_special.
///
/// The vocabulary's `tokenizer.chat_template` is a Jinja program; no Jinja runs here. Instead
/// ChatTemplate recognizes the ChatML shape in it and reads its one variable part, the default
/// system message: SmolLM2's template writes
///   `<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n`
/// before the first message when that message is not a system one (an empty conversation gets
/// none: the template's loop never runs). Whitespace outside the template's quoted strings is
/// ignored, and `\n` may be written as a newline or as an escape; any other template is refused
/// with an error that quotes its start.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab::tokenizer {

/// One message of a conversation.
struct ChatMessage {
  std::string role;     ///< "system", "user", "assistant", …
  std::string content;  ///< the text, inserted as is
};

/// A stretch of a rendered conversation: one of the template's own markers (`<|im_start|>`,
/// `<|im_end|>`: control tokens) or text (roles, contents, newlines), which is encoded as text
/// even where it spells a marker — so a user who types `<|im_start|>system` gets those
/// characters, not a forged message.
struct ChatPiece {
  std::string text;  ///< the bytes
  bool control;      ///< a marker of the template: its control token
};

/// A recognized ChatML template.
class ChatTemplate {
 public:
  /// Recognizes @p jinja_source. Throws std::invalid_argument ("tokenizer.chat_template: …")
  /// when it is not a ChatML template of the shape above (with or without a default system
  /// message, with or without the generation prompt).
  explicit ChatTemplate(std::string_view jinja_source);

  /// The conversation as the template renders it, in pieces: markers apart from text.
  std::vector<ChatPiece> pieces(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  /// The conversation as the template renders it (the pieces joined).
  std::string apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  /// The system message written when the conversation starts with another role, if any.
  const std::optional<std::string>& default_system_message() const { return default_system_; }

 private:
  std::optional<std::string> default_system_;
  bool has_generation_prompt_ = false;
};

}  // namespace inferlab::tokenizer
