#pragma once
/// @file utf8.h
/// UTF-8 as the tokenizer needs it: one character at a time, with the Unicode rule for what is
/// well-formed (Table 3-7 of the standard: no overlong forms, no surrogates, nothing past
/// U+10FFFF) and for how much of a broken sequence counts as one error (its "maximal subpart",
/// the longest prefix of a well-formed sequence — what Python's `errors="replace"` and Rust's
/// `String::from_utf8_lossy` each turn into one U+FFFD).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace inferlab::tokenizer {

/// What decoding one character found.
enum class Utf8Status : uint8_t {
  ok,         ///< a well-formed character of @ref Utf8Char::length bytes
  invalid,    ///< bytes that cannot be (part of) a character: a stray continuation byte, a byte
              ///< never used (C0, C1, F5–FF), or a lead byte whose next byte does not fit
  truncated,  ///< a well-formed start cut off by the end of the text (more bytes could complete it)
};

/// One character decoded from UTF-8.
struct Utf8Char {
  char32_t code_point = 0;             ///< the character (U+FFFD unless status is ok)
  uint8_t length = 1;                  ///< bytes taken: the character, or the maximal subpart (1–3)
  Utf8Status status = Utf8Status::ok;  ///< ok, invalid or truncated
};

/// Decodes the character that starts at byte @p pos of @p text (pos < text.size()).
Utf8Char decode_utf8(std::string_view text, size_t pos);

/// Whether @p text is well-formed UTF-8 throughout.
bool is_valid_utf8(std::string_view text);

/// @p text with each maximal subpart of a broken sequence (truncated ones included) replaced by
/// U+FFFD; well-formed text comes back unchanged.
std::string to_valid_utf8(std::string_view text);

/// Appends @p code_point (≤ U+10FFFF, not a surrogate) to @p out as UTF-8.
void append_utf8(std::string& out, char32_t code_point);

}  // namespace inferlab::tokenizer
