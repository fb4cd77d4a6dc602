#include "runtime/tokenizer/pretokenizer.h"

#include <unicode/uchar.h>

#include <array>

#include "runtime/tokenizer/utf8.h"

namespace inferlab::tokenizer {
namespace {

// One decoded character: where it is in the text, its class, and the code point (for the
// contractions and the optional U+0020 of the pattern).
struct Char {
  size_t offset;
  uint8_t length;
  CharClass cls;
  char32_t code_point;
};

CharClass icu_class(char32_t code_point) {
  const auto c = static_cast<UChar32>(code_point);
  if (u_isUWhiteSpace(c)) return CharClass::whitespace;
  const uint32_t mask = U_GET_GC_MASK(c);
  if (mask & U_GC_L_MASK) return CharClass::letter;
  if (mask & U_GC_N_MASK) return CharClass::number;
  return CharClass::other;
}

// ASCII, the common case, from a table instead of ICU.
const std::array<CharClass, 128>& ascii_classes() {
  static const auto table = [] {
    std::array<CharClass, 128> t{};
    for (char32_t c = 0; c < 128; ++c) t[c] = icu_class(c);
    return t;
  }();
  return table;
}

std::vector<Char> decode_chars(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    const CharClass cls = c.status == Utf8Status::ok ? char_class(c.code_point) : CharClass::other;
    chars.push_back({pos, c.length, cls, c.status == Utf8Status::ok ? c.code_point : 0xFFFD});
    pos += c.length;
  }
  return chars;
}

// The length in characters of a contraction ('s 't 're 've 'm 'll 'd) at chars[i], or 0.
size_t contraction_at(const std::vector<Char>& chars, size_t i, size_t end) {
  if (chars[i].code_point != U'\'' || i + 1 >= end) return 0;
  const char32_t a = chars[i + 1].code_point;
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  if (i + 2 >= end) return 0;
  const char32_t b = chars[i + 2].code_point;
  if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
  return 0;
}

// The GPT-2 pattern over chars[begin, end): appends each match's bytes to pieces.
void split_gpt2_chars(std::string_view text, const std::vector<Char>& chars, size_t begin, size_t end,
                      std::vector<std::string_view>& pieces) {
  const auto emit = [&](size_t first, size_t last) {  // characters [first, last)
    const size_t from = chars[first].offset;
    const size_t to = chars[last - 1].offset + chars[last - 1].length;
    pieces.push_back(text.substr(from, to - from));
  };
  size_t i = begin;
  while (i < end) {
    if (const size_t n = contraction_at(chars, i, end)) {
      emit(i, i + n);
      i += n;
      continue;
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional U+0020, then a run of one class.
    const size_t run_start = (chars[i].code_point == U' ' && i + 1 < end) ? i + 1 : i;
    const CharClass cls = chars[run_start].cls;
    if (cls != CharClass::whitespace) {
      size_t j = run_start + 1;
      while (j < end && chars[j].cls == cls) ++j;
      emit(i, j);
      i = j;
      continue;
    }
    // Whitespace at i (and at run_start): `\s+(?!\S)` takes the run, less its last character when
    // a non-space follows; a single whitespace character before a non-space is `\s+`'s.
    size_t j = i + 1;
    while (j < end && chars[j].cls == CharClass::whitespace) ++j;
    if (j < end && j - i >= 2) --j;
    emit(i, j);
    i = j;
  }
}

}  // namespace

CharClass char_class(char32_t code_point) {
  if (code_point < 128) return ascii_classes()[code_point];
  return icu_class(code_point);
}

void split_gpt2(std::string_view text, std::vector<std::string_view>& pieces) {
  const std::vector<Char> chars = decode_chars(text);
  split_gpt2_chars(text, chars, 0, chars.size(), pieces);
}

std::vector<std::string_view> pretokenize_smollm(std::string_view text) {
  const std::vector<Char> chars = decode_chars(text);
  std::vector<std::string_view> pieces;
  // Pass 1: each number character is a piece of its own; pass 2 cuts the stretches between them.
  size_t start = 0;
  for (size_t i = 0; i < chars.size(); ++i) {
    if (chars[i].cls != CharClass::number) continue;
    split_gpt2_chars(text, chars, start, i, pieces);
    split_gpt2_chars(text, chars, i, i + 1, pieces);
    start = i + 1;
  }
  split_gpt2_chars(text, chars, start, chars.size(), pieces);
  return pieces;
}

}  // namespace inferlab::tokenizer
