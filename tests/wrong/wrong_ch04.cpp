// Wrong chapter-04 implementations, run through the very checks the real versions pass
// (tests/support/int8_check.h): each mistake must be rejected, and the same code without the
// mistake must pass.
//   - a decode that takes each V row's scale from the next token (a scale indexing slip);
//   - a quantizer that casts to int8 without clamping (128 wraps to −128: the sign flips);
//   - an append that clamps per-channel K values past the prompt's range without counting them;
//   - an append whose step is max|x|/7 instead of max|x|/127 (a self-consistent cache: its own
//     decode matches it exactly, so only a ceiling taken from the data, not from the stored step,
//     can see it).
#include <gtest/gtest.h>

#include <algorithm>
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

// An INT8 append (fp32 scales) whose step is max|x| / @p levels per group: V and per-token K
// rows; per-channel K keeps the calibrated channel steps (calibrating an empty prompt's channels
// on this token with the same rule). Clamps are counted. @p levels = 127 is the definition.
KvAppendFn append_with_levels(float levels) {
  return [levels](KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
    cache.check_append(k_new, v_new);
    const int64_t B = cache.shape().batch, G = cache.shape().num_kv_heads, d = cache.shape().head_dim;
    int64_t saturated = 0;
    const auto store = [&](const float* x, int8_t* codes, float scale) {
      for (int64_t c = 0; c < d; ++c) {
        saturated += scale > 0.0f ? std::fabs(std::round(x[c] / scale)) > 127.0f : x[c] != 0.0f;
        codes[c] = quantize_int8(x[c], scale);
      }
    };
    const auto max_abs = [d](const float* x) {
      float m = 0.0f;
      for (int64_t c = 0; c < d; ++c) m = std::max(m, std::fabs(x[c]));
      return m;
    };
    for (int64_t b = 0; b < B; ++b)
      for (int64_t g = 0; g < G; ++g) {
        const int64_t row = cache.row(b, g, cache.length(b));
        const float* k = k_new.data() + (b * G + g) * d;
        const float* v = v_new.data() + (b * G + g) * d;
        const float v_scale = cache.v_scales()[size_t(row)] = max_abs(v) / levels;
        store(v, cache.v_int8().data() + row * d, v_scale);
        if (cache.format().per_channel()) {
          for (int64_t c = 0; c < d; ++c) {
            float& scale = cache.k_scales()[size_t(cache.channel_scale_index(b, g, c))];
            if (std::isnan(scale)) scale = std::fabs(k[c]) / levels;  // no prompt: this token calibrates
            saturated += scale > 0.0f ? std::fabs(std::round(k[c] / scale)) > 127.0f : k[c] != 0.0f;
            cache.k_int8()[size_t(row * d + c)] = quantize_int8(k[c], scale);
          }
        } else {
          const float k_scale = cache.k_scales()[size_t(row)] = max_abs(k) / levels;
          store(k, cache.k_int8().data() + row * d, k_scale);
        }
      }
    cache.add_saturated(saturated);
    cache.commit_append();
  };
}

// int8_decode_cases() with fp32 scales (the fixture's), plus a case appended from an empty
// prompt (every token through the fixture).
std::vector<testing::Int8Case> fp32_scale_cases() {
  std::vector<testing::Int8Case> cases;
  for (const testing::Int8Case& c : testing::int8_decode_cases(65))
    if (c.scale_dtype == ScaleDtype::fp32 && c.steps > 0) cases.push_back(c);
  cases.push_back({{6, 6}, 6, 4, 2, 48, KeyScaling::per_token, 0});
  cases.push_back({{5}, 5, 2, 1, 64, KeyScaling::per_channel, 2});
  return cases;
}

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

TEST(WrongCh04, StepOfMaxOver7IsRejected) {
  const KvAppendFn right = append_with_levels(127.0f), wrong = append_with_levels(7.0f);
  // The scale definition: the stored step must be max|x|/127 of its group.
  for (KeyScaling scaling : {KeyScaling::per_token, KeyScaling::per_channel})
    for (int64_t prompt : {int64_t(0), int64_t(3)}) {
      EXPECT_TRUE(testing::int8_scales_match_definition(right, scaling, ScaleDtype::fp32, prompt, 3))
          << to_string(scaling) << ", prompt " << prompt;
      const auto result = testing::int8_scales_match_definition(wrong, scaling, ScaleDtype::fp32, prompt, 3);
      EXPECT_FALSE(result) << to_string(scaling) << ", prompt " << prompt;
      std::cout << result.message() << "\n";
    }
  // The round trip, at half the step defined from the data.
  for (KeyScaling scaling : {KeyScaling::per_token, KeyScaling::per_channel}) {
    EXPECT_TRUE(testing::round_trip_within_half_step(right, scaling, 4)) << to_string(scaling);
    EXPECT_FALSE(testing::round_trip_within_half_step(wrong, scaling, 4)) << to_string(scaling);
  }
  // The decode replay: its decode is exact over the coarse cache, and the stored steps would
  // excuse the error; the ceiling from the data's steps does not.
  for (const testing::Int8Case& c : fp32_scale_cases()) {
    EXPECT_TRUE(testing::int8_decode_within_budget(decode_with(false), right, c)) << c.name();
    const auto result = testing::int8_decode_within_budget(decode_with(false), wrong, c);
    EXPECT_FALSE(result) << c.name();
    if (c.lengths.size() == 2 && c.steps == 6) std::cout << result.message() << "\n";
  }
}

}  // namespace
}  // namespace inferlab
