// Chapter 08 prediction questions, graded: each TEST asks one question of
// exercises/08-real-model/predictions.h over several models and formats (SmolLM2 as shipped, other
// shapes, fresh ones) and compares the student's numbers, computed in the sandbox, with values
// worked out in predictions_check.h matrix by matrix.
#include <gtest/gtest.h>

#include "08-real-model/predictions.h"
#include "tests/08-real-model/predictions_check.h"
#include "tests/support/prediction_isolated.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch08Predict.WeightBytesPerToken", "predict_weight_bytes_per_token"},
    {"Ch08Predict.TokensPerSecondCeiling", "predict_tokens_per_second_ceiling"},
    {"Ch08Predict.KvBytesPerToken", "predict_kv_bytes_per_token"},
    {"Ch08Predict.WeightToKvRatio", "predict_weight_to_kv_ratio"},
});

using testing::isolated;

TEST(Ch08Predict, WeightBytesPerToken) {
  EXPECT_TRUE(testing::ch08::check_weight_bytes_per_token(isolated(student::predict_weight_bytes_per_token)));
}

TEST(Ch08Predict, TokensPerSecondCeiling) {
  EXPECT_TRUE(testing::ch08::check_tokens_per_second_ceiling(isolated(student::predict_tokens_per_second_ceiling)));
}

TEST(Ch08Predict, KvBytesPerToken) {
  EXPECT_TRUE(testing::ch08::check_kv_bytes_per_token(isolated(student::predict_kv_bytes_per_token)));
}

TEST(Ch08Predict, WeightToKvRatio) {
  EXPECT_TRUE(testing::ch08::check_weight_to_kv_ratio(isolated(student::predict_weight_to_kv_ratio)));
}

}  // namespace
}  // namespace inferlab
