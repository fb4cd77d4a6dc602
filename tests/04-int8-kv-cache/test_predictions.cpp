// Chapter 04 prediction questions, graded: each TEST asks one question of
// exercises/04-int8-kv-cache/predictions.h over several scenarios (the lesson's, odd ones, fresh
// ones) and compares the student's numbers, computed in the sandbox, with values worked out in
// predictions_check.h from first principles.
#include <gtest/gtest.h>

#include "04-int8-kv-cache/predictions.h"
#include "tests/04-int8-kv-cache/predictions_check.h"
#include "tests/support/prediction_isolated.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch04Predict.Int8KvBytesPerToken", "predict_int8_kv_bytes_per_token"},
    {"Ch04Predict.Int8DecodeSpeedup", "predict_int8_decode_speedup"},
    {"Ch04Predict.Int8RoundingError", "predict_int8_max_abs_error"},
    {"Ch04Predict.Int8KvStepSpeedup", "predict_int8_kv_step_speedup"},
});

using testing::isolated;

TEST(Ch04Predict, Int8KvBytesPerToken) {
  EXPECT_TRUE(testing::ch04::check_int8_kv_bytes_per_token(isolated(student::predict_int8_kv_bytes_per_token)));
}

TEST(Ch04Predict, Int8DecodeSpeedup) {
  EXPECT_TRUE(testing::ch04::check_int8_decode_speedup(isolated(student::predict_int8_decode_speedup)));
}

TEST(Ch04Predict, Int8RoundingError) {
  EXPECT_TRUE(testing::ch04::check_int8_max_abs_error(isolated(student::predict_int8_max_abs_error)));
}

TEST(Ch04Predict, Int8KvStepSpeedup) {
  EXPECT_TRUE(testing::ch04::check_int8_kv_step_speedup(isolated(student::predict_int8_kv_step_speedup)));
}

}  // namespace
}  // namespace inferlab
