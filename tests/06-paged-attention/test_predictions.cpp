// Chapter 06 prediction questions, graded: each TEST asks one question of
// exercises/06-paged-attention/predictions.h over several scenarios (the lesson's, odd ones,
// fresh ones) and compares the student's numbers, computed in the sandbox, with values worked
// out in predictions_check.h from first principles.
#include <gtest/gtest.h>

#include "06-paged-attention/predictions.h"
#include "tests/06-paged-attention/predictions_check.h"
#include "tests/support/prediction_isolated.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch06Predict.BlocksNeeded", "predict_blocks_needed"},
    {"Ch06Predict.BlockBytes", "predict_block_bytes"},
    {"Ch06Predict.SequencesThatFitContiguous", "predict_sequences_contiguous"},
    {"Ch06Predict.SequencesThatFitPaged", "predict_sequences_paged"},
});

using testing::isolated;

TEST(Ch06Predict, BlocksNeeded) {
  EXPECT_TRUE(testing::ch06::check_blocks_needed(isolated(student::predict_blocks_needed)));
}

TEST(Ch06Predict, BlockBytes) { EXPECT_TRUE(testing::ch06::check_block_bytes(isolated(student::predict_block_bytes))); }

TEST(Ch06Predict, SequencesThatFitContiguous) {
  EXPECT_TRUE(testing::ch06::check_sequences_contiguous(isolated(student::predict_sequences_contiguous)));
}

TEST(Ch06Predict, SequencesThatFitPaged) {
  EXPECT_TRUE(testing::ch06::check_sequences_paged(isolated(student::predict_sequences_paged)));
}

}  // namespace
}  // namespace inferlab
