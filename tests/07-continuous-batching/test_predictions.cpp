// Chapter 07 prediction questions, graded: each TEST asks one question of
// exercises/07-continuous-batching/predictions.h over several scenarios (the lesson's, odd ones,
// fresh ones) and compares the student's numbers, computed in the sandbox, with values worked
// out in predictions_check.h from first principles.
#include <gtest/gtest.h>

#include "07-continuous-batching/predictions.h"
#include "tests/07-continuous-batching/predictions_check.h"
#include "tests/support/prediction_isolated.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch07Predict.DecodeStepAi", "predict_decode_step_ai"},
    {"Ch07Predict.DecodeTokensPerSecond", "predict_decode_tokens_per_second"},
    {"Ch07Predict.KvEqualsWeightsBatch", "predict_kv_equals_weights_batch"},
});

using testing::isolated;

TEST(Ch07Predict, DecodeStepAi) {
  EXPECT_TRUE(testing::ch07::check_decode_step_ai(isolated(student::predict_decode_step_ai)));
}

TEST(Ch07Predict, DecodeTokensPerSecond) {
  EXPECT_TRUE(testing::ch07::check_decode_tokens_per_second(isolated(student::predict_decode_tokens_per_second)));
}

TEST(Ch07Predict, KvEqualsWeightsBatch) {
  EXPECT_TRUE(testing::ch07::check_kv_equals_weights_batch(isolated(student::predict_kv_equals_weights_batch)));
}

}  // namespace
}  // namespace inferlab
