#pragma once
/// @file units.h
/// Number formatting for the calculator's reports. Two conventions, as in the lesson: KV-cache
/// sizes in binary units (16 KiB per token per layer, 1 GiB per sequence), traffic and weights in
/// decimal units (GB), because bandwidths are quoted in GB/s = 10^9 bytes/s.

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

}  // namespace inferlab::analysis
