#pragma once
/// @file units.h
/// Number formatting for the calculator's reports. Two conventions, as in the lesson: KV-cache
/// sizes in binary units (16 KiB per token per layer, 1 GiB per sequence), traffic and weights in
/// decimal units (GB), because bandwidths are quoted in GB/s = 10^9 bytes/s.

#include <cstdint>
#include <string>
#include <string_view>

namespace inferlab::analysis {

/// @p bytes in binary units with 4 significant digits: "16.00 KiB", "32.00 MiB", "1.000 GiB".
std::string format_binary_bytes(double bytes);
/// @p value with a decimal prefix (k, M, G, T, P) and 4 significant digits: "13.21 GB", "27.13 TFLOP".
std::string format_si(double value, std::string_view unit);
/// A duration: "9.213 ms", "86.94 ms", "1.203 s", "42.10 us".
std::string format_seconds(double seconds);
/// @p value rounded to an integer with thousands separators: "25,205".
std::string format_count(double value);
/// @p value with @p significant significant digits and no exponent: "0.9932", "1893", "115.4".
std::string format_number(double value, int significant = 4);

/// A token count as a user writes it: an integer ("4096"), or with the suffix k or K meaning
/// 1024 tokens, as context lengths are quoted ("32k" = 32,768, "128K" = 131,072, "1.5k" = 1536;
/// the product must be a whole number). Throws std::invalid_argument naming @p name and @p text
/// ("context = 32x: must be a token count …") otherwise; the sign is checked by the caller.
int64_t parse_token_count(const std::string& name, const std::string& text);

}  // namespace inferlab::analysis
