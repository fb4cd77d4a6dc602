// Predictions P7.1–P7.3 — see predictions.h for the questions. Work each number out on paper
// first, then write the formula here and compare with the measurement the header names.
#include "07-continuous-batching/predictions.h"
#include "common/check.h"

namespace inferlab::student {

double predict_decode_step_ai(const ServingModel& model, int64_t batch, int64_t context) {
  // TODO(student): the batch's FLOPs over weights once + every sequence's KV. (5 lines)
  (void)model, (void)batch, (void)context;
  throw NotImplemented("predict_decode_step_ai");
}

double predict_decode_tokens_per_second(const ServingModel& model, int64_t batch, int64_t context, double peak_gflops,
                                        double bandwidth_gbs) {
  // TODO(student): batch tokens over the longer of the compute and the memory time. (5 lines)
  (void)model, (void)batch, (void)context, (void)peak_gflops, (void)bandwidth_gbs;
  throw NotImplemented("predict_decode_tokens_per_second");
}

double predict_kv_equals_weights_batch(const ServingModel& model, int64_t context) {
  // TODO(student): weight bytes over one sequence's KV bytes. (2 lines)
  (void)model, (void)context;
  throw NotImplemented("predict_kv_equals_weights_batch");
}

}  // namespace inferlab::student
