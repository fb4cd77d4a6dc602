// Chapter 04 exercises, graded. 4.1 (quantize a row, CPU) against the definition in ch04.h,
// written out in this file (defined_step, expected_code) element by element, saturation and its count, zero rows,
// non-finite input — on fresh random rows beside the hand-worked ones. 4.2 (the INT8 decode
// inner loops, sim backend) through the checks every INT8 decode version goes through
// (tests/support/int8_check.h): generation replayed step by step on odd ragged batches with
// outlier channels in K, the output poisoned first, compared with the float64 decode of the
// dequantized cache at fp32 tolerance and with the fp32 decode within the bound derived from the
// quantization steps; launches run under several thread schedules; every call must launch a
// kernel and stay within the device-memory budget of ch04.h.
//
// Every call into the student's library runs in a sandboxed child process
// (tests/support/isolation.h): this process draws the inputs, computes the oracle and decides;
// the student's code only ever returns outputs. Each TEST is one grading unit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "04-int8-kv-cache/ch04.h"
#include "common/tolerance.h"
#include "kernels/kv/kv_cache.h"
#include "kernels/kv/kv_factories.h"
#include "kernels/kv/quantize.h"
#include "kernels/registry.h"
#include "tests/support/expect_all.h"
#include "tests/support/int8_check.h"
#include "tests/support/isolation.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch04Quantize", "quantize_row_int8"},
    {"Ch04Quantize.GivenScaleSaturatesNeverWrapsAndCounts", "quantize_int8"},
    {"Ch04Decode", "decode_int8"},
});

// Δ of ch04.h, written here rather than taken from the lab's quantizer (whose bug would otherwise
// move the yardstick): max|x| / 127 in fp32. The codes are expected_code() below.
float defined_step(float max_abs) { return max_abs / 127.0f; }

using testing::expect_all;
using testing::Int8Case;
using testing::IsolatedRun;
using testing::output_bytes;
using testing::run_isolated;

// ---- 4.1 quantize_int8 / quantize_row_int8, each call in the sandbox ----

// What quantize_row_int8 gave for one row: its Δ and its codes.
struct RowCodes {
  float scale = -1.0f;
  std::vector<int8_t> codes;
};

// student::quantize_row_int8(@p row, codes) in the sandbox (codes poisoned with −128 first).
RowCodes student_quantize_row(const std::vector<float>& row) {
  RowCodes got{-1.0f, std::vector<int8_t>(row.size(), int8_t(-128))};
  run_isolated([&] { got.scale = student::quantize_row_int8(row, got.codes); },
               {output_bytes(got.scale), output_bytes(std::span<int8_t>(got.codes))});
  return got;
}

// What quantize_int8 gave for one row and a given scale: the clamped count and the codes.
struct GivenCodes {
  int64_t clamped = -1;
  std::vector<int8_t> codes;
};

// student::quantize_int8(@p row, @p scale, codes) in the sandbox (codes poisoned with @p poison).
GivenCodes student_quantize_given(const std::vector<float>& row, float scale, int8_t poison = int8_t(-128)) {
  GivenCodes got{-1, std::vector<int8_t>(row.size(), poison)};
  run_isolated([&] { got.clamped = student::quantize_int8(row, scale, got.codes); },
               {output_bytes(got.clamped), output_bytes(std::span<int8_t>(got.codes))});
  return got;
}

// The definition of ch04.h, computed here: clamp(round(x / Δ), −127, 127), 0 when Δ = 0.
int expected_code(float x, float scale) {
  if (scale == 0.0f) return 0;
  return int(std::clamp(std::round(x / scale), -127.0f, 127.0f));
}

bool expected_clamped(float x, float scale) {
  return scale != 0.0f && std::fabs(std::round(x / scale)) > 127.0f;
}

// "{0.5, -1.25, …}" (at most 12 elements) for messages.
std::string show_row(const std::vector<float>& row) {
  std::ostringstream out;
  out.precision(9);
  out << "{";
  for (size_t i = 0; i < row.size() && i < 12; ++i) out << (i ? ", " : "") << row[i];
  if (row.size() > 12) out << ", … (" << row.size() << " elements)";
  out << "}";
  return out.str();
}

// "" when @p got holds @p expected everywhere; else the first differing code and how many differ.
std::string codes_differ(const std::vector<int8_t>& got, const std::vector<int8_t>& expected) {
  size_t first = got.size(), count = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != expected[i]) {
      if (count++ == 0) first = i;
    }
  if (count == 0) return "";
  return "out[" + std::to_string(first) + "] = " + std::to_string(int(got[first])) + ", expected " +
         std::to_string(int(expected[first])) + " (" + std::to_string(count) + " of " + std::to_string(got.size()) +
         " codes differ)";
}

// A random row of @p n elements: N(0, 1) times @p magnitude, with an outlier when @p outlier.
std::vector<float> random_row(Rng& rng, size_t n, float magnitude, bool outlier) {
  std::vector<float> row(n);
  for (float& x : row) x = magnitude * rng.normal();
  if (outlier) row[n / 2] *= 40.0f;
  return row;
}

// Checks a quantize_int8 result for @p row and @p scale element by element and its count.
void expect_given_scale_codes(const std::vector<float>& row, float scale, const GivenCodes& got,
                              const std::string& what) {
  int64_t clamped = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    clamped += expected_clamped(row[i], scale);
    if (int(got.codes[i]) != expected_code(row[i], scale)) {
      ADD_FAILURE() << what << ": quantize_int8(row, scale " << scale << ") wrote out[" << i << "] = "
                    << int(got.codes[i]) << " for row[" << i << "] = " << row[i] << ", expected "
                    << expected_code(row[i], scale) << " = clamp(round(" << row[i] << " / " << scale
                    << "), −127, 127) (round first, clamp in float: never wrap)";
      return;
    }
  }
  EXPECT_EQ(got.clamped, clamped) << what << ": quantize_int8 must return how many elements had |round(x / Δ)| > 127; "
                                  << "row " << show_row(row) << ", scale " << scale;
}

TEST(Ch04Quantize, RowMatchesTheDefinition) {
  // Δ = max|x|/127 and q = clamp(round(x/Δ), −127, 127), byte for byte; rows of 1 … 1000
  // elements, tiny to large magnitudes, with and without an outlier; x̂ within half a step.
  testing::SeededRng rng;
  for (const size_t n : {size_t(1), size_t(7), size_t(64), size_t(128), size_t(1000)})
    for (const float magnitude : {1e-6f, 0.1f, 1.0f, 300.0f})
      for (const bool outlier : {false, true}) {
        const std::vector<float> row = random_row(rng, n, magnitude, outlier);
        const RowCodes got = student_quantize_row(row);
        float max_abs = 0.0f;
        for (const float x : row) max_abs = std::max(max_abs, std::fabs(x));
        ASSERT_EQ(got.scale, defined_step(max_abs))
            << "row of " << n << " elements " << show_row(row) << ": the scale must be max|x| / 127 = " << max_abs
            << " / 127";
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(int(got.codes[i]), expected_code(row[i], got.scale))
              << "row[" << i << "] = " << row[i] << " with scale " << got.scale << " (row of " << n << ")";
          ASSERT_LE(std::fabs(double(got.scale) * got.codes[i] - row[i]), int8_round_trip_bound(got.scale))
              << "row[" << i << "] = " << row[i] << ": x̂ must lie within half a step of x";
        }
      }
}

TEST(Ch04Quantize, AllZeroRowGivesScaleZeroAndZeros) {
  // Worked by hand: 33 zeros (one of them −0) give Δ = 0 and 33 zero codes — not 0/0 = NaN.
  std::vector<float> zeros(33, 0.0f);
  zeros[4] = -0.0f;
  const RowCodes row = student_quantize_row(zeros);
  EXPECT_EQ(row.scale, 0.0f) << "an all-zero row has Δ = 0";
  EXPECT_EQ(codes_differ(row.codes, std::vector<int8_t>(33, 0)), "") << "an all-zero row has 33 zero codes";
  const GivenCodes with_scale = student_quantize_given(zeros, 0.0f, int8_t(77));
  EXPECT_EQ(with_scale.clamped, 0) << "Δ = 0 clamps nothing";
  EXPECT_EQ(codes_differ(with_scale.codes, std::vector<int8_t>(33, 0)), "") << "Δ = 0 writes 0 everywhere";
  if (HasFailure()) return;

  // Fresh zero rows of random lengths with −0 at random places, a random given scale on a zero
  // row (zeros, nothing clamped), Δ = 0 on a random nonzero row (0 everywhere, nothing clamped),
  // and a row that is zero but for one tiny element (Δ = that element / 127).
  testing::SeededRng rng;
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<float> z(static_cast<size_t>(rng.integer(1, 300)), 0.0f);
    for (float& x : z)
      if (rng.integer(0, 2) == 0) x = -0.0f;
    const std::string what = "a zero row of " + std::to_string(z.size()) + " elements";
    const RowCodes got = student_quantize_row(z);
    EXPECT_EQ(got.scale, 0.0f) << "quantize_row_int8 on " << what << ": Δ must be 0, not " << got.scale;
    EXPECT_EQ(codes_differ(got.codes, std::vector<int8_t>(z.size(), 0)), "")
        << "quantize_row_int8 on " << what << ": every code must be 0";

    const float scale = std::exp(rng.uniform(-8.0f, 3.0f));
    const GivenCodes given = student_quantize_given(z, scale);
    EXPECT_EQ(given.clamped, 0) << "quantize_int8 on " << what << " with the given scale " << scale;
    EXPECT_EQ(codes_differ(given.codes, std::vector<int8_t>(z.size(), 0)), "")
        << "quantize_int8 on " << what << " with the given scale " << scale;

    const std::vector<float> nonzero = random_row(rng, static_cast<size_t>(rng.integer(1, 200)), 5.0f, trial % 2 == 1);
    const GivenCodes zero_scale = student_quantize_given(nonzero, 0.0f, int8_t(77));
    EXPECT_EQ(zero_scale.clamped, 0) << "quantize_int8(" << show_row(nonzero) << ", 0): Δ = 0 clamps nothing";
    EXPECT_EQ(codes_differ(zero_scale.codes, std::vector<int8_t>(nonzero.size(), 0)), "")
        << "quantize_int8(" << show_row(nonzero) << ", 0): Δ = 0 writes 0 everywhere";

    std::vector<float> lone(static_cast<size_t>(rng.integer(2, 100)), 0.0f);
    const size_t at = static_cast<size_t>(rng.integer(0, int64_t(lone.size()) - 1));
    lone[at] = std::exp(rng.uniform(-30.0f, 0.0f)) * (rng.integer(0, 1) ? 1.0f : -1.0f);
    const RowCodes lone_got = student_quantize_row(lone);
    EXPECT_EQ(lone_got.scale, defined_step(std::fabs(lone[at])))
        << "a zero row but for row[" << at << "] = " << lone[at] << ": Δ = |row[" << at << "]| / 127";
    std::vector<int8_t> lone_expected(lone.size(), 0);
    lone_expected[at] = lone[at] > 0 ? 127 : -127;
    EXPECT_EQ(codes_differ(lone_got.codes, lone_expected), "")
        << "a zero row of " << lone.size() << " but for row[" << at << "] = " << lone[at];
    if (HasFailure()) return;  // one failing trial says enough
  }
}

TEST(Ch04Quantize, GivenScaleSaturatesNeverWrapsAndCounts) {
  // Values at and past ±127·Δ (a per-channel scale calibrated on the prompt): ±127, never −128
  // for +128; the return value counts the clamped elements. Worked by hand first…
  const auto one = [](float x, float scale) { return student_quantize_given({x}, scale).codes[0]; };
  EXPECT_TRUE(testing::quantizer_saturates(one));
  const std::vector<float> row = {0.5f, 12.7f, 12.76f, 13.0f, -13.0f, 1e30f, -12.74f, 0.0f};
  EXPECT_EQ(student_quantize_given(row, 0.1f).clamped, 4) << "12.76, 13, −13 and 1e30 are clamped";

  // …then fresh rows against a fresh scale: most elements inside the range, some at ±127·Δ,
  // some just past it and some far past it, in random places.
  testing::SeededRng rng;
  for (int trial = 0; trial < 8; ++trial) {
    const float scale = std::exp(rng.uniform(-10.0f, 4.0f));
    std::vector<float> r(static_cast<size_t>(rng.integer(1, 257)));
    for (float& x : r) {
      const int kind = int(rng.integer(0, 9));
      const float sign = rng.integer(0, 1) ? 1.0f : -1.0f;
      if (kind < 5) {
        x = scale * rng.uniform(-127.0f, 127.0f);
      } else if (kind < 7) {
        x = sign * scale * rng.uniform(126.5f, 128.5f);  // around the edge: rounds to 127 or clamps
      } else if (kind < 9) {
        x = sign * scale * rng.uniform(128.0f, 1000.0f);
      } else {
        x = sign * scale * std::exp(rng.uniform(7.0f, 40.0f));  // far past: 128 must not wrap to −128
      }
    }
    const GivenCodes got = student_quantize_given(r, scale);
    expect_given_scale_codes(r, scale, got,
                             "random row " + std::to_string(trial) + " of " + std::to_string(r.size()) + " elements");
    if (HasFailure()) return;  // one failing row says enough
  }
}

// How a call that must refuse its row ended: returned normally, or threw std::invalid_argument
// with this message (any other exception comes back as itself).
struct Refusal {
  int32_t refused = 0;
  char message[480] = {};
};

// student::quantize_row_int8 (@p which = 0) or quantize_int8 (@p which = 1, scale 0.05) on
// @p row, in the sandbox, into @p out (whose final bytes come back).
Refusal student_refusal(const std::vector<float>& row, int which, std::vector<int8_t>& out) {
  Refusal refusal;
  run_isolated([&] {
    try {
      if (which == 0) {
        student::quantize_row_int8(row, out);
      } else {
        student::quantize_int8(row, 0.05f, out);
      }
    } catch (const std::invalid_argument& error) {
      refusal.refused = 1;
      std::strncpy(refusal.message, error.what(), sizeof refusal.message - 1);
    }
  }, {output_bytes(refusal), output_bytes(std::span<int8_t>(out))});
  return refusal;
}

TEST(Ch04Quantize, NonFiniteInputIsReportedNotStored) {
  testing::SeededRng rng;
  const std::vector<float> row = random_row(rng, static_cast<size_t>(rng.integer(16, 80)), 1.0f, false);
  student_quantize_row(row);  // a working call first (a stub fails here, once)
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const size_t n = row.size();
  // The first element, one inside (15 by hand, then a random one), the last; and two bad ones,
  // where the first must be named.
  const size_t middle = static_cast<size_t>(rng.integer(1, int64_t(n) - 2));
  const size_t later = static_cast<size_t>(rng.integer(int64_t(middle) + 1, int64_t(n) - 1));
  std::vector<std::vector<size_t>> places = {{0}, {15}, {middle}, {n - 1}, {middle, later}};
  for (const float bad : {nan, inf, -inf})
    for (const std::vector<size_t>& at : places) {
      std::vector<float> poisoned = row;
      for (const size_t i : at) poisoned[i] = bad;
      const std::string name = "row[" + std::to_string(at[0]) + "]";
      for (int which = 0; which < 2; ++which) {
        const char* function = which == 0 ? "quantize_row_int8" : "quantize_int8";
        std::vector<int8_t> untouched(n, int8_t(55));
        const Refusal refusal = student_refusal(poisoned, which, untouched);
        if (!refusal.refused) {
          ADD_FAILURE() << function << ": " << bad << " at " << name << (at.size() > 1 ? " (and later)" : "")
                        << " of a row of " << n << " was quantized without an error (std::invalid_argument expected)";
        } else {
          EXPECT_NE(std::string(refusal.message).find(name), std::string::npos)
              << function << ": the error must name the first non-finite element, " << name
              << (at.size() > 1 ? " (row[" + std::to_string(at[1]) + "] is non-finite too)" : "")
              << "; it said: " << refusal.message;
        }
        EXPECT_EQ(codes_differ(untouched, std::vector<int8_t>(n, int8_t(55))), "")
            << function << ": a refused row must write nothing (" << bad << " at " << name
            << "; out was filled with 55 before the call)";
        if (HasFailure()) return;  // one failing row says enough
      }
    }
}

// ---- 4.2 decode_int8 (sim): the inner loops inside the given kernel, in the sandbox ----

// A [batch, num_kv_heads, max_seq_len(, head_dim)] tensor holding @p values.
template <class T>
Tensor<T> as_tensor(std::span<const T> values, Shape shape) {
  return Tensor<T>(std::move(shape), std::vector<T>(values.begin(), values.end()));
}

// Exercise 4.2's device-memory budget (ch04.h): what the given launcher uploads — q and out
// (fp32), the int8 K and V caches, their fp32 scales and the lengths — and nothing else.
uint64_t decode_int8_budget(const Tensor<float>& q, const Tensor<int8_t>& k, const Tensor<float>& k_scales,
                            const std::vector<int32_t>& lengths) {
  return 2 * uint64_t(q.size()) * sizeof(float) + 2 * uint64_t(k.size()) * sizeof(int8_t) +
         2 * uint64_t(k_scales.size()) * sizeof(float) + uint64_t(lengths.size()) * sizeof(int32_t);
}

// sim::student::decode_int8 as a DecodeFn (per-token scales), launched with @p threads, run in
// the sandbox. Throws (with the reason) when the call launched no kernel or its device memory
// left the budget of ch04.h; the checks report that as the shape's failure.
DecodeFn student_decode(int threads = 128) {
  return [threads](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    const KvCacheShape& s = cache.shape();
    const Shape scales{s.batch, s.num_kv_heads, s.max_seq_len};
    const Tensor<int8_t> k = as_tensor<int8_t>(cache.k_int8(), s.shape()), v = as_tensor<int8_t>(cache.v_int8(), s.shape());
    const Tensor<float> k_scales = as_tensor<float>(cache.k_scales(), scales),
                        v_scales = as_tensor<float>(cache.v_scales(), scales);
    const std::vector<int32_t> lengths = cache.lengths();
    const IsolatedRun run = run_isolated(
        [&] { sim::student::decode_int8(q, k, v, k_scales, v_scales, lengths, out, threads); },
        {output_bytes(out.span())});
    std::ostringstream shape;
    shape << "q " << to_string(q.shape()) << ", cache " << to_string(s.shape()) << ", " << threads << " threads";
    if (run.launches == 0)
      throw std::runtime_error("no kernel launched: your decode_int8 returned without launching a kernel — exercise 4.2 asks for a kernel "
                               "(decode_int8_kernel, launched by the given launcher) [" + shape.str() + "]");
    const uint64_t budget = decode_int8_budget(q, k, k_scales, lengths);
    if (run.device_bytes_peak > budget)
      throw std::runtime_error(
          "exercise 4.2's device-memory budget (ch04.h) is the launcher's buffers only — q and out in fp32, the int8 "
          "K and V caches, their fp32 scales and the lengths: " + std::to_string(budget) + " bytes for " + shape.str() +
          "; the call's device-memory peak was " + std::to_string(run.device_bytes_peak) +
          " bytes (a dequantized fp32 copy of the cache would add " + std::to_string(8 * k.size()) + ")");
    if (run.device_bytes_peak < budget)
      throw std::runtime_error(
          "exercise 4.2: the kernel reads q, the caches, their scales and the lengths from device memory and writes "
          "out there (" + std::to_string(budget) + " bytes for " + shape.str() + "), but the call held only " +
          std::to_string(run.device_bytes_peak) + " bytes of device memory at its peak: keep the given launcher's "
          "uploads");
  };
}

void cpu_append(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.append(k_new, v_new);
}

// Int8Case fields: {final lengths, decode steps, num_heads, num_kv_heads, head_dim, K scaling,
// outlier channels, outlier magnitude}. Per-token scales only (the exercise's cache).
// Each case runs with every block size of @p threads.
void expect_decode(const std::vector<Int8Case>& cases, const std::vector<int>& threads = {128}) {
  std::vector<std::pair<Int8Case, int>> runs;
  for (const Int8Case& c : cases)
    for (const int t : threads) runs.push_back({c, t});
  expect_all(runs, [](const std::pair<Int8Case, int>& run) -> ::testing::AssertionResult {
    const auto& [c, t] = run;
    try {
      const ::testing::AssertionResult result = testing::int8_decode_within_budget(student_decode(t), cpu_append, c);
      if (result || t == 128) return result;
      return ::testing::AssertionFailure() << result.message() << " [" << t << " threads per block]";
    } catch (const std::exception& error) {
      return ::testing::AssertionFailure() << c.name() << (t == 128 ? "" : " [" + std::to_string(t) + " threads per block]")
                                           << ": " << error.what();
    }
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
  expect_decode({{{40, 3}, 2, 4, 2, 80, kPerToken, 2}, {{6}, 1, 2, 1, 160, kPerToken, 0}}, {32, 96, 256});
}

TEST(Ch04Decode, SameOutputUnderEverySchedule) {
  testing::SeededRng rng;
  const Tensor<float> k = rng.normal_tensor({2, 2, 40, 80}), v = rng.normal_tensor({2, 2, 40, 80});
  const std::vector<int64_t> lengths = {rng.integer(20, 40), rng.integer(1, 20)};
  const KvCache cache = make_kv_cache(k, v, lengths, KvFormat::int8(kPerToken));
  const Tensor<float> q = rng.normal_tensor({2, 8, 80});
  for (const int threads : {64, 128}) {
    const DecodeFn decode = student_decode(threads);
    const ::testing::AssertionResult same =
        testing::host_same_under_schedules([&](Tensor<float>& out) { decode(q, cache, out); }, q.shape());
    EXPECT_TRUE(same) << threads << " threads, lengths {" << lengths[0] << ", " << lengths[1] << "}";
    if (!same && std::string(same.message()).find("not implemented yet") != std::string::npos) break;
  }
}

}  // namespace
}  // namespace inferlab
