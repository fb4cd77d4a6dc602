// Chapter 02 prediction questions, graded: each TEST asks one question of
// exercises/02-gpu-prefill/predictions.h over several scenarios (the lesson's, odd ones, fresh
// ones) and compares the student's numbers, computed in the sandbox, with values worked out in
// predictions_check.h from first principles.
#include <gtest/gtest.h>

#include "02-gpu-prefill/predictions.h"
#include "tests/02-gpu-prefill/predictions_check.h"
#include "tests/support/prediction_isolated.h"

namespace inferlab {
namespace {

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
