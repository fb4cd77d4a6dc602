// Wrong chapter-04 FP8 implementations, run through the very checks the real FP8 code passes
// (tests/support/fp8_check.h): each mistake must be rejected, and the same code without the
// mistake must pass.
//   - an encoder that truncates the mantissa instead of rounding to nearest even;
//   - a row quantizer whose scale is max|x|/127 (INT8's) instead of max|x|/448;
//   - a decode that reads the codes with exponent bias 8 instead of 7 (every value halved);
//   - a cache append whose row scale is max|x|/127 (INT8's) instead of max|x|/448: a
//     self-consistent cache (its decode matches it exactly) that wastes E4M3's range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <span>
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

// An FP8 cache append whose row scale is max|x| / @p range (448 is the definition).
KvAppendFn append_with_range(float range) {
  return [range](KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
    cache.check_append(k_new, v_new);
    const int64_t B = cache.shape().batch, G = cache.shape().num_kv_heads, d = cache.shape().head_dim;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t g = 0; g < G; ++g) {
        const int64_t row = cache.row(b, g, cache.length(b));
        for (int kv = 0; kv < 2; ++kv) {
          const std::span<const float> x{(kv == 0 ? k_new : v_new).data() + (b * G + g) * d, size_t(d)};
          auto* codes = reinterpret_cast<uint8_t*>((kv == 0 ? cache.k_bytes() : cache.v_bytes()).data()) + row * d;
          (kv == 0 ? cache.k_scales() : cache.v_scales())[size_t(row)] = quantize_row(x, {codes, size_t(d)}, range);
        }
      }
    cache.commit_append();
  };
}

TEST(WrongCh04Fp8, CacheScaleForInt8RangeIsRejected) {
  EXPECT_TRUE(testing::fp8_cache_scales_match_definition(append_with_range(448.0f), 4));
  const auto result = testing::fp8_cache_scales_match_definition(append_with_range(127.0f), 4);
  ASSERT_FALSE(result);
  std::cout << result.message() << "\n";
  // The decode replay passes the right append; with the wrong one its exact decode of the cache
  // is not excused by the scales the cache stored: E4M3's steps at the defined scale max|x|/448
  // fall on other binades than at max|x|/127, and elements exceed half of them.
  for (const testing::Int8Case& c : testing::fp8_decode_cases(65)) {
    if (c.steps == 0) continue;  // nothing appended
    EXPECT_TRUE(testing::fp8_decode_within_budget(decode_with(false), append_with_range(448.0f), c)) << c.name();
    const auto wrong = testing::fp8_decode_within_budget(decode_with(false), append_with_range(127.0f), c);
    EXPECT_FALSE(wrong) << c.name();
    if (c.lengths.size() == 1 && c.lengths[0] == 1) std::cout << wrong.message() << "\n";
  }
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
