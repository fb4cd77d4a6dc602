// Wrong answers to chapter 11's exercises, run through the very checks that grade the students
// (tests/11-compute-roof/student_check.h): each mistake must be rejected with a message that names
// it, and the same sketch without the mistake must pass. The mistakes:
//   11.1 a repack that keeps each output's 32 codes together (GGUF's order, not chunked); one that
//        packs the rows without the last group's padding; one that stores the signed codes as they
//        are (not q + 128);
//   11.2 a micro-kernel that multiplies and adds instead of one fma a block; one that sums each
//        chunk of 4 codes in float (partial sums converted early: other bits); one that skips the
//        padding outputs (left unwritten: NaN).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "11-compute-roof/ch11.h"
#include "common/half.h"
#include "tests/11-compute-roof/student_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

namespace ch11 = testing::ch11;
using ::testing::HasSubstr;

// A wrong answer must fail its check, and the failure must say which mistake it is.
void expect_rejected(const ::testing::AssertionResult& result, const std::string& mistake) {
  EXPECT_FALSE(result) << "a wrong answer (" << mistake << ") passed";
  if (!result) std::cout << result.message() << "\n\n";  // what a student would read
  EXPECT_THAT(std::string(result.message()), HasSubstr(mistake)) << result.message();
}

// ---- 11.1 ----

enum class RepackMistake { none, gguf_order, no_padding, signed_codes };

std::vector<uint8_t> repack(std::span<const uint8_t> rows, int64_t out, int64_t in, RepackMistake mistake) {
  const int64_t blocks = in / 32, groups = mistake == RepackMistake::no_padding ? out / 16 : (out + 15) / 16;
  const uint8_t flip = mistake == RepackMistake::signed_codes ? 0x00 : 0x80;
  std::vector<uint8_t> packed(size_t(groups * blocks * 544), flip);
  for (int64_t block = 0; block < groups * blocks; ++block) std::fill_n(packed.begin() + block * 544, 32, uint8_t{0});
  for (int64_t row = 0; row < std::min(out, groups * 16); ++row)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* from = rows.data() + (row * blocks + b) * 34;
      uint8_t* to = packed.data() + ((row / 16) * blocks + b) * 544;
      const int64_t o = row % 16;
      std::memcpy(to + 2 * o, from, 2);
      if (mistake == RepackMistake::gguf_order)
        for (int64_t j = 0; j < 32; ++j) to[32 + 32 * o + j] = uint8_t(from[2 + j] ^ flip);
      else
        for (int64_t c = 0; c < 8; ++c)
          for (int64_t t = 0; t < 4; ++t) to[32 + 64 * c + 4 * o + t] = uint8_t(from[2 + 4 * c + t] ^ flip);
    }
  return packed;
}

ch11::RepackRunFn repack_with(RepackMistake mistake) {
  return [mistake](std::span<const ch11::RepackCase> cases) {
    ch11::Answers<std::vector<uint8_t>> got;
    for (const ch11::RepackCase& c : cases) got.answers.push_back(repack(c.rows, c.out, c.in, mistake));
    return got;
  };
}

TEST(WrongCh11Repack, TheRightSketchPasses) {
  testing::SeededRng rng;
  EXPECT_TRUE(ch11::repacks_match(repack_with(RepackMistake::none), {ch11::worked_repack_case()}));
  EXPECT_TRUE(ch11::repacks_match(repack_with(RepackMistake::none), ch11::random_repack_cases(rng)));
}

TEST(WrongCh11Repack, GgufOrderIsRejected) {
  expect_rejected(ch11::repacks_match(repack_with(RepackMistake::gguf_order), {ch11::worked_repack_case()}),
                  "the codes are in GGUF's order");
}

TEST(WrongCh11Repack, SignedCodesAreRejected) {
  expect_rejected(ch11::repacks_match(repack_with(RepackMistake::signed_codes), {ch11::worked_repack_case()}),
                  "stored as q + 128");
}

TEST(WrongCh11Repack, MissingPaddingIsRejected) {
  testing::SeededRng rng;
  expect_rejected(ch11::repacks_match(repack_with(RepackMistake::no_padding), ch11::random_repack_cases(rng)),
                  "groups of");
}

// ---- 11.2 ----

enum class KernelMistake { none, mul_then_add, float_chunks, skip_padding };

void kernel(const ch11::KernelCase& c, KernelMistake mistake, float* y) {
  const int64_t blocks = c.in / 32;
  float acc[4][16] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = c.packed.data() + b * 544;
    const uint8_t* codes = block + 32;  // q + 128
    for (int r = 0; r < c.num_rows; ++r) {
      const student::ActivationBlock& x = c.act[size_t(r * blocks + b)];
      for (int o = 0; o < 16; ++o) {
        uint16_t d_bits;
        std::memcpy(&d_bits, block + 2 * o, 2);
        const float dd = half_bits_to_float(d_bits) * x.d;
        int32_t sum = 0;
        float chunks = 0.0f;
        for (int c8 = 0; c8 < 8; ++c8) {
          int32_t four = 0;
          for (int t = 0; t < 4; ++t) four += (int32_t(codes[64 * c8 + 4 * o + t]) - 128) * x.codes[4 * c8 + t];
          sum += four;
          chunks += dd * float(four);
        }
        if (mistake == KernelMistake::mul_then_add) {
          // volatile: GCC would contract a + b·c into the very fma the contract asks for
          // (-ffp-contract=fast is its default), and the mistake would vanish.
          const volatile float product = dd * float(sum);
          acc[r][o] = acc[r][o] + product;
        }
        else if (mistake == KernelMistake::float_chunks)
          acc[r][o] += chunks;
        else
          acc[r][o] = std::fma(dd, float(sum), acc[r][o]);
      }
    }
  }
  for (int r = 0; r < c.num_rows; ++r)
    for (int o = 0; o < 16; ++o)
      if (mistake != KernelMistake::skip_padding || o < c.out) y[r * 16 + o] = acc[r][o];
}

ch11::KernelRunFn kernel_with(KernelMistake mistake) {
  return [mistake](std::span<const ch11::KernelCase> cases) {
    ch11::Answers<std::vector<float>> got;
    for (const ch11::KernelCase& c : cases) {
      std::vector<float> y(size_t(16 * c.num_rows), std::numeric_limits<float>::quiet_NaN());
      kernel(c, mistake, y.data());
      got.answers.push_back(std::move(y));
    }
    return got;
  };
}

TEST(WrongCh11MicroKernel, TheRightSketchPasses) {
  testing::SeededRng rng;
  EXPECT_TRUE(ch11::kernels_match(kernel_with(KernelMistake::none), ch11::random_kernel_cases(rng)));
}

TEST(WrongCh11MicroKernel, MultiplyThenAddIsRejected) {
  testing::SeededRng rng;
  expect_rejected(ch11::kernels_match(kernel_with(KernelMistake::mul_then_add), ch11::random_kernel_cases(rng)),
                  "close but not the same bits");
}

TEST(WrongCh11MicroKernel, FloatSumsOfChunksAreRejected) {
  testing::SeededRng rng;
  expect_rejected(ch11::kernels_match(kernel_with(KernelMistake::float_chunks), ch11::random_kernel_cases(rng)),
                  "close but not the same bits");
}

TEST(WrongCh11MicroKernel, UnwrittenPaddingIsRejected) {
  testing::SeededRng rng;
  expect_rejected(ch11::kernels_match(kernel_with(KernelMistake::skip_padding), ch11::random_kernel_cases(rng)),
                  "never written");
}

}  // namespace
}  // namespace inferlab
