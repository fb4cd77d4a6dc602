// Wrong chapter-02 CUDA kernels (tests/wrong/kernels/wrong_ch02_kernels.cu), run by the SIMT
// emulator through the very checks that grade the chapter's exercises
// (tests/support/prefill_steps_check.h): each mistake must be rejected — a missing barrier as a
// race between thread orders that names the kernel, a barrier some threads never reach as a
// kernel fault with its line (not a hang), a tile-edge or reduction mistake by the float64
// oracle on odd shapes — and the same kernels without the mistake must pass.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "simt/simt.h"
#include "tests/support/prefill_steps_check.h"
#include "tests/wrong/kernels/wrong_ch02_kernels.h"

namespace inferlab {
namespace {

using testing::AttentionCase;
using testing::GemmCase;
using ::testing::HasSubstr;
using testing::SoftmaxCase;
namespace fixtures = sim::wrong_ch02;
using fixtures::GemmFixture;
using fixtures::ScoresFixture;
using fixtures::SoftmaxFixture;

testing::ScoresFn scores_with(ScoresFixture fixture) {
  return [fixture](const Tensor<float>& q, const Tensor<float>& k, bool causal, Tensor<float>& s) {
    fixtures::scores(fixture, q, k, causal, s);
  };
}
testing::SoftmaxFn softmax_with(SoftmaxFixture fixture) {
  return
      [fixture](const Tensor<float>& s, Tensor<float>& p, int threads) { fixtures::softmax(fixture, s, p, threads); };
}
testing::GemmFn gemm_with(GemmFixture fixture) {
  return
      [fixture](const Tensor<float>& a, const Tensor<float>& b, Tensor<float>& c) { fixtures::gemm(fixture, a, b, c); };
}

// ---- the controls: without the mistakes, the fixtures pass the same checks ----

TEST(WrongCh02Gpu, FixturesWithoutMistakesPass) {
  for (const AttentionCase& c : {AttentionCase{8, 2, 17, 64, true}, AttentionCase{4, 4, 33, 80, false}})
    EXPECT_TRUE(testing::scores_match_oracle(scores_with(ScoresFixture::correct), c));
  for (const SoftmaxCase& c : {SoftmaxCase{5, 33, 128}, SoftmaxCase{33, 33, 32, true}, SoftmaxCase{3, 300, 1024}})
    EXPECT_TRUE(testing::softmax_matches_oracle(softmax_with(SoftmaxFixture::correct), c));
  for (const GemmCase& c : testing::odd_gemm_cases())
    EXPECT_TRUE(testing::gemm_matches_oracle(gemm_with(GemmFixture::correct), c));
}

// ---- GEMM: barriers ----

// A missing barrier: racecheck names the two lines at the first launch (default build); where the
// checks are not compiled (asan/tsan presets), the schedules give different bytes.
void expect_race_reported(const std::string& message) {
  if (simt::checks_compiled())
    EXPECT_THAT(message, HasSubstr("simt: racecheck: "));
  else
    EXPECT_THAT(message, HasSubstr("depends on the thread order"));
  EXPECT_THAT(message, HasSubstr("wrong_ch02_kernels.cu:"));
}

TEST(WrongCh02Gpu, GemmMissingLoadBarrierIsARace) {
  const auto result = testing::gemm_matches_oracle(gemm_with(GemmFixture::missing_load_barrier), {33, 31, 17});
  ASSERT_FALSE(result);
  expect_race_reported(result.message());
  EXPECT_THAT(result.message(), HasSubstr("gemm_missing_load_barrier"));
  std::cout << result.message() << "\n";
}

TEST(WrongCh02Gpu, GemmMissingReuseBarrierIsARace) {
  const auto result = testing::gemm_matches_oracle(gemm_with(GemmFixture::missing_reuse_barrier), {33, 31, 64});
  ASSERT_FALSE(result);
  expect_race_reported(result.message());
  EXPECT_THAT(result.message(), HasSubstr("gemm_missing_reuse_barrier"));
  std::cout << result.message() << "\n";
  // With a single K step there is no next step to overwrite the tiles: why the graded shapes
  // have K > 16.
  EXPECT_TRUE(testing::gemm_matches_oracle(gemm_with(GemmFixture::missing_reuse_barrier), {33, 31, 16}));
  int rejected = 0;
  for (const GemmCase& c : testing::odd_gemm_cases())
    rejected += !testing::gemm_matches_oracle(gemm_with(GemmFixture::missing_reuse_barrier), c);
  EXPECT_GT(rejected, 0) << "the graded shapes (odd_gemm_cases) must expose the race";
}

TEST(WrongCh02Gpu, GemmBarrierInDivergentBranchIsReportedNotHung) {
  // 33 × 31: the edge blocks hold threads outside C, which skip the barriers.
  const auto result = testing::gemm_matches_oracle(gemm_with(GemmFixture::barrier_in_branch), {33, 31, 40});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("threw"));
  EXPECT_THAT(result.message(), HasSubstr("gemm_barrier_in_branch"));
  EXPECT_THAT(result.message(), HasSubstr("__syncthreads() at "));
  EXPECT_THAT(result.message(), HasSubstr("wrong_ch02_kernels.cu:"));
  std::cout << result.message() << "\n";
  // The fault is cleared: the next launch works.
  EXPECT_TRUE(testing::gemm_matches_oracle(gemm_with(GemmFixture::correct), {17, 17, 17}));
  // When every thread of every block lies inside C the branch is uniform, and the mistake hides.
  EXPECT_TRUE(testing::gemm_matches_oracle(gemm_with(GemmFixture::barrier_in_branch), {32, 48, 40}));
}

// ---- GEMM: tile edges ----

TEST(WrongCh02Gpu, GemmDroppingThePartialKTileFailsOnOddK) {
  const auto fixture = gemm_with(GemmFixture::k_tiles_floor);
  const auto result = testing::gemm_matches_oracle(fixture, {17, 33, 31});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("DOES NOT MATCH the float64 oracle"));
  std::cout << result.message() << "\n";
  EXPECT_TRUE(testing::gemm_matches_oracle(fixture, {17, 33, 48})) << "K a multiple of 16 hides the mistake";
  int rejected = 0;
  for (const GemmCase& c : testing::odd_gemm_cases()) rejected += !testing::gemm_matches_oracle(fixture, c);
  EXPECT_GE(rejected, 30) << "odd_gemm_cases has K = 64 in only 6 of its 36 shapes";
}

TEST(WrongCh02Gpu, GemmFloorGridLeavesTheEdgeOfCUnwritten) {
  const auto fixture = gemm_with(GemmFixture::grid_floor);
  const auto result = testing::gemm_matches_oracle(fixture, {33, 31, 17});
  ASSERT_FALSE(result);
  // the poison was never overwritten: counted first, with the first one's position
  EXPECT_THAT(result.message(), HasSubstr("outputs are NaN, first at (row "));
  EXPECT_TRUE(testing::gemm_matches_oracle(fixture, {32, 64, 17})) << "M, N multiples of 16 hide the mistake";
}

// ---- softmax: the reductions ----

TEST(WrongCh02Gpu, SoftmaxWithWrongShuffleOffsetsFails) {
  const auto fixture = softmax_with(SoftmaxFixture::offsets_from_8);
  const auto result = testing::softmax_matches_oracle(fixture, {5, 33, 128});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("DOES NOT MATCH the float64 oracle"));
  std::cout << result.message() << "\n";
  // Rows of at most 16 elements live in lanes 0-15 of warp 0, where the half butterfly suffices.
  EXPECT_TRUE(testing::softmax_matches_oracle(fixture, {5, 16, 128}));
}

TEST(WrongCh02Gpu, SoftmaxWithoutTheCrossWarpStepFails) {
  const auto fixture = softmax_with(SoftmaxFixture::no_cross_warp);
  for (const SoftmaxCase& c : {SoftmaxCase{5, 33, 128}, SoftmaxCase{3, 300, 1024}, SoftmaxCase{40, 300, 256, true}}) {
    const auto result = testing::softmax_matches_oracle(fixture, c);
    EXPECT_FALSE(result) << c.name();
    if (!result) std::cout << result.message() << "\n";
  }
  // With one warp per block there is nothing to combine: why the graded tests vary the block.
  EXPECT_TRUE(testing::softmax_matches_oracle(fixture, {5, 300, 32}));
  EXPECT_TRUE(testing::softmax_matches_oracle(fixture, {5, 32, 128})) << "rows no longer than a warp hide it";
}

// ---- scores: GQA and the mask ----

TEST(WrongCh02Gpu, ScoresWithTheWrongKvHeadFailOnGroupedQueryAttention) {
  const auto fixture = scores_with(ScoresFixture::gqa_modulo);
  const auto result = testing::scores_match_oracle(fixture, {8, 2, 17, 64, false});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("DOES NOT MATCH the float64 oracle"));
  EXPECT_TRUE(testing::scores_match_oracle(fixture, {4, 4, 17, 64, false})) << "no GQA: h % H = h / 1";
  EXPECT_TRUE(testing::scores_match_oracle(fixture, {8, 1, 17, 64, false})) << "one KV head: both give 0";
}

TEST(WrongCh02Gpu, ScoresMaskingTheDiagonalFail) {
  const auto result = testing::scores_match_oracle(scores_with(ScoresFixture::mask_diagonal), {2, 2, 17, 64, true});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("DOES NOT MATCH the float64 oracle"));
  std::cout << result.message() << "\n";
}

}  // namespace
}  // namespace inferlab
