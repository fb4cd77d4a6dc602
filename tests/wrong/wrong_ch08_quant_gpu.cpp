// Wrong chapter-08 quantized matmuls on the device (tests/wrong/kernels/wrong_ch08_quant_kernels.cu),
// run by the SIMT emulator through the very checks that cuda/quant_matmul passes
// (tests/08-real-model/quant_device_check.h: fresh data, poisoned output, the bits of
// quant_matmul_cpu's scalar kernel, the float64 oracle's bound). Each mistake must be rejected, a
// kernel without one must pass — another kernel structure that keeps the contract gives the same
// bits — and the shapes that hide a mistake are shown: why the suite runs several blocks per row,
// every format, and asks for bits, not only for a tolerance.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>

#include "tests/08-real-model/quant_device_check.h"
#include "tests/wrong/kernels/wrong_ch08_quant_kernels.h"

namespace inferlab {
namespace {

using quant::GgmlType;
using testing::QuantCase;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fixtures = sim::wrong_ch08;
using fixtures::QuantFixture;

::testing::AssertionResult check(QuantFixture fixture, const QuantCase& c) {
  testing::SeededRng rng;
  return testing::quant_matmul_matches_cpu(
      [fixture](const Tensor<float>& x, const quant::BlockMatrix& w, Tensor<float>& y) {
        fixtures::quant_matmul(fixture, x, w, y);
      },
      c, rng);
}

const GgmlType kTypes[] = {GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_1};

TEST(WrongCh08QuantGpu, FixtureWithoutMistakesPasses) {
  for (const GgmlType type : kTypes)
    for (const QuantCase c : {QuantCase{type, 3, 33, 544}, QuantCase{type, 1, 7, 96}, QuantCase{type, 5, 9, 288, true}})
      EXPECT_TRUE(check(QuantFixture::correct, c)) << c.name();
}

TEST(WrongCh08QuantGpu, LanesSplittingTheBlocksAreRejectedByTheBitsNotByTheBound) {
  for (const GgmlType type : kTypes) {
    const auto result = check(QuantFixture::lanes_over_blocks, {type, 3, 33, 544});
    ASSERT_FALSE(result) << quant::to_string(type);
    EXPECT_THAT(result.message(), HasSubstr("bits differ from quant_matmul_cpu (scalar)"));
    // Another order of correctly rounded additions: as close to the exact sum as the contract's.
    EXPECT_THAT(result.message(), Not(HasSubstr("float64 oracle")));
    if (type == GgmlType::q4_1) std::cout << result.message() << "\n";
  }
  // One block a row: every lane but 0 adds 0, and x + 0 is x — the mistake hides.
  EXPECT_TRUE(check(QuantFixture::lanes_over_blocks, {GgmlType::q8_0, 3, 33, 32}));
}

TEST(WrongCh08QuantGpu, DroppingTheQ4_1MinimumTermIsRejected) {
  const auto result = check(QuantFixture::no_min_term, {GgmlType::q4_1, 3, 33, 96});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("DOES NOT MATCH the float64 oracle"));
  std::cout << result.message() << "\n";
  EXPECT_FALSE(check(QuantFixture::no_min_term, {GgmlType::q4_1, 3, 7, 32}));  // 3 rows: s = 0 in all three is ~1e-9
  // Q8_0 and Q4_0 have no minimum: only a Q4_1 case shows it.
  EXPECT_TRUE(check(QuantFixture::no_min_term, {GgmlType::q8_0, 3, 33, 96}));
  EXPECT_TRUE(check(QuantFixture::no_min_term, {GgmlType::q4_0, 3, 33, 96}));
}

TEST(WrongCh08QuantGpu, AdjacentNibblePairsAreRejected) {
  for (const GgmlType type : {GgmlType::q4_0, GgmlType::q4_1}) {
    const auto result = check(QuantFixture::adjacent_nibbles, {type, 3, 7, 96});
    ASSERT_FALSE(result) << quant::to_string(type);
    EXPECT_THAT(result.message(), HasSubstr("DOES NOT MATCH the float64 oracle"));
  }
  // Q8_0 has no nibbles.
  EXPECT_TRUE(check(QuantFixture::adjacent_nibbles, {GgmlType::q8_0, 3, 7, 96}));
}

}  // namespace
}  // namespace inferlab
