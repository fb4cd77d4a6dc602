// Wrong chapter-04 implementations, run through the very checks the real versions pass
// (tests/support/int8_check.h): each mistake must be rejected, and the same code without the
// mistake must pass.
//   - a decode that takes each V row's scale from the next token (a scale indexing slip);
//   - a quantizer that casts to int8 without clamping (128 wraps to −128: the sign flips);
//   - an append that clamps per-channel K values past the prompt's range without counting them.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <vector>

#include "tests/support/int8_check.h"
#include "tests/support/scalar_decode.h"

namespace inferlab {
namespace {

// A scalar INT8 decode; with @p wrong_token_scale each V row j uses the scale of row (j+1) mod L.
void scalar_decode_int8(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out, bool wrong_token_scale) {
  const auto value = [&](int64_t b, int64_t g, int64_t j, int64_t c) {
    const int64_t L = cache.length(b), scale_token = wrong_token_scale ? (j + 1) % L : j;
    const int8_t byte = cache.v_int8()[size_t(cache.shape().offset(b, g, j) + c)];
    return dequantize_int8(byte, cache.value_scale(b, g, scale_token));
  };
  testing::scalar_decode(
      q, decode_shape(q, cache), cache.lengths(),
      [&](int64_t b, int64_t g, int64_t j, int64_t c) { return cache.key(b, g, j, c); }, value, out);
}

DecodeFn decode_with(bool wrong_token_scale) {
  return [wrong_token_scale](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    scalar_decode_int8(q, cache, out, wrong_token_scale);
  };
}

const KvAppendFn cpu_append = [](KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.append(k_new, v_new);
};

TEST(WrongCh04, FixtureWithoutMistakesPasses) {
  for (const testing::Int8Case& c : testing::int8_decode_cases(65))
    EXPECT_TRUE(testing::int8_decode_within_budget(decode_with(false), cpu_append, c)) << c.name();
}

TEST(WrongCh04, ScaleFromTheWrongTokenIsRejected) {
  const auto result = testing::int8_decode_within_budget(decode_with(true), cpu_append,
                                                         {{33, 9}, 2, 8, 2, 64, KeyScaling::per_token, 2});
  ASSERT_FALSE(result);
  std::cout << result.message() << "\n";
  for (const testing::Int8Case& c : testing::int8_decode_cases(65)) {
    if (*std::min_element(c.lengths.begin(), c.lengths.end()) == 1 && c.lengths.size() == 1)
      continue;  // L = 1: j+1 ≡ j
    EXPECT_FALSE(testing::int8_decode_within_budget(decode_with(true), cpu_append, c)) << c.name();
  }
}

TEST(WrongCh04, UncountedSaturationIsRejected) {
  const KvAppendFn uncounted = [](KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
    const int64_t before = cache.saturated_count();
    cache.append(k_new, v_new);
    cache.add_saturated(before - cache.saturated_count());  // the clamps go unreported
  };
  // Per-channel K calibrated on a 1-token prompt: the appended tokens of the outlier channel clamp.
  const testing::Int8Case c{{6, 9}, 5, 4, 2, 64, KeyScaling::per_channel, 2, 10.0f};
  ASSERT_TRUE(testing::int8_decode_within_budget(decode_with(false), cpu_append, c));
  const auto result = testing::int8_decode_within_budget(decode_with(false), uncounted, c);
  ASSERT_FALSE(result);
  std::cout << result.message() << "\n";
}

TEST(WrongCh04, QuantizerThatWrapsIsRejected) {
  const auto wrapping = [](float x, float scale) -> int8_t {
    return static_cast<int8_t>(static_cast<int>(std::round(x / scale)));  // no clamp: 128 → −128
  };
  const auto result = testing::quantizer_saturates(wrapping);
  ASSERT_FALSE(result);
  std::cout << result.message() << "\n";
  EXPECT_TRUE(testing::quantizer_saturates(quantize_int8));
}

}  // namespace
}  // namespace inferlab
