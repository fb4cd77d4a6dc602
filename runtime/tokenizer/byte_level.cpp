#include "runtime/tokenizer/byte_level.h"

#include <array>

#include "runtime/tokenizer/utf8.h"

namespace inferlab::tokenizer {
namespace {

bool maps_to_itself(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

constexpr char32_t kLastSymbol = 0x143;  // U+0100 + 67

struct ByteMap {
  std::array<char32_t, 256> symbol{};
  std::array<int16_t, kLastSymbol + 1> byte_of{};  // −1: not a symbol
  ByteMap() {
    byte_of.fill(-1);
    char32_t next_shifted = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      symbol[byte] = maps_to_itself(byte) ? char32_t(byte) : next_shifted++;
      byte_of[symbol[byte]] = int16_t(byte);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

char32_t byte_to_symbol(uint8_t byte) {
  return byte_map().symbol[byte];
}

std::optional<uint8_t> symbol_to_byte(char32_t symbol) {
  if (symbol > kLastSymbol || byte_map().byte_of[symbol] < 0) return std::nullopt;
  return uint8_t(byte_map().byte_of[symbol]);
}

std::string bytes_to_symbols(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char byte : bytes) append_utf8(out, byte_to_symbol(uint8_t(byte)));
  return out;
}

std::string symbols_to_bytes(std::string_view symbols) {
  std::string out;
  out.reserve(symbols.size());
  for (size_t pos = 0; pos < symbols.size();) {
    const Utf8Char c = decode_utf8(symbols, pos);
    const auto byte = c.status == Utf8Status::ok ? symbol_to_byte(c.code_point) : std::nullopt;
    if (byte) {
      out += char(*byte);
    } else {
      out.append(symbols.substr(pos, c.length));
    }
    pos += c.length;
  }
  return out;
}

}  // namespace inferlab::tokenizer
