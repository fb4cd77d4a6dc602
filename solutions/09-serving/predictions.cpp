// Predictions P9.1–P9.4 — straightforward answers. See exercises/09-serving/predictions.h.
#include "09-serving/predictions.h"

namespace inferlab::student {

double predict_tpot_seconds(double weight_bytes, double kv_bytes_per_token, int64_t batch, int64_t context,
                            double bandwidth_gbs) {
  return (weight_bytes + double(batch) * double(context) * kv_bytes_per_token) / (bandwidth_gbs * 1e9);
}

double predict_saturation_rate(double step_seconds, int64_t max_batch, int64_t output_tokens) {
  return double(max_batch) / (double(output_tokens) * step_seconds);
}

double predict_ttft_seconds(int64_t requests_ahead, double completion_rate, int64_t prompt_tokens,
                            double prefill_tokens_per_second) {
  return double(requests_ahead) / completion_rate + double(prompt_tokens) / prefill_tokens_per_second;
}

double predict_requests_in_flight(double arrival_rate, double ttft_seconds, double tpot_seconds,
                                  int64_t output_tokens) {
  return arrival_rate * (ttft_seconds + double(output_tokens - 1) * tpot_seconds);
}

}  // namespace inferlab::student
