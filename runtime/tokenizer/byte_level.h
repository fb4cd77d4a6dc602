#pragma once
/// @file byte_level.h
/// GPT-2's bytes → symbols map, the alphabet of a byte-level BPE vocabulary: every byte becomes
/// one printable character, so that any byte string is a string of vocabulary symbols and a
/// token's text never holds a space or a control character.
///
/// The 188 bytes 0x21–0x7E, 0xA1–0xAC and 0xAE–0xFF map to the code point of the same value; the
/// other 68 (0x00–0x20, 0x7F–0xA0, 0xAD), in increasing order, to U+0100, U+0101, … U+0143. So
/// a space (0x20, the 33rd of them) is U+0120 `Ġ` and a newline (0x0A) U+010A `Ċ`.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace inferlab::tokenizer {

/// The symbol that stands for @p byte.
char32_t byte_to_symbol(uint8_t byte);

/// The byte that @p symbol stands for, or nullopt when it is not one of the 256 symbols.
std::optional<uint8_t> symbol_to_byte(char32_t symbol);

/// @p bytes written as symbols (UTF-8 text of the symbols, one per byte): "a b" → "aĠb".
std::string bytes_to_symbols(std::string_view bytes);

/// The bytes that the symbols of @p symbols (UTF-8) stand for: "aĠb" → "a b". A character that
/// is not a symbol (a vocabulary may hold such tokens) stands for its own UTF-8 bytes, as is.
std::string symbols_to_bytes(std::string_view symbols);

}  // namespace inferlab::tokenizer
