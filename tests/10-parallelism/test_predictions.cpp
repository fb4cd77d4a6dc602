// Chapter 10 prediction questions, graded: each TEST asks one question of
// exercises/10-parallelism/predictions.h over several scenarios (SmolLM2 and a 768-wide model on
// this machine, Llama-2-70B's shape on H100s, odd and fresh ones) and compares the student's
// numbers, computed in the sandbox, with values worked out in predictions_check.h term by term.
#include <gtest/gtest.h>

#include "10-parallelism/predictions.h"
#include "tests/10-parallelism/predictions_check.h"
#include "tests/support/prediction_isolated.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch10Predict.PipelineBubble", "predict_pipeline_bubble"},
    {"Ch10Predict.AllReducePayloadATokenALayer", "predict_allreduce_bytes_per_token_layer"},
    {"Ch10Predict.RingBytesSentPerRank", "predict_ring_bytes_sent_per_rank"},
    {"Ch10Predict.TensorParallelDecodeStep", "predict_tp_decode_step_seconds"},
    {"Ch10Predict.TensorParallelSpeedUp", "predict_tp_speedup"},
    {"Ch10Predict.GqaSplitOrReplicate", "predict_kv_replicas"},
});

using testing::isolated;

TEST(Ch10Predict, PipelineBubble) {
  EXPECT_TRUE(testing::ch10::check_pipeline_bubble(isolated(student::predict_pipeline_bubble)));
}

TEST(Ch10Predict, AllReducePayloadATokenALayer) {
  EXPECT_TRUE(testing::ch10::check_allreduce_payload(isolated(student::predict_allreduce_bytes_per_token_layer)));
}

TEST(Ch10Predict, RingBytesSentPerRank) {
  EXPECT_TRUE(testing::ch10::check_ring_bytes(isolated(student::predict_ring_bytes_sent_per_rank)));
}

TEST(Ch10Predict, TensorParallelDecodeStep) {
  EXPECT_TRUE(testing::ch10::check_tp_step_seconds(isolated(student::predict_tp_decode_step_seconds)));
}

TEST(Ch10Predict, TensorParallelSpeedUp) {
  EXPECT_TRUE(testing::ch10::check_tp_speedup(isolated(student::predict_tp_speedup)));
}

TEST(Ch10Predict, GqaSplitOrReplicate) {
  EXPECT_TRUE(testing::ch10::check_kv_replicas(isolated(student::predict_kv_replicas)));
}

}  // namespace
}  // namespace inferlab
