#include "analysis/units.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace inferlab::analysis {

std::string format_number(double value, int significant) {
  if (value == 0.0 || !std::isfinite(value)) return std::isfinite(value) ? "0" : "inf";
  const int integer_digits = static_cast<int>(std::floor(std::log10(std::fabs(value)))) + 1;
  const int decimals = std::max(0, significant - integer_digits);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

namespace {

std::string scaled(double value, double base, const char* const* prefixes, int count, std::string_view unit) {
  int index = 0;
  while (index + 1 < count && std::fabs(value) >= base) {
    value /= base;
    ++index;
  }
  // 999.96 rounds to "1000": move up one prefix instead.
  if (index + 1 < count && std::fabs(value) >= base - 0.05) {
    value /= base;
    ++index;
  }
  return format_number(value) + " " + prefixes[index] + std::string(unit);
}

}  // namespace

std::string format_binary_bytes(double bytes) {
  static const char* const prefixes[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi"};
  return scaled(bytes, 1024.0, prefixes, 6, "B");
}

std::string format_si(double value, std::string_view unit) {
  static const char* const prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  return scaled(value, 1000.0, prefixes, 7, unit);
}

std::string format_seconds(double seconds) {
  if (seconds >= 1.0) return format_number(seconds) + " s";
  if (seconds >= 1e-3) return format_number(seconds * 1e3) + " ms";
  return format_number(seconds * 1e6) + " us";
}

int64_t parse_token_count(const std::string& name, const std::string& text) {
  const auto bad = [&]() {
    return std::invalid_argument(name + " = " + text +
                                 ": must be a token count (an integer, or with k = 1024 tokens: 32k = 32768)");
  };
  std::string number = text;
  double scale = 1.0;
  if (!number.empty() && (number.back() == 'k' || number.back() == 'K')) {
    number.pop_back();
    scale = 1024.0;
  }
  if (number.empty() || number.find_first_not_of("0123456789.-+") != std::string::npos) throw bad();
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(number, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  if (used != number.size() || (scale == 1.0 && number.find('.') != std::string::npos)) throw bad();
  const double tokens = value * scale;
  if (!std::isfinite(tokens) || std::fabs(tokens) > 9.0e15 || tokens != std::floor(tokens)) throw bad();
  return static_cast<int64_t>(tokens);
}

std::string format_count(double value) {
  const long long n = std::llround(value);
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string grouped;
  if (n < 0) grouped.push_back('-');
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped.push_back(',');
    grouped.push_back(digits[i]);
  }
  return grouped;
}

}  // namespace inferlab::analysis
