// Wrong chapter-05 fused-prefill kernels (tests/wrong/kernels/wrong_ch05_kernels.cu), run by the
// SIMT emulator through the very check that the real fused versions pass
// (tests/support/attention_check.h: fresh inputs, poisoned output, the float64 oracle): each
// mistake of the online softmax or of causal tile skipping must be rejected, and the same kernel
// without the mistake must pass. The shapes that hide a mistake are shown too — why the graded
// shapes span several key tiles and include causal ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>

#include "tests/support/attention_check.h"
#include "tests/wrong/kernels/wrong_ch05_kernels.h"

namespace inferlab {
namespace {

using testing::AttentionCase;
using ::testing::HasSubstr;
namespace fixtures = sim::wrong_ch05;
using fixtures::FlashFixture;

AttentionFn flash_with(FlashFixture fixture) {
  return [fixture](const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                   Tensor<float>& out) { fixtures::flash(fixture, q, k, v, causal, out); };
}

::testing::AssertionResult check(FlashFixture fixture, const AttentionCase& c) {
  return testing::attention_matches_oracle(flash_with(fixture), Precision::fp32, c);
}

// Several key tiles (L > 32), GQA, causal and not, and extreme logits.
const AttentionCase kShapes[] = {
    {4, 2, 70, 64, false}, {4, 2, 70, 80, true}, {2, 1, 129, 96, true}, {2, 1, 45, 64, false, 40.0f}};

TEST(WrongCh05, FixtureWithoutMistakesPasses) {
  for (const AttentionCase& c : kShapes) EXPECT_TRUE(check(FlashFixture::correct, c));
  EXPECT_TRUE(check(FlashFixture::correct, {3, 3, 1, 64, true}));
}

TEST(WrongCh05, ForgettingToRescaleTheRunningSumIsRejected) {
  for (const AttentionCase& c : kShapes) {
    const auto result = check(FlashFixture::no_rescale_sum, c);
    EXPECT_FALSE(result) << c.name();
    if (!result) {
      EXPECT_THAT(result.message(), HasSubstr("DOES NOT MATCH the float64 oracle"));
    }
  }
  std::cout << check(FlashFixture::no_rescale_sum, kShapes[0]).message() << "\n";
  // One key tile: the max never changes after the first tile, so the mistake hides.
  EXPECT_TRUE(check(FlashFixture::no_rescale_sum, {2, 1, 31, 64, false}));
}

TEST(WrongCh05, ForgettingToRescaleTheAccumulatorIsRejected) {
  for (const AttentionCase& c : kShapes) EXPECT_FALSE(check(FlashFixture::no_rescale_acc, c)) << c.name();
  EXPECT_TRUE(check(FlashFixture::no_rescale_acc, {2, 1, 32, 64, true})) << "one key tile hides it";
}

TEST(WrongCh05, SkippingTheDiagonalTileIsRejected) {
  const auto result = check(FlashFixture::skip_diagonal_tile, {4, 2, 70, 80, true});
  ASSERT_FALSE(result);
  // the first query tile sees no key at all: counted first, with the first one's position
  EXPECT_THAT(result.message(), HasSubstr("outputs are NaN, first at (head "));
  std::cout << result.message() << "\n";
  EXPECT_TRUE(check(FlashFixture::skip_diagonal_tile, {4, 2, 70, 80, false})) << "only the causal path skips";
}

TEST(WrongCh05, MaskingTheDiagonalKeyIsRejected) {
  const auto result = check(FlashFixture::mask_diagonal_key, {2, 1, 17, 64, true});
  ASSERT_FALSE(result);
  std::cout << result.message() << "\n";
  for (const AttentionCase& c : kShapes) {
    if (c.causal) {
      EXPECT_FALSE(check(FlashFixture::mask_diagonal_key, c)) << c.name();
    }
  }
}

}  // namespace
}  // namespace inferlab
