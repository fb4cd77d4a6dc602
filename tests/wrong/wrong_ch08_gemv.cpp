// Wrong chapter-08 GEMV kernels (tests/wrong/kernels/wrong_ch08_gemv_kernels.cu), run by the SIMT
// emulator through the very check that grades exercise 8.4 (tests/08-real-model/student_check.h:
// every launch under several thread orders with y poisoned, each output against the float64
// oracle within the derived fp32 bound): each mistake must be rejected with a message that names
// it, and the same kernel without the mistake must pass.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "tests/08-real-model/student_check.h"
#include "tests/wrong/kernels/wrong_ch08_gemv_kernels.h"

namespace inferlab {
namespace {

namespace ch08 = testing::ch08;
using ::testing::HasSubstr;
namespace fixtures = sim::wrong_ch08;
using fixtures::GemvFixture;

ch08::GemvFn gemv_with(GemvFixture fixture) {
  return [fixture](std::span<const quant::BlockQ8_0> w, int64_t out, std::span<const quant::BlockQ8_0> x,
                   Tensor<float>& y, int rows_per_block) { fixtures::gemv(fixture, w, out, x, y, rows_per_block); };
}

// The graded tests' shapes, all of them.
std::vector<ch08::GemvCase> every_graded_case() {
  std::vector<ch08::GemvCase> cases = ch08::odd_gemv_cases();
  for (const ch08::GemvCase& c : std::vector<ch08::GemvCase>{{1, 64, 1},
                                                             {10, 64, 3},
                                                             {11, 160, 5},
                                                             {17, 96, 8},
                                                             {33, 64, 32},
                                                             {9, 32 * 33, 4},
                                                             {5, 32 * 65, 2},
                                                             {7, 96, 4, ch08::GemvData::extreme},
                                                             {33, 1056, 4, ch08::GemvData::extreme}})
    cases.push_back(c);
  return cases;
}

// How many of the graded shapes @p fixture fails (those of at least @p min_blocks blocks a row and,
// with @p quantized_only, only those of the quantizer's data: extreme data has zero scales, which
// can zero a lane's whole share), each failure's message checked for @p mistake.
int rejected_shapes(GemvFixture fixture, const std::string& mistake, int64_t min_blocks = 1,
                    bool quantized_only = false) {
  int rejected = 0;
  for (const ch08::GemvCase& c : every_graded_case()) {
    if (c.in_features / 32 < min_blocks || (quantized_only && c.data != ch08::GemvData::quantized)) continue;
    const ::testing::AssertionResult result = ch08::gemv_matches_oracle(gemv_with(fixture), c);
    if (result) continue;
    if (rejected++ == 0) std::cout << result.message() << "\n";  // what a student would read
    EXPECT_THAT(std::string(result.message()), HasSubstr(mistake)) << c.name();
  }
  return rejected;
}

TEST(WrongCh08Gemv, TheKernelWithoutMistakesPasses) {
  for (const ch08::GemvCase& c : every_graded_case())
    EXPECT_TRUE(ch08::gemv_matches_oracle(gemv_with(GemvFixture::correct), c)) << c.name();
}

TEST(WrongCh08Gemv, AGridThatSkipsTheLastPartialBlockIsRejected) {
  // Every shape whose out_features is not a multiple of rows_per_block leaves rows NaN.
  EXPECT_GE(rejected_shapes(GemvFixture::grid_rounds_down, "is in the last, partial grid block"), 10);
}

TEST(WrongCh08Gemv, LanesThatSkipTheTailBlocksAreRejected) {
  // Rows of 33 and 65 blocks lose their last block(s).
  EXPECT_GE(rejected_shapes(GemvFixture::lanes_skip_tail, "without "), 4);
}

TEST(WrongCh08Gemv, AMissingActivationScaleIsRejected) {
  EXPECT_EQ(rejected_shapes(GemvFixture::no_activation_scale, "without the activations' scales d_x"),
            int(every_graded_case().size()));
}

TEST(WrongCh08Gemv, UnsynchronizedAtomicsDependOnTheThreadOrder) {
  // Lane 0 zeroes y[row] while the other lanes add into it: under another thread order their sums
  // land on the poison or are wiped — the schedules' comparison catches it wherever a lane other
  // than 0 has a block (a row of one block is lane 0's alone: its sum does not depend on the order).
  int multi_block = 0;
  for (const ch08::GemvCase& c : every_graded_case())
    multi_block += c.in_features > 32 && c.data == ch08::GemvData::quantized;
  EXPECT_EQ(rejected_shapes(GemvFixture::unsynchronized_atomics, "thread order", 2, true), multi_block);
}

}  // namespace
}  // namespace inferlab
