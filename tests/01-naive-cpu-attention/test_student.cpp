// Chapter 01 exercises, graded: the student's functions against the float64 oracle and against
// counts worked out in this file. Each TEST is one grading unit. Every call into the student's
// library runs in a sandboxed child process (tests/support/isolation.h): this process draws the
// inputs, computes the oracle and decides; the student's code only ever returns outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "01-naive-cpu-attention/ch01.h"
#include "common/compare.h"
#include "kernels/attention/attention.h"
#include "tests/support/attention_check.h"
#include "tests/support/expect_all.h"
#include "tests/support/isolation.h"
#include "tests/support/seeded.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch01Softmax", "softmax_row"},
    {"Ch01Attention", "attention_single_head"},
    {"Ch01Cost", "count_prefill_cost"},
});

using testing::output_bytes;
using testing::run_isolated;

// The student's single-head function driven over heads (with the GQA mapping), in the sandbox,
// so the shared attention check can grade it on every odd shape.
void student_multi_head(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                        Tensor<float>& out) {
  const AttentionShape s = attention_shape(q, k, v, causal);
  const size_t head = static_cast<size_t>(s.seq_len * s.head_dim);
  run_isolated([&] {
    for (int64_t h = 0; h < s.num_heads; ++h) {
      const size_t g = static_cast<size_t>(h / s.group_size());
      student::attention_single_head(q.span().subspan(size_t(h) * head, head), k.span().subspan(g * head, head),
                                     v.span().subspan(g * head, head), s.seq_len, s.head_dim, causal,
                                     out.span().subspan(size_t(h) * head, head));
    }
  }, {output_bytes(out.span())});
}

// ---- 1.1 softmax_row ----

// The float64 softmax of @p row (−Inf entries give exactly 0).
std::vector<double> softmax_oracle(const std::vector<float>& row) {
  double max_value = -std::numeric_limits<double>::infinity();
  for (float x : row) max_value = std::max(max_value, double(x));
  std::vector<double> expected(row.size());
  double sum = 0.0;
  for (size_t i = 0; i < row.size(); ++i) sum += (expected[i] = std::exp(double(row[i]) - max_value));
  for (double& e : expected) e /= sum;
  return expected;
}

void expect_softmax_matches(std::vector<float> row) {
  const std::vector<double> expected = softmax_oracle(row);
  double max_abs_logit = 0.0;
  for (float x : row)
    if (std::isfinite(x)) max_abs_logit = std::max(max_abs_logit, std::abs(double(x)));
  std::vector<float> got = row;
  run_isolated([&] { student::softmax_row(got); }, {output_bytes(std::span<float>(got))});
  const Comparison c = compare_to_oracle(got, expected, attention_tolerance(Precision::fp32, max_abs_logit));
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
  // Worked by hand: without subtracting the max, exp(1000) and exp(89) overflow float.
  expect_softmax_matches({1000.0f, 999.0f, -1000.0f});
  expect_softmax_matches({-1000.0f, -1001.0f, -999.5f});
  expect_softmax_matches({89.0f, 88.0f, 0.0f});
  // And fresh rows around ±1000: a row near +1000 overflows exp() unshifted, one near −1000 underflows to 0/0.
  testing::SeededRng rng;
  for (float centre : {1000.0f, -1000.0f, 300.0f}) {
    std::vector<float> row(static_cast<size_t>(rng.integer(3, 40)));
    for (float& x : row) x = centre + rng.normal(0.0f, 4.0f);
    expect_softmax_matches(row);
  }
}

TEST(Ch01Softmax, MaskedEntriesBecomeZero) {
  const float inf = std::numeric_limits<float>::infinity();
  // Worked by hand: the masked entries are exactly 0 and the rest is softmax({0.5, 1.5}).
  expect_softmax_matches({0.5f, -inf, 1.5f, -inf});
  // Fresh rows with a random set of masked entries (at least one left finite).
  testing::SeededRng rng;
  for (int n : {2, 9, 64}) {
    std::vector<float> row(static_cast<size_t>(n));
    rng.fill_normal(row, 0.0f, 2.0f);
    const size_t keep = static_cast<size_t>(rng.integer(0, n - 1));
    for (size_t i = 0; i < row.size(); ++i)
      if (i != keep && rng.integer(0, 1) == 1) row[i] = -inf;
    const std::vector<double> expected = softmax_oracle(row);
    std::vector<float> got = row;
    run_isolated([&] { student::softmax_row(got); }, {output_bytes(std::span<float>(got))});
    size_t wrong = 0, first = 0;  // masked entries that are not exactly 0, and the first of them
    for (size_t i = 0; i < row.size(); ++i)
      if (std::isinf(row[i]) && !(got[i] == 0.0f) && wrong++ == 0) first = i;
    EXPECT_EQ(wrong, 0u) << wrong << " masked entries of a row of " << n << " are not 0; the first, entry " << first
                         << ", is " << got[first];
    const Comparison c = compare_to_oracle(got, expected, tolerance_for(Precision::fp32));
    EXPECT_TRUE(c.ok) << c.report();
  }
}

// ---- 1.2 attention_single_head ----

// The shapes of odd_attention_cases(@p max_seq_len) with (@p extreme) or without extreme logits.
std::vector<testing::AttentionCase> shapes(int64_t max_seq_len, bool extreme) {
  std::vector<testing::AttentionCase> kept;
  for (const testing::AttentionCase& c : testing::odd_attention_cases(max_seq_len))
    if ((c.logit_scale != 1.0f) == extreme) kept.push_back(c);
  return kept;
}

TEST(Ch01Attention, OddShapes) {
  testing::expect_all(shapes(127, false), [](const testing::AttentionCase& c) {
    return testing::attention_matches_oracle(student_multi_head, Precision::fp32, c);
  });
}

TEST(Ch01Attention, CausalMask) {
  for (int64_t L : {2, 31, 33}) {
    EXPECT_TRUE(testing::attention_matches_oracle(student_multi_head, Precision::fp32, {2, 2, L, 64, true}));
  }
}

TEST(Ch01Attention, ExtremeLogits) {
  testing::expect_all(shapes(33, true), [](const testing::AttentionCase& c) {
    return testing::attention_matches_oracle(student_multi_head, Precision::fp32, c);
  });
}

TEST(Ch01Attention, SeqLenOne) {
  EXPECT_TRUE(testing::attention_matches_oracle(student_multi_head, Precision::fp32, {1, 1, 1, 96, true}));
  EXPECT_TRUE(testing::attention_matches_oracle(student_multi_head, Precision::fp32, {1, 1, 1, 96, false}));
}

// ---- 1.3 count_prefill_cost: against counts worked out here, never a function the student can call ----

// The article's model, one head: Q·Kᵀ and P·V are L²·d multiply-adds each; bytes are Q, K, V and
// O (4·L·d elements) plus the L×L scores written once.
Cost cost_worked_out(int64_t L, int64_t d, double bytes_per_element) {
  const double l = double(L), dd = double(d);
  return Cost{2.0 * 2.0 * l * l * dd, bytes_per_element * (l * l + 4.0 * l * dd)};
}

Cost student_cost(int64_t L, int64_t d, double bytes_per_element) {
  Cost got{-1.0, -1.0};
  run_isolated([&] { got = student::count_prefill_cost(L, d, bytes_per_element); }, {output_bytes(got)});
  return got;
}

TEST(Ch01Cost, MatchesHandComputedValues) {
  const Cost c = student_cost(2048, 128, 2.0);
  EXPECT_DOUBLE_EQ(c.flops, 2147483648.0);   // 4·2048²·128
  EXPECT_DOUBLE_EQ(c.bytes, 10485760.0);     // 2·(2048² + 4·2048·128)
  EXPECT_DOUBLE_EQ(c.arithmetic_intensity(), 204.8);
  // The same count at a fresh L near the worked one (a table of the case above must not pass).
  testing::SeededRng rng;
  const int64_t L = rng.integer(1000, 3000), d = 128;
  const Cost got = student_cost(L, d, 2.0);
  EXPECT_DOUBLE_EQ(got.flops, cost_worked_out(L, d, 2.0).flops) << "L=" << L;
  EXPECT_DOUBLE_EQ(got.bytes, cost_worked_out(L, d, 2.0).bytes) << "L=" << L;
}

TEST(Ch01Cost, MatchesTheCountOnFreshShapes) {
  testing::SeededRng rng;
  for (int i = 0; i < 12; ++i) {
    const int64_t L = i == 0 ? 1 : rng.integer(2, 20000);
    const int64_t d = rng.integer(1, 256);
    const double bytes = std::vector<double>{1.0, 2.0, 4.0}[static_cast<size_t>(rng.integer(0, 2))];
    const Cost expected = cost_worked_out(L, d, bytes);
    const Cost got = student_cost(L, d, bytes);
    EXPECT_DOUBLE_EQ(got.flops, expected.flops) << "L=" << L << " d=" << d;
    EXPECT_DOUBLE_EQ(got.bytes, expected.bytes) << "L=" << L << " d=" << d << " bytes=" << bytes;
  }
}

}  // namespace
}  // namespace inferlab
