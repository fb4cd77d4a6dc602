// Exercise 4.1 — quantize a row with its scale. See ch04.h for the task.
#include <algorithm>
#include <cmath>
#include <string>

#include "04-int8-kv-cache/ch04.h"
#include "common/check.h"

namespace inferlab::student {

int64_t quantize_int8(std::span<const float> row, float scale, std::span<int8_t> out) {
  require(out.size() == row.size(), "out.size()", out.size(), "must equal row.size() = " + std::to_string(row.size()));
  throw NotImplemented("quantize_int8");  // TODO(student): delete this line once the function is written
  // TODO(student): refuse a non-finite row[i] first (require(std::isfinite(row[i]), "row[" + … + "]",
  // row[i], "…"), before writing anything); then for each element r = round(x / scale) (0 when
  // scale is 0), count |r| > 127, out[i] = clamp(r, −127, 127) — clamped in float, then cast.
  // Return the count. (roughly 8 lines)
  (void)scale;
  return 0;
}

float quantize_row_int8(std::span<const float> row, std::span<int8_t> out) {
  require(out.size() == row.size(), "out.size()", out.size(), "must equal row.size() = " + std::to_string(row.size()));
  throw NotImplemented("quantize_row_int8");  // TODO(student): delete this line once the function is written
  // TODO(student): refuse a non-finite element (as above); Δ = max|x| / 127.0f; quantize_int8(row,
  // Δ, out); return Δ. (roughly 4 lines)
  return 0.0f;
}

}  // namespace inferlab::student
