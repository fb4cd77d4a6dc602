#include "runtime/tokenizer/utf8.h"

namespace inferlab::tokenizer {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

// The range the byte after a lead byte must fall in (Table 3-7): E0 excludes overlong forms,
// ED the surrogates, F0 overlong forms and F4 everything past U+10FFFF. Every later byte is
// 80–BF.
bool second_byte_fits(uint8_t lead, uint8_t byte) {
  switch (lead) {
    case 0xE0:
      return byte >= 0xA0 && byte <= 0xBF;
    case 0xED:
      return byte >= 0x80 && byte <= 0x9F;
    case 0xF0:
      return byte >= 0x90 && byte <= 0xBF;
    case 0xF4:
      return byte >= 0x80 && byte <= 0x8F;
    default:
      return byte >= 0x80 && byte <= 0xBF;
  }
}

}  // namespace

Utf8Char decode_utf8(std::string_view text, size_t pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  if (lead < 0x80) return {lead, 1, Utf8Status::ok};
  int length = 0;
  char32_t code_point = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code_point = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code_point = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code_point = lead & 0x07;
  } else {
    return {kReplacement, 1, Utf8Status::invalid};  // 80–BF alone, C0, C1, F5–FF
  }
  for (int k = 1; k < length; ++k) {
    if (pos + k >= text.size()) return {kReplacement, uint8_t(k), Utf8Status::truncated};
    const auto byte = static_cast<uint8_t>(text[pos + k]);
    const bool fits = k == 1 ? second_byte_fits(lead, byte) : (byte >= 0x80 && byte <= 0xBF);
    if (!fits) return {kReplacement, uint8_t(k), Utf8Status::invalid};  // the maximal subpart: bytes 0..k-1
    code_point = (code_point << 6) | (byte & 0x3F);
  }
  return {code_point, uint8_t(length), Utf8Status::ok};
}

bool is_valid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    if (c.status != Utf8Status::ok) return false;
    pos += c.length;
  }
  return true;
}

std::string to_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    if (c.status == Utf8Status::ok) {
      out.append(text.substr(pos, c.length));
    } else {
      append_utf8(out, kReplacement);
    }
    pos += c.length;
  }
  return out;
}

void append_utf8(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out += char(code_point);
  } else if (code_point < 0x800) {
    out += char(0xC0 | (code_point >> 6));
    out += char(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += char(0xE0 | (code_point >> 12));
    out += char(0x80 | ((code_point >> 6) & 0x3F));
    out += char(0x80 | (code_point & 0x3F));
  } else {
    out += char(0xF0 | (code_point >> 18));
    out += char(0x80 | ((code_point >> 12) & 0x3F));
    out += char(0x80 | ((code_point >> 6) & 0x3F));
    out += char(0x80 | (code_point & 0x3F));
  }
}

}  // namespace inferlab::tokenizer
