// Wrong chapter-02 warm-up kernels (tests/wrong/kernels/wrong_ch02_warmup_kernels.cu), run by the
// SIMT emulator through the very checks that grade the warm-ups (tests/support/warmup_check.h):
// each mistake must be rejected — a missing barrier by racecheck naming the kernel's lines, an
// access past the end by memcheck, a grid too small for the data or a tree cut short by the
// float64 oracle — and the same kernels without the mistake must pass.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "simt/simt.h"
#include "tests/support/warmup_check.h"
#include "tests/wrong/kernels/wrong_ch02_warmup_kernels.h"

namespace inferlab {
namespace {

using testing::MatrixCase;
using ::testing::HasSubstr;
using testing::SumCase;
namespace fixtures = sim::wrong_ch02_warmup;
using fixtures::ScaleAddFixture;
using fixtures::SumFixture;
using fixtures::TransposeFixture;

testing::ScaleAddFn scale_add_with(ScaleAddFixture fixture) {
  return [fixture](const Tensor<float>& x, const Tensor<float>& s, const Tensor<float>& b, Tensor<float>& out) {
    fixtures::scale_add(fixture, x, s, b, out);
  };
}
testing::VectorSumFn sum_with(SumFixture fixture) {
  return [fixture](const Tensor<float>& x, Tensor<float>& sum, int threads) {
    fixtures::vector_sum(fixture, x, sum, threads);
  };
}
testing::TransposeFn transpose_with(TransposeFixture fixture) {
  return [fixture](const Tensor<float>& in, Tensor<float>& out) { fixtures::transpose(fixture, in, out); };
}

// memcheck and racecheck are compiled into the default build; the asan/tsan presets leave them
// out (an access past an allocation is then undefined behaviour that the sanitizer reports).
#define SKIP_WITHOUT_CHECKS()                                                                      \
  if (!simt::checks_compiled())                                                                    \
  GTEST_SKIP() << "the emulator's checks are not compiled in this preset (asan/tsan): an access " \
                  "past an allocation would be undefined behaviour here"

// A missing barrier: racecheck names the two lines at the first launch (default build); where the
// checks are not compiled, the schedules give different bytes.
void expect_race_reported(const std::string& message) {
  if (simt::checks_compiled())
    EXPECT_THAT(message, HasSubstr("simt: racecheck: "));
  else
    EXPECT_THAT(message, HasSubstr("depends on the thread order"));
  EXPECT_THAT(message, HasSubstr("wrong_ch02_warmup_kernels.cu:"));
}

// ---- the controls: without the mistakes, the fixtures pass the same checks ----

TEST(WrongCh02Warmup, FixturesWithoutMistakesPass) {
  for (const MatrixCase& c : testing::odd_matrix_cases()) {
    EXPECT_TRUE(testing::scale_add_matches_oracle(scale_add_with(ScaleAddFixture::correct), c));
    EXPECT_TRUE(testing::transpose_matches_oracle(transpose_with(TransposeFixture::correct), c));
  }
  for (const SumCase& c : {SumCase{1, 32}, SumCase{257, 256}, SumCase{100003, 256}, SumCase{5000, 1024}})
    EXPECT_TRUE(testing::vector_sum_matches_oracle(sum_with(SumFixture::correct), c));
}

// ---- W1: bounds and grid stride ----

TEST(WrongCh02Warmup, ScaleAddWithoutABoundsCheckIsReportedByMemcheck) {
  SKIP_WITHOUT_CHECKS();
  // 7 × 33: the edge blocks hold threads past both ends; the first access past an allocation
  // stops the kernel.
  const auto result = testing::scale_add_matches_oracle(scale_add_with(ScaleAddFixture::no_bounds_check), {7, 33});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("simt: memcheck: out-of-bounds "));
  EXPECT_THAT(result.message(), HasSubstr("wrong_ch02_warmup_kernels.cu:"));
  EXPECT_THAT(result.message(), HasSubstr("scale_add_no_bounds_check"));
  std::cout << result.message() << "\n";
  // When the matrix is a whole number of blocks, no thread falls outside and the mistake hides:
  // why the graded shapes are odd.
  EXPECT_TRUE(testing::scale_add_matches_oracle(scale_add_with(ScaleAddFixture::no_bounds_check), {16, 64}));
}

TEST(WrongCh02Warmup, ScaleAddWithoutAGridStrideLeavesTheRestUnwritten) {
  const auto fixture = scale_add_with(ScaleAddFixture::no_grid_stride);
  const auto result = testing::scale_add_matches_oracle(fixture, {70, 300});
  ASSERT_FALSE(result);
  // the poison was never overwritten: counted first, with the first one's position
  EXPECT_THAT(result.message(), HasSubstr("outputs are NaN, first at (row "));
  std::cout << result.message() << "\n";
  EXPECT_TRUE(testing::scale_add_matches_oracle(fixture, {32, 128})) << "a matrix the capped grid covers hides it";
  int rejected = 0;
  for (const MatrixCase& c : testing::odd_matrix_cases()) rejected += !testing::scale_add_matches_oracle(fixture, c);
  EXPECT_GE(rejected, 18) << "odd_matrix_cases must hold shapes wider than 128 or taller than 32";
}

// ---- W2: the barriers and the tree ----

TEST(WrongCh02Warmup, VectorSumMissingTheTreeBarrierIsARace) {
  const auto result = testing::vector_sum_matches_oracle(sum_with(SumFixture::missing_tree_barrier), {1000, 256});
  ASSERT_FALSE(result);
  expect_race_reported(result.message());
  EXPECT_THAT(result.message(), HasSubstr("block_sum"));
  std::cout << result.message() << "\n";
  // With 64 threads the tree has one step, and the warp reads only what it wrote itself: the
  // graded block sizes go up to 1024.
  EXPECT_TRUE(testing::vector_sum_matches_oracle(sum_with(SumFixture::missing_tree_barrier), {1000, 64}));
}

TEST(WrongCh02Warmup, VectorSumMissingTheStoreBarrierIsARace) {
  const auto result = testing::vector_sum_matches_oracle(sum_with(SumFixture::missing_store_barrier), {1000, 256});
  ASSERT_FALSE(result);
  expect_race_reported(result.message());
  std::cout << result.message() << "\n";
  // One warp: no tree step, each lane reads its own partial.
  EXPECT_TRUE(testing::vector_sum_matches_oracle(sum_with(SumFixture::missing_store_barrier), {1000, 32}));
}

TEST(WrongCh02Warmup, VectorSumStoppingTheTreeAt64Fails) {
  const auto fixture = sum_with(SumFixture::tree_stops_at_64);
  const auto result = testing::vector_sum_matches_oracle(fixture, {5000, 256});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("DOES NOT MATCH the float64 oracle"));
  std::cout << result.message() << "\n";
  EXPECT_TRUE(testing::vector_sum_matches_oracle(fixture, {5000, 32})) << "one warp: nothing is left out";
}

// ---- W3: the barrier, the bounds, the swapped blocks ----

TEST(WrongCh02Warmup, TransposeMissingItsBarrierIsARace) {
  const auto result = testing::transpose_matches_oracle(transpose_with(TransposeFixture::missing_barrier), {33, 70});
  ASSERT_FALSE(result);
  expect_race_reported(result.message());
  EXPECT_THAT(result.message(), HasSubstr("transpose_tiled"));
  std::cout << result.message() << "\n";
}

TEST(WrongCh02Warmup, TransposeReadingPastTheEndIsReportedByMemcheck) {
  SKIP_WITHOUT_CHECKS();
  const auto result = testing::transpose_matches_oracle(transpose_with(TransposeFixture::unchecked_read), {33, 31});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("simt: memcheck: out-of-bounds read"));
  EXPECT_THAT(result.message(), HasSubstr("wrong_ch02_warmup_kernels.cu:"));
  std::cout << result.message() << "\n";
  EXPECT_TRUE(testing::transpose_matches_oracle(transpose_with(TransposeFixture::unchecked_read), {64, 32}))
      << "whole tiles hide it";
}

TEST(WrongCh02Warmup, TransposeWithTheBlocksUnswappedFails) {
  const auto fixture = transpose_with(TransposeFixture::blocks_unswapped);
  const auto result = testing::transpose_matches_oracle(fixture, {33, 70});
  ASSERT_FALSE(result);
  std::cout << result.message() << "\n";
  EXPECT_TRUE(testing::transpose_matches_oracle(fixture, {31, 17})) << "one tile: bx = by = 0 hides it";
}

}  // namespace
}  // namespace inferlab
