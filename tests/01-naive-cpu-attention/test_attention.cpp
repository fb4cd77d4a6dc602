// Chapter 01: every registered CPU version of prefill attention against the float64 oracle on
// odd shapes, plus hand-computed cases and input validation.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/registry.h"
#include "tests/support/attention_check.h"

namespace inferlab {
namespace {

using testing::AttentionCase;
using testing::VersionCase;

// ---- every cpu version × every odd shape --------------------------------------------------

class CpuAttention : public ::testing::TestWithParam<VersionCase> {};

TEST_P(CpuAttention, MatchesFloat64Oracle) {
  const VersionCase& c = GetParam();
  EXPECT_TRUE(testing::attention_matches_oracle(c.version->run, c.version->precision, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch01, CpuAttention, ::testing::ValuesIn(testing::version_cases(Backend::cpu, 1)),
                         testing::version_case_name);

// ---- hand-computed cases -----------------------------------------------------------------

// One head, L = 2, d = 1 (scale 1): q = [0, 1], k = [1, 2], v = [10, 20].
// Row 0: scores [0, 0] -> weights [1/2, 1/2] -> 15.
// Row 1: scores [1, 2] -> weights [1/(1+e), e/(1+e)] -> (10 + 20e)/(1+e).
// Causal row 0 sees only key 0 -> 10; causal row 1 is unchanged.
TEST(NaiveAttention, HandComputedTinyCase) {
  const Tensor<float> q({1, 2, 1}, std::vector<float>{0, 1});
  const Tensor<float> k({1, 2, 1}, std::vector<float>{1, 2});
  const Tensor<float> v({1, 2, 1}, std::vector<float>{10, 20});
  const double e = std::exp(1.0);
  Tensor<float> out({1, 2, 1});
  out.poison();
  attention_cpu_naive(q, k, v, false, out);
  EXPECT_NEAR(out[0], 15.0, 1e-5);
  EXPECT_NEAR(out[1], (10 + 20 * e) / (1 + e), 1e-5);
  out.poison();
  attention_cpu_naive(q, k, v, true, out);
  EXPECT_NEAR(out[0], 10.0, 1e-5);
  EXPECT_NEAR(out[1], (10 + 20 * e) / (1 + e), 1e-5);
}

// GQA mapping by hand: 2 query heads share 1 KV head; with identical queries they must give
// identical outputs, and with one key the output is that key's value row.
TEST(NaiveAttention, SingleKeyReturnsItsValueForEveryHead) {
  const Tensor<float> q({4, 1, 2}, std::vector<float>{1, 2, -3, 4, 5, -6, 7, 8});
  const Tensor<float> k({2, 1, 2}, std::vector<float>{0.5f, 0.5f, -1, 1});
  const Tensor<float> v({2, 1, 2}, std::vector<float>{3, -4, 7, 9});
  Tensor<float> out({4, 1, 2});
  out.poison();
  attention_cpu_naive(q, k, v, false, out);
  const float expected[] = {3, -4, 3, -4, 7, 9, 7, 9};  // heads 0,1 -> KV 0; heads 2,3 -> KV 1
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], expected[i]) << i;
}

TEST(NaiveAttention, OracleAgreesWithHandComputation) {
  const Tensor<double> q({1, 2, 1}, std::vector<double>{0, 1});
  const Tensor<double> k({1, 2, 1}, std::vector<double>{1, 2});
  const Tensor<double> v({1, 2, 1}, std::vector<double>{10, 20});
  const double e = std::exp(1.0);
  const Tensor<double> out = attention_reference(q, k, v, false);
  EXPECT_DOUBLE_EQ(out[0], 15.0);
  EXPECT_NEAR(out[1], (10 + 20 * e) / (1 + e), 1e-12);
}

// ---- bad input ----------------------------------------------------------------------------

void expect_invalid(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, const Shape& out_shape,
                    const std::string& fragment) {
  Tensor<float> out(out_shape);
  try {
    attention_cpu_naive(q, k, v, false, out);
    ADD_FAILURE() << "no exception; expected one mentioning '" << fragment << "'";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(NaiveAttention, BadShapesAreRejectedWithAClearMessage) {
  const Tensor<float> q({4, 8, 16}), kv({2, 8, 16});
  expect_invalid(Tensor<float>({8, 16}), kv, kv, {4, 8, 16}, "q.shape = [8, 16]: must have 3 dimensions");
  expect_invalid(q, Tensor<float>({3, 8, 16}), Tensor<float>({3, 8, 16}), {4, 8, 16},
                 "num_heads = 4: must be a multiple of num_kv_heads = 3");
  expect_invalid(q, kv, Tensor<float>({2, 8, 17}), {4, 8, 16}, "v.shape = [2, 8, 17]: must be [2, 8, 16]");
  expect_invalid(q, Tensor<float>({2, 9, 16}), Tensor<float>({2, 9, 16}), {4, 8, 16}, "k.shape = [2, 9, 16]");
  expect_invalid(Tensor<float>({4, 0, 16}), Tensor<float>({2, 0, 16}), Tensor<float>({2, 0, 16}), {4, 0, 16},
                 "seq_len (q.shape[1]) = 0: must be > 0");
  expect_invalid(q, kv, kv, {4, 8, 15}, "out.shape = [4, 8, 15]: must be [4, 8, 16]");
}

TEST(AttentionRegistry, UnknownVersionListsKnownOnes) {
  try {
    find_attention_version("cpu/nonexistent", Backend::cpu);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("cpu/naive"), std::string::npos) << error.what();
  }
  EXPECT_EQ(find_attention_version("cpu/naive", Backend::cpu).chapter, 1);
}

}  // namespace
}  // namespace inferlab
