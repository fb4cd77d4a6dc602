// Exercise 4.1 — quantize a row with its scale: a straightforward answer. See
// exercises/04-int8-kv-cache/ch04.h.
#include <algorithm>
#include <cmath>
#include <string>

#include "04-int8-kv-cache/ch04.h"
#include "common/check.h"

namespace inferlab::student {

namespace {

// Throws std::invalid_argument naming the first non-finite element of @p row.
void require_finite(std::span<const float> row) {
  for (size_t i = 0; i < row.size(); ++i)
    require(std::isfinite(row[i]), "row[" + std::to_string(i) + "]", row[i], "must be finite to be quantized");
}

}  // namespace

int64_t quantize_int8(std::span<const float> row, float scale, std::span<int8_t> out) {
  require(out.size() == row.size(), "out.size()", out.size(), "must equal row.size() = " + std::to_string(row.size()));
  require_finite(row);  // before anything is written
  int64_t clamped = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    const float r = scale == 0.0f ? 0.0f : std::round(row[i] / scale);
    clamped += std::fabs(r) > 127.0f;
    out[i] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));  // clamp in float: never wrap
  }
  return clamped;
}

float quantize_row_int8(std::span<const float> row, std::span<int8_t> out) {
  require(out.size() == row.size(), "out.size()", out.size(), "must equal row.size() = " + std::to_string(row.size()));
  require_finite(row);  // a NaN would vanish from the max (fmax ignores it) and be stored as garbage
  float max_abs = 0.0f;
  for (const float x : row) max_abs = std::max(max_abs, std::fabs(x));
  const float scale = max_abs / 127.0f;
  quantize_int8(row, scale, out);
  return scale;
}

}  // namespace inferlab::student
