#include "kernels/kv/quantize.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/check.h"
#include "common/half.h"
#include "kernels/kv/fp8_e4m3.h"

namespace inferlab {

namespace {
constexpr uint16_t kHalfMaxBits = 0x7BFF;  // 65504, the largest finite fp16
}  // namespace

uint16_t scale_to_fp16_up(float scale) {
  uint16_t bits = float_to_half_bits(scale);     // nearest (ties to even); may be below scale
  if (bits >= 0x7C00u) return kHalfMaxBits;      // past the largest finite fp16 (or Inf)
  if (half_bits_to_float(bits) < scale) ++bits;  // the next fp16 up (positive: the next bit pattern)
  return bits > kHalfMaxBits ? kHalfMaxBits : bits;
}

float int8_scale(float max_abs) {
  return max_abs / 127.0f;
}

int8_t quantize_int8(float x, float scale) {
  if (scale == 0.0f) return 0;
  // Round first, then clamp in float: a value past the range saturates at ±127 instead of
  // wrapping around through the int8 cast (128 → −128 would flip the sign).
  const float r = std::round(x / scale);
  return static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
}

float quantize_row_fp8(std::span<const float> row, std::span<uint8_t> codes, int64_t& saturated) {
  require(codes.size() == row.size(), "codes.size()", codes.size(), "must equal row.size() = " + std::to_string(row.size()));
  float max_abs = 0.0f;
  for (const float x : row) max_abs = std::max(max_abs, std::fabs(x));
  const float scale = max_abs / kFp8E4M3Max;
  for (size_t c = 0; c < row.size(); ++c) {
    const float y = scale == 0.0f ? 0.0f : row[c] / scale;  // an all-zero row: scale 0, codes 0
    if (std::fabs(y) > 464.0f) ++saturated;  // past the midpoint of 448 and the next step (480)
    codes[c] = float_to_fp8_e4m3(y);
  }
  return scale;
}

}  // namespace inferlab
