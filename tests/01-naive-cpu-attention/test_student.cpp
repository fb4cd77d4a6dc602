// Chapter 01 exercises, graded: the student's functions against the float64 oracle and the
// hand-computed counts. Each TEST is one grading unit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "01-naive-cpu-attention/ch01.h"
#include "common/compare.h"
#include "kernels/attention/attention.h"
#include "tests/support/attention_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

// The student's single-head function driven over heads (with the GQA mapping), so the shared
// attention check can grade it on every odd shape.
void student_multi_head(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                        Tensor<float>& out) {
  const AttentionShape s = attention_shape(q, k, v, causal);
  const size_t head = static_cast<size_t>(s.seq_len * s.head_dim);
  for (int64_t h = 0; h < s.num_heads; ++h) {
    const size_t g = static_cast<size_t>(h / s.group_size());
    student::attention_single_head(q.span().subspan(size_t(h) * head, head), k.span().subspan(g * head, head),
                                   v.span().subspan(g * head, head), s.seq_len, s.head_dim, causal,
                                   out.span().subspan(size_t(h) * head, head));
  }
}

// ---- 1.1 softmax_row ----

void expect_softmax_matches(std::vector<float> row) {
  std::vector<double> expected(row.size());
  double max_value = -std::numeric_limits<double>::infinity();
  for (float x : row) max_value = std::max(max_value, double(x));
  double sum = 0.0;
  for (size_t i = 0; i < row.size(); ++i) sum += (expected[i] = std::exp(double(row[i]) - max_value));
  for (double& e : expected) e /= sum;
  student::softmax_row(row);
  double max_abs_logit = 0.0;
  for (float x : row)
    if (std::isfinite(x)) max_abs_logit = std::max(max_abs_logit, std::abs(double(x)));
  const Comparison c = compare_to_oracle(row, expected, attention_tolerance(Precision::fp32, max_abs_logit));
  EXPECT_TRUE(c.ok) << c.report();
}

TEST(Ch01Softmax, RandomRows) {
  testing::SeededRng rng;
  for (int n : {1, 2, 7, 33, 257}) {
    std::vector<float> row(static_cast<size_t>(n));
    rng.fill_normal(row, 0.0f, 3.0f);
    expect_softmax_matches(row);
  }
}

TEST(Ch01Softmax, ExtremeLogitsDoNotOverflow) {
  expect_softmax_matches({1000.0f, 999.0f, -1000.0f});
  expect_softmax_matches({-1000.0f, -1001.0f, -999.5f});
  expect_softmax_matches({89.0f, 88.0f, 0.0f});  // exp(89) overflows float without the max
}

TEST(Ch01Softmax, MaskedEntriesBecomeZero) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> row = {0.5f, -inf, 1.5f, -inf};
  student::softmax_row(row);
  EXPECT_EQ(row[1], 0.0f);
  EXPECT_EQ(row[3], 0.0f);
  EXPECT_NEAR(row[0] + row[2], 1.0f, 1e-6f);
}

// ---- 1.2 attention_single_head ----

TEST(Ch01Attention, OddShapes) {
  for (const testing::AttentionCase& c : testing::odd_attention_cases(127)) {
    if (c.logit_scale != 1.0f) continue;
    EXPECT_TRUE(testing::attention_matches_oracle(student_multi_head, Precision::fp32, c));
  }
}

TEST(Ch01Attention, CausalMask) {
  for (int64_t L : {2, 31, 33}) {
    EXPECT_TRUE(testing::attention_matches_oracle(student_multi_head, Precision::fp32, {2, 2, L, 64, true}));
  }
}

TEST(Ch01Attention, ExtremeLogits) {
  for (const testing::AttentionCase& c : testing::odd_attention_cases(33)) {
    if (c.logit_scale == 1.0f) continue;
    EXPECT_TRUE(testing::attention_matches_oracle(student_multi_head, Precision::fp32, c));
  }
}

TEST(Ch01Attention, SeqLenOne) {
  EXPECT_TRUE(testing::attention_matches_oracle(student_multi_head, Precision::fp32, {1, 1, 1, 96, true}));
  EXPECT_TRUE(testing::attention_matches_oracle(student_multi_head, Precision::fp32, {1, 1, 1, 96, false}));
}

// ---- 1.3 count_prefill_cost: compared with common/cost.h and with numbers worked by hand ----

TEST(Ch01Cost, MatchesHandComputedValues) {
  const Cost c = student::count_prefill_cost(2048, 128, 2.0);
  EXPECT_DOUBLE_EQ(c.flops, 2147483648.0);   // 4·2048²·128
  EXPECT_DOUBLE_EQ(c.bytes, 10485760.0);     // 2·(2048² + 4·2048·128)
  EXPECT_DOUBLE_EQ(c.arithmetic_intensity(), 204.8);
}

TEST(Ch01Cost, MatchesTheLibraryOnOtherShapes) {
  for (int64_t L : {1, 7, 100, 4096})
    for (int64_t d : {64, 80, 128})
      for (double bytes : {2.0, 4.0}) {
        const Cost expected = prefill_attention_cost({1, 1, L, d}, TrafficModel::article, bytes);
        const Cost got = student::count_prefill_cost(L, d, bytes);
        EXPECT_DOUBLE_EQ(got.flops, expected.flops) << "L=" << L << " d=" << d;
        EXPECT_DOUBLE_EQ(got.bytes, expected.bytes) << "L=" << L << " d=" << d << " bytes=" << bytes;
      }
}

}  // namespace
}  // namespace inferlab
