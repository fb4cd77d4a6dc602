#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/compare.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

TEST(Compare, ExactMatchPasses) {
  testing::SeededRng rng;
  Tensor<float> out = rng.normal_tensor({3, 5});
  const Tensor<double> ref = convert<double>(out);
  const Comparison c = compare_to_oracle(out, ref, tolerance_for(Precision::fp32));
  EXPECT_TRUE(c.ok) << c.report();
  EXPECT_EQ(c.rel_frobenius, 0.0);
}

TEST(Compare, NaNNeverPasses) {
  testing::SeededRng rng;
  Tensor<float> out = rng.normal_tensor({4, 4});
  const Tensor<double> ref = convert<double>(out);
  out[5] = std::numeric_limits<float>::quiet_NaN();
  const Comparison c = compare_to_oracle(out, ref, Tolerance{1e30, 1e30});  // even a huge tolerance
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.non_finite, 1);
  ASSERT_FALSE(c.first.empty());
  EXPECT_EQ(c.first[0].index, 5);
  EXPECT_EQ(c.first[0].position, (Shape{1, 1}));
  EXPECT_NE(c.report().find("[1, 1]"), std::string::npos) << c.report();
}

TEST(Compare, InfinityNeverPasses) {
  Tensor<float> out({2}, 1.0f);
  out[1] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(compare_to_oracle(out, Tensor<double>({2}, 1.0), Tolerance{1e30, 1e30}).ok);
}

TEST(Compare, ReportsRelativeFrobeniusAndFirstMismatches) {
  Tensor<float> out({2, 3}, 1.0f);
  Tensor<double> ref({2, 3}, 1.0);
  out[4] = 1.5f;  // position [1, 1]
  const Comparison c = compare_to_oracle(out, ref, tolerance_for(Precision::fp32));
  EXPECT_FALSE(c.ok);
  EXPECT_NEAR(c.rel_frobenius, 0.5 / std::sqrt(6.0), 1e-12);
  EXPECT_DOUBLE_EQ(c.max_abs_error, 0.5);
  EXPECT_EQ(c.mismatches, 1);
  ASSERT_EQ(c.first.size(), 1u);
  EXPECT_EQ(c.first[0].position, (Shape{1, 1}));
}

TEST(Compare, SmallRoundingPassesWithinTolerance) {
  testing::SeededRng rng;
  Tensor<float> out = rng.normal_tensor({64});
  Tensor<double> ref = convert<double>(out);
  for (int64_t i = 0; i < ref.size(); ++i) ref[i] *= 1.0 + 1e-7;  // well inside fp32's 1e-5
  EXPECT_TRUE(compare_to_oracle(out, ref, tolerance_for(Precision::fp32)).ok);
  for (int64_t i = 0; i < ref.size(); ++i) ref[i] *= 1.0 + 1e-3;  // outside fp32, inside fp16
  EXPECT_FALSE(compare_to_oracle(out, ref, tolerance_for(Precision::fp32)).ok);
  EXPECT_TRUE(compare_to_oracle(out, ref, tolerance_for(Precision::fp16)).ok);
}

TEST(Compare, ShapeMismatchIsAnError) {
  EXPECT_THROW(compare_to_oracle(Tensor<float>({2, 3}), Tensor<double>({3, 2}), tolerance_for(Precision::fp32)),
               std::invalid_argument);
}

TEST(Tolerance, OneHeaderOrderedByPrecision) {
  EXPECT_LT(tolerance_for(Precision::fp32).rel_frobenius, tolerance_for(Precision::tf32).rel_frobenius);
  EXPECT_LT(tolerance_for(Precision::tf32).rel_frobenius, tolerance_for(Precision::fp16).rel_frobenius);
  EXPECT_LE(tolerance_for(Precision::fp16).rel_frobenius, tolerance_for(Precision::bf16).rel_frobenius);
  // Ordinary logits leave the base tolerance alone; large ones widen it.
  EXPECT_EQ(attention_tolerance(Precision::fp32, 5.0).rel_frobenius, 1e-5);
  EXPECT_GT(attention_tolerance(Precision::fp32, 1000.0).rel_frobenius, 1e-5);
}

}  // namespace
}  // namespace inferlab
