// Wrong chapter-04 FP8 implementations, run through the very checks the real FP8 code passes
// (tests/support/fp8_check.h): each mistake must be rejected, and the same code without the
// mistake must pass.
//   - an encoder that truncates the mantissa instead of rounding to nearest even;
//   - a row quantizer whose scale is max|x|/127 (INT8's) instead of max|x|/448;
//   - a decode that reads the codes with exponent bias 8 instead of 7 (every value halved).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <vector>

#include "kernels/kv/fp8_e4m3.h"
#include "tests/support/fp8_check.h"
#include "tests/support/scalar_decode.h"

namespace inferlab {
namespace {

// float_to_fp8_e4m3 with the mantissa truncated (round toward zero) when @p truncate.
uint8_t encode(float x, bool truncate) {
  if (!truncate || std::isnan(x) || std::fabs(x) >= kFp8E4M3Max) return float_to_fp8_e4m3(x);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a < 0x1p-6f) return sign | uint8_t(std::trunc(a * 0x1p9f));
  int e = 0;
  std::frexp(a, &e);
  return sign | uint8_t(((e - 1 + 7) << 3) + int(std::trunc(std::ldexp(a, -(e - 1)) * 8.0f - 8.0f)));
}

// A row quantizer with scale max|x| / @p range.
float quantize_row(std::span<const float> row, std::span<uint8_t> codes, float range) {
  float max_abs = 0.0f;
  for (const float x : row) max_abs = std::max(max_abs, std::fabs(x));
  const float scale = max_abs / range;
  for (size_t c = 0; c < row.size(); ++c) codes[c] = float_to_fp8_e4m3(scale == 0.0f ? 0.0f : row[c] / scale);
  return scale;
}

// A scalar FP8 decode; with @p wrong_bias the codes are read with exponent bias 8.
void scalar_decode_fp8(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out, bool wrong_bias) {
  const auto element = [&](std::span<const uint8_t> codes, float scale, int64_t b, int64_t g, int64_t j, int64_t c) {
    const float x = fp8_e4m3_to_float(codes[size_t(cache.shape().offset(b, g, j) + c)]);
    return scale * (wrong_bias ? 0.5f * x : x);
  };
  testing::scalar_decode(
      q, decode_shape(q, cache), cache.lengths(),
      [&](int64_t b, int64_t g, int64_t j, int64_t c) {
        return element(cache.k_fp8(), cache.key_scale(b, g, j), b, g, j, c);
      },
      [&](int64_t b, int64_t g, int64_t j, int64_t c) {
        return element(cache.v_fp8(), cache.value_scale(b, g, j), b, g, j, c);
      },
      out);
}

DecodeFn decode_with(bool wrong_bias) {
  return [wrong_bias](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    scalar_decode_fp8(q, cache, out, wrong_bias);
  };
}

TEST(WrongCh04Fp8, TruncatingEncoderIsRejected) {
  EXPECT_TRUE(testing::fp8_encoder_matches_definition([](float x) { return encode(x, false); }));
  const auto result = testing::fp8_encoder_matches_definition([](float x) { return encode(x, true); });
  ASSERT_FALSE(result);
  std::cout << result.message() << "\n";
}

TEST(WrongCh04Fp8, ScaleForInt8RangeIsRejected) {
  EXPECT_TRUE(testing::fp8_row_round_trip(
      [](std::span<const float> row, std::span<uint8_t> codes) { return quantize_row(row, codes, 448.0f); }));
  const auto result = testing::fp8_row_round_trip(
      [](std::span<const float> row, std::span<uint8_t> codes) { return quantize_row(row, codes, 127.0f); });
  ASSERT_FALSE(result);
  std::cout << result.message() << "\n";
}

TEST(WrongCh04Fp8, DecodeWithTheWrongExponentBiasIsRejected) {
  for (const testing::Int8Case& c : testing::fp8_decode_cases(65)) {
    EXPECT_TRUE(testing::fp8_decode_within_budget(decode_with(false), c)) << c.name();
    const auto result = testing::fp8_decode_within_budget(decode_with(true), c);
    EXPECT_FALSE(result) << c.name();
  }
}

}  // namespace
}  // namespace inferlab
