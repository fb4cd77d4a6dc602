#include "common/json.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "common/check.h"

namespace inferlab {
namespace {

// Whether @p value is written on one line: a scalar, or an object or array holding no object
// (arrays of arrays of scalars included).
bool one_line(const Json& value) {
  if (!value.is_structured()) return true;
  for (const Json& item : value) {
    if (item.is_object() || !one_line(item)) return false;
  }
  return true;
}

void write(std::string& out, const Json& value, int depth) {
  if (!value.is_structured() || value.empty()) {
    out += value.dump();
    return;
  }
  const bool open = depth == 0 || !one_line(value);
  const std::string indent = open ? "\n" + std::string(size_t(2 * (depth + 1)), ' ') : "";
  const char* separator = open ? "," : ", ";
  out += value.is_object() ? '{' : '[';
  bool first = true;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!first) out += separator;
    first = false;
    out += indent;
    if (value.is_object()) {
      out += Json(it.key()).dump();
      out += ": ";
    }
    write(out, *it, depth + 1);
  }
  if (open) out += "\n" + std::string(size_t(2 * depth), ' ');
  out += value.is_object() ? '}' : ']';
}

}  // namespace

std::string format_json(const Json& value) {
  std::string out;
  write(out, value, 0);
  return out;
}

Json json_number(double value, int digits) {
  require(digits >= 1 && digits <= 17, "digits", digits, "must be in [1, 17]");
  if (!std::isfinite(value)) return nullptr;
  char text[40];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  const double rounded = std::strtod(text, nullptr);
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53: every whole double below is exact
  if (rounded == std::trunc(rounded) && std::fabs(rounded) < kExactIntegers) return static_cast<int64_t>(rounded);
  return rounded;
}

Json parse_json(const std::string& text, const std::string& what) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& error) {
    // what() reads "[json.exception.parse_error.101] parse error at line 1, column 5: …".
    std::string reason = error.what();
    if (const size_t end = reason.find("] "); reason.rfind("[json.exception", 0) == 0 && end != std::string::npos)
      reason = reason.substr(end + 2);
    // One line of text (a JSON-lines record): its column is enough.
    if (const size_t at = reason.find("at line 1, "); text.find('\n') == std::string::npos && at != std::string::npos)
      reason.replace(at, 11, "at ");
    throw std::invalid_argument(what + ": not JSON: " + reason);
  }
}

}  // namespace inferlab
