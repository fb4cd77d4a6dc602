// Chapter 12 prediction questions, graded: each TEST asks one question of
// exercises/12-speculative-decoding/predictions.h over several scenarios (the lesson's, odd and
// fresh ones) and compares the student's answers, computed in the sandbox, with values worked out
// in predictions_check.h term by term.
#include <gtest/gtest.h>

#include "12-speculative-decoding/predictions.h"
#include "tests/12-speculative-decoding/predictions_check.h"
#include "tests/support/prediction_isolated.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch12Predict.TokensPerVerificationStep", "predict_tokens_per_step"},
    {"Ch12Predict.TheSpeedUp", "predict_speedup"},
    {"Ch12Predict.TheAcceptanceOfADeterministicGuess", "predict_guess_acceptance"},
    {"Ch12Predict.TheAcceptanceRateOfASampledGuess", "predict_acceptance_rate"},
    {"Ch12Predict.WhetherGreedySpeculationChangesTheOutput", "predict_greedy_speculation_changes_output"},
});

using testing::isolated;

TEST(Ch12Predict, TokensPerVerificationStep) {
  EXPECT_TRUE(testing::ch12::check_tokens_per_step(isolated(student::predict_tokens_per_step)));
}

TEST(Ch12Predict, TheSpeedUp) {
  EXPECT_TRUE(testing::ch12::check_speedup(isolated(student::predict_speedup)));
}

TEST(Ch12Predict, TheAcceptanceOfADeterministicGuess) {
  EXPECT_TRUE(testing::ch12::check_guess_acceptance(isolated(student::predict_guess_acceptance)));
}

TEST(Ch12Predict, TheAcceptanceRateOfASampledGuess) {
  EXPECT_TRUE(testing::ch12::check_acceptance_rate(isolated(student::predict_acceptance_rate)));
}

TEST(Ch12Predict, WhetherGreedySpeculationChangesTheOutput) {
  EXPECT_TRUE(testing::ch12::check_greedy_unchanged(isolated(student::predict_greedy_speculation_changes_output)));
}

}  // namespace
}  // namespace inferlab
