// CHEAT (caught by the inspection: references): quantizes with the reference quantizer of
// kernels/kv/quantize.h, declared weak so that `nm` listed it as 'w', not 'U' — the old check
// kept only 'U' lines. The decode kernel is the unmodified stub.
#include <algorithm>
#include <cmath>

#include "04-int8-kv-cache/ch04.h"

namespace inferlab {
int8_t quantize_int8(float x, float scale) __attribute__((weak));  // the reference's, kernels/kv/quantize.h
}  // namespace inferlab

namespace inferlab::student {

int64_t quantize_int8(std::span<const float> row, float scale, std::span<int8_t> out) {
  int64_t clamped = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    clamped += scale > 0.0f && std::fabs(std::round(row[i] / scale)) > 127.0f;
    out[i] = inferlab::quantize_int8(row[i], scale);
  }
  return clamped;
}

float quantize_row_int8(std::span<const float> row, std::span<int8_t> out) {
  float max_abs = 0.0f;
  for (const float x : row) max_abs = std::max(max_abs, std::fabs(x));
  quantize_int8(row, max_abs / 127.0f, out);
  return max_abs / 127.0f;
}

}  // namespace inferlab::student
