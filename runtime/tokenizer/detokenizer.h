#pragma once
/// @file detokenizer.h
/// Streaming detokenization: a generated token's bytes may end inside a UTF-8 character (an
/// emoji or a rare CJK character is often several byte-level tokens), so printing each token's
/// bytes as they come can show broken characters. IncrementalDetokenizer holds back the bytes of
/// an unfinished character until the token that completes it arrives.
///
/// Every piece it returns is valid UTF-8: a byte sequence that can no longer become a character
/// (a model may generate any ids) comes out as U+FFFD, one per maximal subpart (utf8.h), as
/// Python's `errors="replace"` does. So the pieces, concatenated, equal
/// to_valid_utf8(decode(ids)) — decode(ids) itself whenever that is valid UTF-8.
///
/// Cost: each push is O(bytes of the token + the ≤ 3 held back).

#include <cstdint>
#include <string>

#include "runtime/tokenizer/bpe_tokenizer.h"

namespace inferlab::tokenizer {

/// Turns ids, one at a time, into the text that is complete so far.
class IncrementalDetokenizer {
 public:
  /// Decodes with @p tokenizer, which must outlive this object.
  explicit IncrementalDetokenizer(const BpeTokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  /// Adds token @p id; returns the text completed by it (possibly empty: an unfinished
  /// character). Throws std::invalid_argument naming an id out of range (nothing is added).
  std::string push(int32_t id);
  /// The end of the stream: what is held back (an unfinished character, as U+FFFD), then empty.
  std::string flush();
  /// The bytes held back (0–3), for tests and for a caller that wants to know.
  const std::string& pending() const { return pending_; }

 private:
  const BpeTokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace inferlab::tokenizer
