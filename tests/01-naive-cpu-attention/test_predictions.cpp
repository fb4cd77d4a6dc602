// Chapter 01 prediction questions, graded: each TEST asks one question of
// exercises/01-naive-cpu-attention/predictions.h over several scenarios (the lesson's, odd ones,
// fresh ones) and compares the student's numbers, computed in the sandbox, with values worked
// out in predictions_check.h from first principles.
#include <gtest/gtest.h>

#include "01-naive-cpu-attention/predictions.h"
#include "tests/01-naive-cpu-attention/predictions_check.h"
#include "tests/support/prediction_isolated.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch01Predict.ArticleAi", "predict_article_ai"},
    {"Ch01Predict.UnfusedAi", "predict_unfused_ai"},
    {"Ch01Predict.FusedAi", "predict_fused_ai"},
    {"Ch01Predict.AttainableOnTheRoofline", "predict_attainable_gflops"},
    {"Ch01Predict.UnfusedTimeFloor", "predict_unfused_time_floor_ms"},
});

using testing::isolated;

TEST(Ch01Predict, ArticleAi) { EXPECT_TRUE(testing::ch01::check_article_ai(isolated(student::predict_article_ai))); }

TEST(Ch01Predict, UnfusedAi) { EXPECT_TRUE(testing::ch01::check_unfused_ai(isolated(student::predict_unfused_ai))); }

TEST(Ch01Predict, FusedAi) { EXPECT_TRUE(testing::ch01::check_fused_ai(isolated(student::predict_fused_ai))); }

TEST(Ch01Predict, AttainableOnTheRoofline) {
  EXPECT_TRUE(testing::ch01::check_attainable(isolated(student::predict_attainable_gflops)));
}

TEST(Ch01Predict, UnfusedTimeFloor) {
  EXPECT_TRUE(testing::ch01::check_time_floor(isolated(student::predict_unfused_time_floor_ms)));
}

}  // namespace
}  // namespace inferlab
