// Chapter 05 prediction questions, graded: each TEST asks one question of
// exercises/05-fused-attention/predictions.h over several scenarios (the lesson's, odd ones,
// fresh ones) and compares the student's numbers, computed in the sandbox, with values worked
// out in predictions_check.h from first principles.
#include <gtest/gtest.h>

#include "05-fused-attention/predictions.h"
#include "tests/05-fused-attention/predictions_check.h"
#include "tests/support/prediction_isolated.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch05Predict.FusedAiWithGqa", "predict_fused_ai_gqa"},
    {"Ch05Predict.FusedTrafficShare", "predict_fused_traffic_share"},
    {"Ch05Predict.FusedBytesWithQueryTiles", "predict_fused_bytes_with_query_tiles"},
    {"Ch05Predict.QueryTileFromSharedMemory", "predict_max_query_tile"},
});

using testing::isolated;

TEST(Ch05Predict, FusedAiWithGqa) {
  EXPECT_TRUE(testing::ch05::check_fused_ai_gqa(isolated(student::predict_fused_ai_gqa)));
}

TEST(Ch05Predict, FusedTrafficShare) {
  EXPECT_TRUE(testing::ch05::check_fused_traffic_share(isolated(student::predict_fused_traffic_share)));
}

TEST(Ch05Predict, FusedBytesWithQueryTiles) {
  EXPECT_TRUE(testing::ch05::check_fused_bytes_with_query_tiles(isolated(student::predict_fused_bytes_with_query_tiles)));
}

TEST(Ch05Predict, QueryTileFromSharedMemory) {
  EXPECT_TRUE(testing::ch05::check_max_query_tile(isolated(student::predict_max_query_tile)));
}

}  // namespace
}  // namespace inferlab
