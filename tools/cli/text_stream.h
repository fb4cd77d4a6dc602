#pragma once
/// @file text_stream.h
/// Generated tokens as text on a terminal or a pipe, as they come (`inferlab generate --prompt`,
/// `inferlab chat`): each token goes through an IncrementalDetokenizer
/// (runtime/tokenizer/detokenizer.h), so what is written — and flushed after every token that
/// completed some text — is always whole UTF-8 characters, never the first bytes of one whose
/// last bytes are still to come. The ids in `hidden` (the stop ids: <|im_end|> ends a chat reply)
/// are not written.

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "runtime/tokenizer/bpe_tokenizer.h"
#include "runtime/tokenizer/detokenizer.h"

namespace inferlab::cli {

/// Writes tokens' text to a stream, whole characters at a time.
class TextStream {
 public:
  /// Writes to @p out with @p tokenizer's bytes (both must outlive this object); the tokens in
  /// @p hidden are skipped.
  TextStream(const tokenizer::BpeTokenizer& tokenizer, std::ostream& out, std::vector<int32_t> hidden);

  /// Adds @p tokens: writes the text they complete and flushes @p out when there is any.
  /// Throws std::invalid_argument naming an id outside the vocabulary.
  void push(std::span<const int32_t> tokens);
  /// The end of the stream: writes what is held back (an unfinished character, as U+FFFD) and
  /// flushes. Call once, after the last push.
  void finish();

  /// Everything written so far.
  const std::string& text() const { return text_; }

 private:
  tokenizer::IncrementalDetokenizer detokenizer_;
  std::ostream* out_;
  std::vector<int32_t> hidden_;
  std::string text_;
};

}  // namespace inferlab::cli
