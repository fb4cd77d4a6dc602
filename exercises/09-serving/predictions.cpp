// Predictions P9.1–P9.4 — see predictions.h for the questions. Work each number out on paper
// first (the header's worked examples use SmolLM2 on this machine), then write the formula here
// and compare with the measurement the header names.
#include "09-serving/predictions.h"
#include "common/check.h"

namespace inferlab::student {

double predict_tpot_seconds(double weight_bytes, double kv_bytes_per_token, int64_t batch, int64_t context,
                            double bandwidth_gbs) {
  // TODO(student): the bytes one step reads (the weights once, every sequence's cache) over the
  // bytes a second. (1 line)
  (void)weight_bytes, (void)kv_bytes_per_token, (void)batch, (void)context, (void)bandwidth_gbs;
  throw NotImplemented("predict_tpot_seconds");
}

double predict_saturation_rate(double step_seconds, int64_t max_batch, int64_t output_tokens) {
  // TODO(student): how long one request holds its place, and how many places there are. (1 line)
  (void)step_seconds, (void)max_batch, (void)output_tokens;
  throw NotImplemented("predict_saturation_rate");
}

double predict_ttft_seconds(int64_t requests_ahead, double completion_rate, int64_t prompt_tokens,
                            double prefill_tokens_per_second) {
  // TODO(student): the wait in the queue, then the prefill. (1 line)
  (void)requests_ahead, (void)completion_rate, (void)prompt_tokens, (void)prefill_tokens_per_second;
  throw NotImplemented("predict_ttft_seconds");
}

double predict_requests_in_flight(double arrival_rate, double ttft_seconds, double tpot_seconds,
                                  int64_t output_tokens) {
  // TODO(student): L = λ · W, W the time one request spends in the server. (1 line)
  (void)arrival_rate, (void)ttft_seconds, (void)tpot_seconds, (void)output_tokens;
  throw NotImplemented("predict_requests_in_flight");
}

}  // namespace inferlab::student
