// Chapter 04 exercises. 4.1 (quantize a row, CPU) against the definition in ch04.h: the lab's
// quantize_int8 / int8_scale element by element, saturation, zero rows, non-finite input. 4.2
// (the INT8 decode inner loops, sim backend) through the checks every INT8 decode version goes
// through (tests/support/int8_check.h): generation replayed step by step on odd ragged batches
// with outlier channels in K, the output poisoned first, compared with the float64 decode of
// the dequantized cache at fp32 tolerance and with the fp32 decode within the bound derived from
// the quantization steps; launches run under several thread schedules. Each TEST is one grading
// unit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "04-int8-kv-cache/ch04.h"
#include "common/tolerance.h"
#include "kernels/kv/quantize.h"
#include "kernels/registry.h"
#include "kernels/kv/kv_cache.h"
#include "tests/support/expect_all.h"
#include "tests/support/int8_check.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using testing::expect_all;
using testing::Int8Case;

// ---- 4.1 quantize_int8 / quantize_row_int8 ----

// A random row of @p n elements: N(0, 1) times @p magnitude, with an outlier when @p outlier.
std::vector<float> random_row(Rng& rng, size_t n, float magnitude, bool outlier) {
  std::vector<float> row(n);
  for (float& x : row) x = magnitude * rng.normal();
  if (outlier) row[n / 2] *= 40.0f;
  return row;
}

TEST(Ch04Quantize, RowMatchesTheDefinition) {
  // Δ = max|x|/127 and q = clamp(round(x/Δ), −127, 127), byte for byte; rows of 1 … 1000
  // elements, tiny to large magnitudes, with and without an outlier; x̂ within half a step.
  testing::SeededRng rng;
  for (const size_t n : {size_t(1), size_t(7), size_t(64), size_t(128), size_t(1000)})
    for (const float magnitude : {1e-6f, 0.1f, 1.0f, 300.0f})
      for (const bool outlier : {false, true}) {
        const std::vector<float> row = random_row(rng, n, magnitude, outlier);
        std::vector<int8_t> out(n, int8_t(-128));
        const float scale = student::quantize_row_int8(row, out);
        float max_abs = 0.0f;
        for (const float x : row) max_abs = std::max(max_abs, std::fabs(x));
        ASSERT_EQ(scale, int8_scale(max_abs)) << "n " << n << ": the scale must be max|x| / 127";
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(int(out[i]), int(quantize_int8(row[i], scale)))
              << "row[" << i << "] = " << row[i] << " with scale " << scale;
          ASSERT_LE(std::fabs(double(scale) * out[i] - row[i]), int8_round_trip_bound(scale)) << "row[" << i << "]";
        }
      }
}

TEST(Ch04Quantize, AllZeroRowGivesScaleZeroAndZeros) {
  std::vector<float> zeros(33, 0.0f);
  zeros[4] = -0.0f;
  std::vector<int8_t> out(33, int8_t(77));
  EXPECT_EQ(student::quantize_row_int8(zeros, out), 0.0f);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(int(out[i]), 0) << "out[" << i << "]";
  std::vector<int8_t> with_scale(33, int8_t(77));
  EXPECT_EQ(student::quantize_int8(zeros, 0.0f, with_scale), 0);
  EXPECT_EQ(with_scale, std::vector<int8_t>(33, 0));
}

TEST(Ch04Quantize, GivenScaleSaturatesNeverWrapsAndCounts) {
  // Values at and past ±127·Δ (a per-channel scale calibrated on the prompt): ±127, never −128
  // for +128; the return value counts the clamped elements.
  const auto one = [](float x, float scale) {
    const float row[1] = {x};
    int8_t out[1] = {0};
    student::quantize_int8(row, scale, out);
    return out[0];
  };
  EXPECT_TRUE(testing::quantizer_saturates(one));
  const std::vector<float> row = {0.5f, 12.7f, 12.76f, 13.0f, -13.0f, 1e30f, -12.74f, 0.0f};
  std::vector<int8_t> out(row.size());
  EXPECT_EQ(student::quantize_int8(row, 0.1f, out), 4) << "12.76, 13, −13 and 1e30 are clamped";
}

TEST(Ch04Quantize, NonFiniteInputIsReportedNotStored) {
  testing::SeededRng rng;
  std::vector<float> row = random_row(rng, 16, 1.0f, false);
  std::vector<int8_t> out(row.size());
  student::quantize_row_int8(row, out);  // a working call first (a stub fails here, once)
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()})
    for (const size_t at : {size_t(0), size_t(9), size_t(15)}) {
      std::vector<float> poisoned = row;
      poisoned[at] = bad;
      const std::string name = "row[" + std::to_string(at) + "]";
      for (int which = 0; which < 2; ++which) {
        std::vector<int8_t> untouched(row.size(), int8_t(55));
        try {
          if (which == 0) {
            student::quantize_row_int8(poisoned, untouched);
          } else {
            student::quantize_int8(poisoned, 0.05f, untouched);
          }
          ADD_FAILURE() << (which ? "quantize_int8" : "quantize_row_int8") << ": " << bad << " at " << name
                        << " was quantized without an error";
        } catch (const std::invalid_argument& error) {
          EXPECT_NE(std::string(error.what()).find(name), std::string::npos)
              << "the error must name " << name << ": " << error.what();
        }
        EXPECT_EQ(untouched, std::vector<int8_t>(row.size(), int8_t(55))) << "a refused row must write nothing";
      }
    }
}

// ---- 4.2 decode_int8 (sim): the inner loops inside the given kernel ----

// A [batch, num_kv_heads, max_seq_len(, head_dim)] tensor holding @p values.
template <class T>
Tensor<T> as_tensor(std::span<const T> values, Shape shape) {
  return Tensor<T>(std::move(shape), std::vector<T>(values.begin(), values.end()));
}

// sim::student::decode_int8 as an DecodeFn (per-token scales), launched with @p threads.
DecodeFn student_decode(int threads = 128) {
  return [threads](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    const KvCacheShape& s = cache.shape();
    const Shape scales{s.batch, s.num_kv_heads, s.max_seq_len};
    sim::student::decode_int8(q, as_tensor<int8_t>(cache.k_int8(), s.shape()), as_tensor<int8_t>(cache.v_int8(), s.shape()),
                              as_tensor<float>(cache.k_scales(), scales), as_tensor<float>(cache.v_scales(), scales),
                              cache.lengths(), out, threads);
  };
}

void cpu_append(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.append(k_new, v_new);
}

// Int8Case fields: {final lengths, decode steps, num_heads, num_kv_heads, head_dim, K scaling,
// outlier channels, outlier magnitude}. Per-token scales only (the exercise's cache).
void expect_decode(const std::vector<Int8Case>& cases, int threads = 128) {
  expect_all(cases, [threads](const Int8Case& c) {
    return testing::int8_decode_within_budget(student_decode(threads), cpu_append, c);
  });
}

constexpr KeyScaling kPerToken = KeyScaling::per_token;

TEST(Ch04Decode, OddShapes) {
  // Ragged batches, L = 1 … 129, head_dim 20 … 128, GQA 1 … 8, with and without outlier channels.
  std::vector<Int8Case> cases;
  for (const Int8Case& c : testing::int8_decode_cases(129))
    if (c.key_scaling == kPerToken && c.scale_dtype == ScaleDtype::fp32) cases.push_back(c);  // the exercise's cache
  expect_decode(cases);
}

TEST(Ch04Decode, EachRowUsesItsOwnScale) {
  // Outliers ×30 in a few channels make every row's scale different: a scale taken from the
  // wrong token (or applied per element twice) leaves the budget.
  expect_decode({{{33, 9}, 2, 8, 2, 64, kPerToken, 3, 30.0f}, {{17}, 3, 4, 4, 96, kPerToken, 5, 30.0f}});
}

TEST(Ch04Decode, GroupedQueryAttention) {
  expect_decode({{{9, 4}, 2, 8, 8, 64, kPerToken, 2},
                 {{9, 4}, 2, 8, 4, 64, kPerToken, 2},
                 {{9, 4}, 2, 8, 1, 64, kPerToken, 2},
                 {{13, 6}, 2, 6, 3, 80, kPerToken, 2}});
}

TEST(Ch04Decode, RaggedBatchAndPoisonedTail) {
  // Each sequence its own length; the slots past it hold NaN scales that must stay unread.
  expect_decode({{{1, 40, 7, 2, 19}, 1, 4, 2, 64, kPerToken, 1}, {{50, 1}, 1, 2, 1, 128, kPerToken, 0}});
}

TEST(Ch04Decode, OddHeadDims) {
  // Below a warp (7), not a multiple of 32 (33), above the block (160, 200).
  std::vector<Int8Case> cases;
  for (const int64_t d : {7, 33, 160, 200}) cases.push_back({{9, 4}, 2, 4, 2, d, kPerToken, 1});
  expect_decode(cases);
}

TEST(Ch04Decode, BlockSizes) {
  for (const int threads : {32, 96, 256})
    expect_decode({{{40, 3}, 2, 4, 2, 80, kPerToken, 2}, {{6}, 1, 2, 1, 160, kPerToken, 0}}, threads);
}

TEST(Ch04Decode, SameOutputUnderEverySchedule) {
  testing::SeededRng rng;
  const Tensor<float> k = rng.normal_tensor({2, 2, 40, 80}), v = rng.normal_tensor({2, 2, 40, 80});
  const KvCache cache = make_kv_cache(k, v, {37, 9}, KvFormat::int8(kPerToken));
  const Tensor<float> q = rng.normal_tensor({2, 8, 80});
  for (const int threads : {64, 128}) {
    const DecodeFn decode = student_decode(threads);
    EXPECT_TRUE(testing::host_same_under_schedules([&](Tensor<float>& out) { decode(q, cache, out); }, q.shape()))
        << threads << " threads";
  }
}

}  // namespace
}  // namespace inferlab
