// Chapter 03 prediction questions, graded: each TEST asks one question of
// exercises/03-kv-cache-decode/predictions.h over several scenarios (the lesson's, odd ones,
// fresh ones) and compares the student's numbers, computed in the sandbox, with values worked
// out in predictions_check.h from first principles.
#include <gtest/gtest.h>

#include "03-kv-cache-decode/predictions.h"
#include "tests/03-kv-cache-decode/predictions_check.h"
#include "tests/support/prediction_isolated.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch03Predict.DecodeAi", "predict_decode_ai"},
    {"Ch03Predict.KvBytesPerToken", "predict_kv_bytes_per_token"},
    {"Ch03Predict.DecodeStepTime", "predict_decode_step_ms"},
    {"Ch03Predict.CachedTokensThatFit", "predict_max_cached_tokens"},
});

using testing::isolated;

TEST(Ch03Predict, DecodeAi) { EXPECT_TRUE(testing::ch03::check_decode_ai(isolated(student::predict_decode_ai))); }

TEST(Ch03Predict, KvBytesPerToken) {
  EXPECT_TRUE(testing::ch03::check_kv_bytes_per_token(isolated(student::predict_kv_bytes_per_token)));
}

TEST(Ch03Predict, DecodeStepTime) {
  EXPECT_TRUE(testing::ch03::check_decode_step_ms(isolated(student::predict_decode_step_ms)));
}

TEST(Ch03Predict, CachedTokensThatFit) {
  EXPECT_TRUE(testing::ch03::check_max_cached_tokens(isolated(student::predict_max_cached_tokens)));
}

}  // namespace
}  // namespace inferlab
