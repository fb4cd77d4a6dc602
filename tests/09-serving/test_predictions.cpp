// Chapter 09 prediction questions, graded: each TEST asks one question of
// exercises/09-serving/predictions.h over several scenarios (SmolLM2 on this machine, GPU-sized
// ones, odd and fresh ones) and compares the student's numbers, computed in the sandbox, with
// values worked out in predictions_check.h term by term.
#include <gtest/gtest.h>

#include "09-serving/predictions.h"
#include "tests/09-serving/predictions_check.h"
#include "tests/support/prediction_isolated.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch09Predict.TpotAtABatch", "predict_tpot_seconds"},
    {"Ch09Predict.SaturationRate", "predict_saturation_rate"},
    {"Ch09Predict.TtftBehindAQueue", "predict_ttft_seconds"},
    {"Ch09Predict.LittlesLawRequestsInFlight", "predict_requests_in_flight"},
});

using testing::isolated;

TEST(Ch09Predict, TpotAtABatch) {
  EXPECT_TRUE(testing::ch09::check_tpot_seconds(isolated(student::predict_tpot_seconds)));
}

TEST(Ch09Predict, SaturationRate) {
  EXPECT_TRUE(testing::ch09::check_saturation_rate(isolated(student::predict_saturation_rate)));
}

TEST(Ch09Predict, TtftBehindAQueue) {
  EXPECT_TRUE(testing::ch09::check_ttft_seconds(isolated(student::predict_ttft_seconds)));
}

TEST(Ch09Predict, LittlesLawRequestsInFlight) {
  EXPECT_TRUE(testing::ch09::check_requests_in_flight(isolated(student::predict_requests_in_flight)));
}

}  // namespace
}  // namespace inferlab
