#pragma once
/// @file pretokenizer.h
/// The `smollm` pre-tokenizer: it cuts text into pieces ("pre-tokens") that BPE then encodes one
/// at a time, so no token ever spans two pieces. Two passes, the second splitting the pieces of
/// the first:
///
///   1. every numeric character alone (Unicode category N: Nd, Nl, No — Hugging Face's
///      `Digits(individual_digits=True)` tests Rust's char::is_numeric, llama.cpp the regex
///      `\p{N}`): "x=2024" → "x=", "2", "0", "2", "4";
///   2. the GPT-2 pattern, matched leftmost-first at each position:
///      `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
///      — an English contraction, an optional space (U+0020 only) and a run of letters, of digits
///      or of other characters, or a whitespace run that gives up its last character to the word
///      after it ("a   b" → "a", "  ", " b"; a run at the end of a piece stays whole).
///
/// The classes are Unicode's as ICU 72 (Unicode 15.0) reports them: `\p{L}` = general category L
/// (Lu Ll Lt Lm Lo), `\p{N}` = category N, `\s` = the White_Space property (u_isUWhiteSpace: what
/// Oniguruma — the regex engine of Hugging Face's default build, not the Rust `regex` crate —
/// means by `\s`; not Python's str.isspace, which adds U+001C–U+001F). Pass 2 runs on each piece
/// of pass 1 alone, so a piece's end is the end of the text for `(?!\S)`. A character assigned
/// after Unicode 15.0 is unassigned (`other`) here; Hugging Face's Unicode may be newer (its digit
/// pass asks Rust's char::is_numeric, Unicode 16 in current Rust: the Ol Onal digit U+1E5F4 is a
/// number there).
///
/// Invalid UTF-8 (the rule of this implementation; Hugging Face takes only valid Unicode text):
/// each maximal subpart of a broken sequence (utf8.h) is one character of class `other`, so its
/// bytes join a run of punctuation and reach BPE unchanged — encode then decode gives the bytes
/// back, but for bytes the vocabulary has no token for (bpe_tokenizer.h, step 3: SmolLM2 lacks
/// C0, C1 and F5–FF, bytes that never occur in UTF-8).
///
/// Cost: one pass over the characters for each rule, O(text bytes); one ICU lookup per non-ASCII
/// character.

#include <cstdint>
#include <string_view>
#include <vector>

namespace inferlab::tokenizer {

/// The character classes the pattern tells apart.
enum class CharClass : uint8_t {
  letter,      ///< `\p{L}`: general category L
  number,      ///< `\p{N}`: general category N
  whitespace,  ///< `\s`: the White_Space property
  other,       ///< everything else (punctuation, symbols, emoji, controls, broken UTF-8)
};

/// The class of @p code_point.
CharClass char_class(char32_t code_point);

/// Pass 2 alone: @p text cut by the GPT-2 pattern. The pieces view @p text, cover it and are
/// appended to @p pieces in order.
void split_gpt2(std::string_view text, std::vector<std::string_view>& pieces);

/// Both passes: @p text (no special tokens: those are cut out before) cut into the pieces BPE
/// encodes, viewing @p text, in order, covering it. Empty text gives no piece.
std::vector<std::string_view> pretokenize_smollm(std::string_view text);

}  // namespace inferlab::tokenizer
