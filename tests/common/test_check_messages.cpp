// What a failing check tells a student: the shared checks (common/compare.h, tests/support/*) are
// fed known-bad outputs — two NaN elements, one wrong cache element, a result that depends on the
// thread order — and their messages must say the right thing, in the right order:
//   - NaN/Inf outputs are counted and located first, and the errors beside them are over the
//     finite outputs only (never "max abs error 0" next to a NaN);
//   - every element is named in its tensor's own coordinates ("(head 1, query 2, channel 5)",
//     "V (sequence 1, KV head 1, token 8, channel 3; slot 20 …)"), never by a flat byte offset;
//   - at most a few elements are listed, the rest counted;
//   - a race report says that the named line is the launch, and what differing results mean;
//   - every message keeps the seed and how to replay it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/compare.h"
#include "common/half.h"
#include "kernels/attention/attention.h"
#include "kernels/decode/decode.h"
#include "kernels/registry.h"
#include "simt/simt.h"
#include "tests/support/attention_check.h"
#include "tests/support/decode_check.h"
#include "tests/support/int8_check.h"
#include "tests/support/isolation.h"
#include "tests/support/prefill_steps_check.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// How many lines of @p text begin with @p prefix.
int lines_starting_with(const std::string& text, const std::string& prefix) {
  int count = 0;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    if (text.compare(at, prefix.size(), prefix) == 0) ++count;
    at = end + 1;
  }
  return count;
}

// Expects @p first to occur in @p text, before @p second (which must occur too).
void expect_before(const std::string& text, const std::string& first, const std::string& second) {
  const size_t a = text.find(first), b = text.find(second);
  ASSERT_NE(a, std::string::npos) << "missing \"" << first << "\" in:\n" << text;
  ASSERT_NE(b, std::string::npos) << "missing \"" << second << "\" in:\n" << text;
  EXPECT_LT(a, b) << "\"" << first << "\" must come before \"" << second << "\" in:\n" << text;
}

const std::string kReplay = "rerun with INFERLAB_SEED=";  // replay_hint() outside a graded run

// ---- common/compare.h ----

TEST(CheckMessages, NaNCountComesFirstThenTheFiniteErrors) {
  testing::SeededRng rng;
  Tensor<float> out = rng.normal_tensor({64, 64});
  const Tensor<double> ref = convert<double>(out);
  out[3 * 64 + 17] = kNaN;
  out[40 * 64 + 2] = kNaN;
  out[5] += 0.25f;  // a finite error too: the statistics beside the NaN are over the finite outputs
  const Comparison c = compare_to_oracle(out, ref, tolerance_for(Precision::fp32), {"row", "col"});
  ASSERT_FALSE(c.ok);
  const std::string report = c.report();
  EXPECT_TRUE(
      contains(report, "DOES NOT MATCH the float64 oracle: 2 of 4096 outputs are NaN, first at (row 3, col 17)"))
      << report;
  expect_before(report, "2 of 4096 outputs are NaN", "max abs error");
  EXPECT_TRUE(contains(report, "over the 4094 finite outputs")) << report;
  EXPECT_FALSE(contains(report, "max abs error 0 ")) << report;
  EXPECT_TRUE(contains(report, "max abs error 0.25")) << report;
  EXPECT_TRUE(contains(report, "at (row 0, col 5): got")) << report;  // the mismatches in order, by name
  EXPECT_TRUE(contains(report, "at (row 3, col 17): got nan")) << report;
  EXPECT_EQ(c.nan_count, 2);
  EXPECT_EQ(c.first_non_finite, 3 * 64 + 17);
  EXPECT_TRUE(std::isinf(c.rel_frobenius));  // the overall error stays ∞: NaN never passes
  EXPECT_GT(c.finite_rel_frobenius, 0.0);
  std::cout << report << "\n";
}

TEST(CheckMessages, InfinityIsCountedApartFromNaN) {
  Tensor<float> out({2, 4}, 1.0f);
  const Tensor<double> ref({2, 4}, 1.0);
  out[6] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(contains(compare_to_oracle(out, ref, tolerance_for(Precision::fp32)).report(),
                       "1 of 8 outputs is Inf, first at [1, 2]"));
  out[1] = kNaN;
  EXPECT_TRUE(contains(compare_to_oracle(out, ref, tolerance_for(Precision::fp32)).report(),
                       "2 of 8 outputs are NaN or Inf (1 NaN, 1 Inf), first at [0, 1]"));
}

TEST(CheckMessages, ReportListsAFewMismatchesAndCountsTheRest) {
  testing::SeededRng rng;
  Tensor<float> out = rng.normal_tensor({10, 10});
  const Tensor<double> ref = convert<double>(out);
  for (int64_t i = 0; i < out.size(); ++i) out[i] += 1.0f;
  const std::string report = compare_to_oracle(out, ref, tolerance_for(Precision::fp32), {"row", "col"}).report();
  EXPECT_EQ(lines_starting_with(report, "  at ("), int(kReportedMismatches)) << report;
  EXPECT_TRUE(contains(report, "100 of 100 elements out of bounds")) << report;
  EXPECT_TRUE(contains(report, "… and 97 more out of bounds")) << report;
  EXPECT_TRUE(contains(report, "no NaN/Inf")) << report;
}

// ---- tests/support/attention_check.h ----

TEST(CheckMessages, AttentionNamesNaNByHeadQueryChannel) {
  const testing::AttentionCase c{4, 2, 9, 16, true};
  const ::testing::AssertionResult result = testing::attention_matches_oracle(
      [](const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal, Tensor<float>& out) {
        out = convert<float>(attention_reference(q, k, v, causal));
        out[(1 * 9 + 2) * 16 + 5] = kNaN;  // (head 1, query 2, channel 5)
        out[(3 * 9 + 8) * 16 + 0] = kNaN;
      },
      Precision::fp32, c);
  ASSERT_FALSE(result);
  const std::string message = result.message();
  EXPECT_TRUE(contains(message, "2 of 576 outputs are NaN, first at (head 1, query 2, channel 5)")) << message;
  expect_before(message, "outputs are NaN", "max abs error");
  EXPECT_TRUE(contains(message, kReplay)) << message;
  std::cout << message << "\n";
}

// ---- tests/support/decode_check.h ----

TEST(CheckMessages, DecodeNamesNaNBySequenceHeadChannel) {
  const testing::DecodeCase c{{5, 9}, 2, 4, 2, 16};
  const DecodeFn decode = [](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    out = convert<float>(decode_reference(q, cache));
    out[(1 * 4 + 2) * 16 + 7] = kNaN;  // (sequence 1, head 2, channel 7)
  };
  const KvAppendFn append = [](KvCache& cache, const Tensor<float>& k, const Tensor<float>& v) { cache.append(k, v); };
  const ::testing::AssertionResult result = testing::decode_steps_match_prefill(decode, KvDtype::fp32, append, c);
  ASSERT_FALSE(result);
  const std::string message = result.message();
  EXPECT_TRUE(contains(message, "1 of 128 outputs is NaN, first at (sequence 1, head 2, channel 7)")) << message;
  expect_before(message, "outputs is NaN", "max abs error");
  EXPECT_TRUE(contains(message, "a NaN is an element never written")) << message;  // what a NaN means here
  EXPECT_TRUE(contains(message, kReplay)) << message;
}

// An append that stores the token correctly, then changes one byte of one element of K or V
// (sequence @p b, KV head @p g, token @p token, channel @p channel); @p slot receives its slot.
KvAppendFn append_then_corrupt(bool value, int64_t b, int64_t g, int64_t token, int64_t channel, int64_t* slot) {
  return [=](KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
    cache.append(k_new, v_new);
    const size_t element = cache.dtype() == KvDtype::fp16 ? 2 : 4;
    std::span<std::byte> bytes = value ? cache.v_bytes() : cache.k_bytes();
    bytes[size_t(cache.row(b, g, token) * cache.shape().head_dim + channel) * element] ^= std::byte{0x5a};
    *slot = cache.slot(b, token);
  };
}

TEST(CheckMessages, AppendNamesTheWrongCacheElement) {
  for (const int64_t block_size : {int64_t(0), int64_t(4)})
    for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16}) {
      testing::DecodeCase c{{5, 9}, 1, 4, 2, 16};  // sequence 1 appends token 8 (max_seq_len 12)
      c.block_size = block_size;
      const std::string what = std::string(to_string(dtype)) + (block_size ? ", paged" : ", contiguous");
      struct Expectation {
        bool value;
        int64_t token;
        std::string role;
      };
      for (const Expectation& x : {Expectation{true, 8, ": the token this append writes)"},
                                   Expectation{false, 2, ": a token cached before the append, which must not change)"},
                                   Expectation{true, 10, ": past the sequence's length, which must stay poisoned)"}}) {
        int64_t slot = -1;
        const ::testing::AssertionResult result =
            testing::append_matches_reference(append_then_corrupt(x.value, 1, 1, x.token, 3, &slot), dtype, c);
        ASSERT_FALSE(result) << what;
        const std::string message = result.message();
        const std::string element = std::string(x.value ? "V" : "K") + " (sequence 1, KV head 1, token " +
                                    std::to_string(x.token) + ", channel 3; slot " + std::to_string(slot);
        EXPECT_TRUE(contains(message, element)) << what << ": expected " << element << " in\n" << message;
        EXPECT_TRUE(contains(message, x.role)) << what << "\n" << message;
        EXPECT_TRUE(contains(message, ": 1 of ")) << what << "\n" << message;
        EXPECT_TRUE(contains(message, " stored values (K and V) differ from the CPU append's")) << what << "\n"
                                                                                                << message;
        EXPECT_FALSE(contains(message, "byte")) << what << ": a flat byte offset again\n" << message;
        EXPECT_TRUE(contains(message, kReplay)) << what << "\n" << message;
        if (block_size > 0) {
          EXPECT_TRUE(contains(message, " = block ")) << what << "\n" << message;
        }
        if (x.token == 8) std::cout << what << ": " << message << "\n";
      }
    }
}

TEST(CheckMessages, AppendFailuresKeepTheSeed) {
  const testing::DecodeCase c{{5, 9}, 1, 4, 2, 16};
  const ::testing::AssertionResult threw = testing::append_matches_reference(
      [](KvCache&, const Tensor<float>&, const Tensor<float>&) { throw std::runtime_error("boom"); }, KvDtype::fp32, c);
  ASSERT_FALSE(threw);
  EXPECT_TRUE(contains(threw.message(), "append threw boom")) << threw.message();
  EXPECT_TRUE(contains(threw.message(), kReplay)) << threw.message();

  const ::testing::AssertionResult lengths = testing::append_matches_reference(
      [](KvCache& cache, const Tensor<float>& k, const Tensor<float>& v) {
        for (int64_t layer = 0; layer < cache.shape().num_layers; ++layer) cache.store_appended(k, v, layer);
      },  // writes the token, forgets to commit the lengths
      KvDtype::fp32, c);
  ASSERT_FALSE(lengths);
  EXPECT_TRUE(contains(lengths.message(), "lengths[0] = 4, expected 5")) << lengths.message();
  EXPECT_TRUE(contains(lengths.message(), kReplay)) << lengths.message();
}

// ---- tests/support/int8_check.h ----

TEST(CheckMessages, Int8DecodeCountsNaNFirst) {
  const testing::Int8Case c{{9, 4}, 2, 4, 2, 36, KeyScaling::per_token, 1};
  const DecodeFn decode = [](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    out = convert<float>(decode_reference(q, cache));
    out[(0 * 4 + 1) * 36 + 2] = kNaN;  // (sequence 0, head 1, channel 2)
  };
  const KvAppendFn append = [](KvCache& cache, const Tensor<float>& k, const Tensor<float>& v) { cache.append(k, v); };
  const ::testing::AssertionResult result = testing::int8_decode_within_budget(decode, append, c);
  ASSERT_FALSE(result);
  const std::string message = result.message();
  EXPECT_TRUE(contains(message, "1 of 288 outputs is NaN, first at (sequence 0, head 1, channel 2)")) << message;
  expect_before(message, "outputs is NaN", "relative error");
  EXPECT_TRUE(contains(message, "over the 287 finite outputs")) << message;
  EXPECT_TRUE(contains(message, kReplay)) << message;
  std::cout << message << "\n";
}

TEST(CheckMessages, Int8DecodeListsAFewWrongOutputs) {
  const testing::Int8Case c{{9, 4}, 2, 4, 2, 36, KeyScaling::per_token, 1};
  const DecodeFn decode = [](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    out = convert<float>(decode_reference(q, cache));
    for (int64_t i = 0; i < out.size(); ++i) out[i] += 1.0f;  // every output wrong
  };
  const KvAppendFn append = [](KvCache& cache, const Tensor<float>& k, const Tensor<float>& v) { cache.append(k, v); };
  const ::testing::AssertionResult result = testing::int8_decode_within_budget(decode, append, c);
  ASSERT_FALSE(result);
  const std::string message = result.message();
  EXPECT_EQ(lines_starting_with(message, "    (sequence "), int(kReportedMismatches)) << message;
  EXPECT_TRUE(contains(message, "288 of 288 outputs differ from the float64 decode")) << message;
  EXPECT_TRUE(contains(message, "… and 285 more")) << message;
  EXPECT_TRUE(contains(message, "(sequence 0, head 0, channel 0): out = ")) << message;
  std::cout << message << "\n";
}

// ---- tests/support/prefill_steps_check.h ----

TEST(CheckMessages, MaskedScoresCountNaNFirst) {
  const testing::AttentionCase c{2, 1, 7, 16, true};
  const ::testing::AssertionResult result = testing::scores_match_oracle(
      [](const Tensor<float>& q, const Tensor<float>& k, bool, Tensor<float>& scores) {
        const int64_t H = q.dim(0), L = q.dim(1), d = q.dim(2);
        scores = Tensor<float>({H, L, L});
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < L; ++i)
            for (int64_t j = 0; j < L; ++j) {
              double dot = 0.0;
              for (int64_t x = 0; x < d; ++x) dot += double(q[(h * L + i) * d + x]) * k[j * d + x];
              scores[(h * L + i) * L + j] =
                  j > i ? -std::numeric_limits<float>::infinity() : float(dot / std::sqrt(double(d)));
            }
        scores[(1 * L + 2) * L + 5] = kNaN;  // a masked score left at the poison: (head 1, query 2, key 5)
      },
      c);
  ASSERT_FALSE(result);
  const std::string message = result.message();
  EXPECT_TRUE(contains(message, "1 of 98 outputs is NaN, first at (head 1, query 2, key 5)")) << message;
  expect_before(message, "outputs is NaN", "masked elements");
  EXPECT_TRUE(contains(message, kReplay)) << message;
}

// ---- tests/support/schedules.h ----

TEST(CheckMessages, ThreadOrderExplanationNamesTheLaunchAsTheLaunch) {
  simt::LaunchRecord launch;
  launch.kernel = "inferlab::sim::softmax_rows_kernel(float const*, float*, int)";
  launch.launched_at = "softmax_rows.cu:70";
  const std::string text = testing::thread_order_explanation(launch);
  EXPECT_TRUE(contains(text,
                       "softmax_rows.cu:70 is where kernel 'inferlab::sim::softmax_rows_kernel(float const*, "
                       "float*, int)' was launched, not the faulty line"))
      << text;
  EXPECT_TRUE(contains(text, "a race or a read of memory no thread wrote")) << text;
  EXPECT_TRUE(contains(text, "missing __syncthreads()/__syncwarp()")) << text;
  EXPECT_TRUE(contains(text, "out-of-bounds read")) << text;
  EXPECT_TRUE(contains(text, "uninitialised")) << text;
  EXPECT_TRUE(contains(text, "racecheck, memcheck or initcheck")) << text;
  EXPECT_FALSE(contains(text, "missing __syncthreads/__syncwarp?")) << "the old single guess";
  // The grader takes the first "simt: " in a test's output for the emulator's own report: the
  // explanation must not look like one.
  EXPECT_FALSE(contains(text, "simt: ")) << text;
  EXPECT_TRUE(contains(testing::thread_order_explanation({}), "No kernel launch was recorded")) << text;
}

TEST(CheckMessages, HostScheduleCheckCountsAndNamesTheDifference) {
  const ::testing::AssertionResult result = testing::host_same_under_schedules(
      [](Tensor<float>& out) {
        out.fill(1.0f);
        if (simt::schedule().order == simt::Order::reverse) out[1 * 6 + 2] = 2.0f;  // (row 1, col 2)
      },
      {4, 6}, nullptr, testing::default_schedules(), testing::element_name({4, 6}, {"row", "col"}));
  ASSERT_FALSE(result);
  const std::string message = result.message();
  EXPECT_TRUE(contains(message, "the result depends on the thread order: 1 of 24 output elements differ")) << message;
  EXPECT_TRUE(contains(message, "the first at (row 1, col 2) is 1 under forward but 2 under reverse")) << message;
  EXPECT_TRUE(contains(message, testing::thread_order_explanation(testing::last_launch()))) << message;
  std::cout << message << "\n";
}

}  // namespace
}  // namespace inferlab
