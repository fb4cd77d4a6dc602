// Chapter 11 prediction questions, graded: each TEST asks one question of
// exercises/11-compute-roof/predictions.h over several scenarios (this lab's VM, SmolLM2's shapes, an
// H100-class chip, odd and fresh ones) and compares the student's numbers, computed in the sandbox,
// with values worked out in predictions_check.h term by term.
#include <gtest/gtest.h>

#include "11-compute-roof/predictions.h"
#include "tests/11-compute-roof/predictions_check.h"
#include "tests/support/prediction_isolated.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch11Predict.OperationsOfOneDotProductInstruction", "predict_dot_ops_per_instruction"},
    {"Ch11Predict.TheInt8Ceiling", "predict_int8_ceiling_gops"},
    {"Ch11Predict.TheIntensityOfAQuantizedGemm", "predict_gemm_intensity"},
    {"Ch11Predict.TheBatchAtTheInt8Ridge", "predict_rows_at_int8_ridge"},
});

using testing::isolated;

TEST(Ch11Predict, OperationsOfOneDotProductInstruction) {
  EXPECT_TRUE(testing::ch11::check_dot_ops(isolated(student::predict_dot_ops_per_instruction)));
}

TEST(Ch11Predict, TheInt8Ceiling) {
  EXPECT_TRUE(testing::ch11::check_int8_ceiling(isolated(student::predict_int8_ceiling_gops)));
}

TEST(Ch11Predict, TheIntensityOfAQuantizedGemm) {
  EXPECT_TRUE(testing::ch11::check_gemm_intensity(isolated(student::predict_gemm_intensity)));
}

TEST(Ch11Predict, TheBatchAtTheInt8Ridge) {
  EXPECT_TRUE(testing::ch11::check_rows_at_ridge(isolated(student::predict_rows_at_int8_ridge)));
}

}  // namespace
}  // namespace inferlab
