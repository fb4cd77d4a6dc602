// Chapter 02 prediction questions, graded: each TEST asks one question of
// exercises/02-gpu-prefill/predictions.h over several scenarios (the lesson's, odd ones, fresh
// ones) and compares the student's numbers, computed in the sandbox, with values worked out in
// predictions_check.h from first principles.
#include <gtest/gtest.h>

#include "02-gpu-prefill/predictions.h"
#include "tests/02-gpu-prefill/predictions_check.h"
#include "tests/support/prediction_isolated.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch02Predict.ArticleAi", "predict_article_ai_fp16"},
    {"Ch02Predict.UnfusedAi", "predict_unfused_ai_fp16"},
    {"Ch02Predict.UnfusedCeilingOnAGpu", "predict_unfused_ceiling_tflops"},
    {"Ch02Predict.GemmTileFromSharedMemory", "predict_gemm_tile"},
});

using testing::isolated;

TEST(Ch02Predict, ArticleAi) {
  EXPECT_TRUE(testing::ch02::check_article_ai(isolated(student::predict_article_ai_fp16)));
}

TEST(Ch02Predict, UnfusedAi) {
  EXPECT_TRUE(testing::ch02::check_unfused_ai(isolated(student::predict_unfused_ai_fp16)));
}

TEST(Ch02Predict, UnfusedCeilingOnAGpu) {
  EXPECT_TRUE(testing::ch02::check_ceiling(isolated(student::predict_unfused_ceiling_tflops)));
}

TEST(Ch02Predict, GemmTileFromSharedMemory) {
  EXPECT_TRUE(testing::ch02::check_tile(isolated(student::predict_gemm_tile)));
}

}  // namespace
}  // namespace inferlab
