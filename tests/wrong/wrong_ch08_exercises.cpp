// Wrong answers to chapter 08's CPU exercises, run through the very checks that grade the students
// (tests/08-real-model/student_check.h): each mistake must be rejected with a message that names
// it, and the same sketch without the mistake must pass. One switch per mistake:
//   8.1 a Q4_1 decoder that reads the nibbles as adjacent pairs (byte j = values 2j, 2j + 1); one
//       with the low and high nibbles swapped; one that forgets the minimum m;
//   8.2 a dot product that drops the minimum's term m·s; one with the nibbles swapped; one that
//       takes the codes as Q4_0's q − 8; one that adds dd·sum + m·s per block in plain fp32 (the
//       right value to within rounding, but not the contract's bits);
//   8.3 a merge loop that merges the first pair from the left that has a rank, whatever its rank;
//       one whose ties go to the rightmost occurrence; one that stops after one merge; one that
//       sweeps the word once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "common/half.h"
#include "tests/08-real-model/student_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

namespace ch08 = testing::ch08;
using quant::BlockQ4_1;
using quant::BlockQ8_1;
using ::testing::HasSubstr;

// A wrong answer must fail its check, and the failure must say which mistake it is.
void expect_rejected(const ::testing::AssertionResult& result, const std::string& mistake) {
  EXPECT_FALSE(result) << "a wrong answer (" << mistake << ") passed";
  if (!result) std::cout << result.message() << "\n\n";  // what a student would read
  EXPECT_THAT(std::string(result.message()), HasSubstr(mistake)) << result.message();
}

// ---- 8.1 ----

enum class DecodeMistake { none, adjacent_pairs, swapped_nibbles, no_minimum };

ch08::DequantizeBatchFn decoder(DecodeMistake mistake) {
  return [mistake](std::span<const std::vector<BlockQ4_1>> rows) {
    ch08::Answers<std::vector<float>> out;
    for (const std::vector<BlockQ4_1>& row : rows) {
      std::vector<float>& values = out.answers.emplace_back(row.size() * 32, std::nanf(""));
      for (size_t b = 0; b < row.size(); ++b) {
        const float d = half_bits_to_float(row[b].d);
        const float m = mistake == DecodeMistake::no_minimum ? 0.0f : half_bits_to_float(row[b].m);
        for (int j = 0; j < 16; ++j) {
          const int lo = row[b].qs[j] & 15, hi = row[b].qs[j] >> 4;
          float* block = values.data() + b * 32;
          if (mistake == DecodeMistake::adjacent_pairs) {
            block[2 * j] = float(lo) * d + m, block[2 * j + 1] = float(hi) * d + m;
          } else if (mistake == DecodeMistake::swapped_nibbles) {
            block[j] = float(hi) * d + m, block[j + 16] = float(lo) * d + m;
          } else {
            block[j] = float(lo) * d + m, block[j + 16] = float(hi) * d + m;
          }
        }
      }
    }
    return out;
  };
}

// Every check of the graded 8.1 tests, on @p decode.
std::vector<::testing::AssertionResult> decode_checks(const ch08::DequantizeBatchFn& decode) {
  testing::SeededRng rng;
  return {ch08::rows_decode(decode, ch08::worked_example_rows()),
          ch08::rows_decode(decode, ch08::random_rows(rng, 100)),
          ch08::rows_decode(decode, ch08::random_rows(rng, 50, {.large_minimum = true}))};
}

TEST(WrongCh08Dequantize, TheSketchWithoutMistakesPasses) {
  for (const auto& result : decode_checks(decoder(DecodeMistake::none))) EXPECT_TRUE(result);
}

TEST(WrongCh08Dequantize, AdjacentNibblePairsAreRejected) {
  for (const auto& result : decode_checks(decoder(DecodeMistake::adjacent_pairs)))
    expect_rejected(result, "the nibbles read as adjacent pairs");
}

TEST(WrongCh08Dequantize, SwappedNibblesAreRejected) {
  for (const auto& result : decode_checks(decoder(DecodeMistake::swapped_nibbles)))
    expect_rejected(result, "the nibbles swapped");
}

TEST(WrongCh08Dequantize, AForgottenMinimumIsRejected) {
  for (const auto& result : decode_checks(decoder(DecodeMistake::no_minimum)))
    expect_rejected(result, "the minimum m is added to every value");
}

// ---- 8.2 ----

enum class DotMistake { none, no_minimum_term, swapped_nibbles, signed_codes, unfused_sum };

ch08::DotBatchFn dot_product(DotMistake mistake) {
  return [mistake](std::span<const ch08::DotCase> cases) {
    ch08::Answers<float> out;
    for (const ch08::DotCase& c : cases) {
      float acc = 0.0f;
      for (size_t b = 0; b < c.w.size(); ++b) {
        int32_t sum = 0;
        for (int j = 0; j < 16; ++j) {
          int lo = c.w[b].qs[j] & 15, hi = c.w[b].qs[j] >> 4;
          if (mistake == DotMistake::swapped_nibbles) std::swap(lo, hi);
          if (mistake == DotMistake::signed_codes) lo -= 8, hi -= 8;
          sum += lo * c.x[b].qs[j] + hi * c.x[b].qs[j + 16];
        }
        const float dd = half_bits_to_float(c.w[b].d) * half_bits_to_float(c.x[b].d);
        const float ms = half_bits_to_float(c.w[b].m) * half_bits_to_float(c.x[b].s);
        if (mistake == DotMistake::unfused_sum) {
          acc += dd * float(sum) + ms;  // each product rounded, then the sums: other bits
          continue;
        }
        acc = std::fma(dd, float(sum), acc);
        if (mistake != DotMistake::no_minimum_term)
          acc = std::fma(half_bits_to_float(c.w[b].m), half_bits_to_float(c.x[b].s), acc);
      }
      out.answers.push_back(acc);
    }
    return out;
  };
}

std::vector<::testing::AssertionResult> dot_checks(const ch08::DotBatchFn& dot) {
  testing::SeededRng rng;
  return {ch08::dots_match(dot, ch08::random_dots(rng, 200, {.large_minimum = true})),
          ch08::dots_match(dot, ch08::random_dots(rng, 200, {.min_blocks = 1, .max_blocks = 64})),
          ch08::dots_match(dot, ch08::random_dots(rng, 200, {.min_blocks = 1, .max_blocks = 64}, true))};
}

TEST(WrongCh08Dot, TheSketchWithoutMistakesPasses) {
  EXPECT_TRUE(ch08::dots_match(dot_product(DotMistake::none), ch08::worked_example_dots()));
  for (const auto& result : dot_checks(dot_product(DotMistake::none))) EXPECT_TRUE(result);
}

TEST(WrongCh08Dot, ADroppedMinimumTermIsRejected) {
  expect_rejected(ch08::dots_match(dot_product(DotMistake::no_minimum_term), ch08::worked_example_dots()),
                  "the minimum's term is missing");
  for (const auto& result : dot_checks(dot_product(DotMistake::no_minimum_term)))
    expect_rejected(result, "the minimum's term is missing");
}

TEST(WrongCh08Dot, SwappedNibblesAreRejected) {
  for (const auto& result : dot_checks(dot_product(DotMistake::swapped_nibbles)))
    expect_rejected(result, "the nibbles are swapped");
}

TEST(WrongCh08Dot, Q4_0CodesAreRejected) {
  for (const auto& result : dot_checks(dot_product(DotMistake::signed_codes)))
    expect_rejected(result, "the codes are taken as Q4_0's q − 8");
}

TEST(WrongCh08Dot, AnotherRoundingOrderIsNotTheContract) {
  // Within rounding of the exact value (the float64 bound passes) yet other bits than the
  // contract's chain: the graded tests ask for the lab's bits, and say why.
  testing::SeededRng rng;
  expect_rejected(ch08::dots_match(dot_product(DotMistake::unfused_sum),
                                   ch08::random_dots(rng, 400, {.min_blocks = 8, .max_blocks = 64})),
                  "within fp32 rounding of the exact sum, but not the contract's bits");
}

// ---- 8.3 ----

ch08::BpeBatchFn merger(ch08::MergeRule rule) {
  return [rule](std::span<const ch08::BpeCase> cases) {
    ch08::Answers<std::vector<std::string>> out;
    for (const ch08::BpeCase& c : cases) out.answers.push_back(ch08::merge_by(c.symbols, c.vocabulary->ranks, rule));
    return out;
  };
}

std::vector<::testing::AssertionResult> merge_checks(const ch08::BpeBatchFn& merge) {
  testing::SeededRng rng;
  std::vector<::testing::AssertionResult> results = {
      ch08::merges_match(merge, ch08::worked_example_words()), ch08::merges_match(merge, ch08::tie_words()),
      ch08::merges_match(merge, ch08::rank_words()),
      ch08::merges_match(merge, ch08::random_words(rng, 30, 30, {.shuffled = true}))};
  std::string problem;
  if (const auto smollm2 = ch08::smollm2_vocabulary(INFERLAB_SMOLLM2_GGUF, problem))
    results.push_back(ch08::merges_match(merge, ch08::smollm2_words(rng, smollm2, 500)));
  else
    ADD_FAILURE() << problem;
  return results;
}

TEST(WrongCh08Bpe, TheRuleWrittenInTheCheckPasses) {
  for (const auto& result : merge_checks(merger(ch08::MergeRule::lowest_rank_leftmost))) EXPECT_TRUE(result);
}

TEST(WrongCh08Bpe, MergingLeftToRightInsteadOfByRankIsRejected) {
  const auto results = merge_checks(merger(ch08::MergeRule::first_pair_left_to_right));
  for (size_t i = 1; i < results.size(); ++i)  // the worked example's words happen to come out right
    expect_rejected(results[i], "your tokens are what merging the first pair from the left that has a rank gives");
}

TEST(WrongCh08Bpe, RightmostTiesAreRejected) {
  const auto results = merge_checks(merger(ch08::MergeRule::lowest_rank_rightmost));
  expect_rejected(results[1], "your tokens are what ties going to the rightmost occurrence gives");  // "aaa", spaces
  expect_rejected(results.back(), "your tokens are what ties going to the rightmost occurrence gives");  // SmolLM2
}

TEST(WrongCh08Bpe, StoppingAfterOneMergeIsRejected) {
  for (const auto& result : merge_checks(merger(ch08::MergeRule::single_merge)))
    expect_rejected(result, "your tokens are what one merge only gives");
}

TEST(WrongCh08Bpe, OneSweepOverTheWordIsRejected) {
  // Every check rejects it; where a sweep's tokens are also another mistake's, the message names
  // that one (the first it recognises), so one of the checks at least must name the sweep.
  const auto results = merge_checks(merger(ch08::MergeRule::single_sweep));
  std::string messages;
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_FALSE(results[i]) << "check " << i << " passed a single sweep";
    messages += results[i].message();
  }
  EXPECT_THAT(messages, HasSubstr("your tokens are what one sweep over the word gives"));
}

}  // namespace
}  // namespace inferlab
