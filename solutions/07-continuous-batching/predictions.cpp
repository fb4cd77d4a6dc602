// Predictions P7.1–P7.3 — straightforward answers. See exercises/07-continuous-batching/predictions.h.
#include "07-continuous-batching/predictions.h"

#include <algorithm>

namespace inferlab::student {

namespace {

struct Step {
  double flops, bytes;
};

double kv_bytes_per_sequence(const ServingModel& m, int64_t context) {
  return 2.0 * double(m.layers) * double(m.kv_heads) * double(m.head_dim) * m.kv_bytes * double(context);
}

Step decode_step(const ServingModel& m, int64_t batch, int64_t context) {
  const double attention = 4.0 * double(context) * double(m.head_dim) * double(m.heads) * double(m.layers);
  return {double(batch) * (2.0 * m.parameters + attention),
          m.parameters * m.weight_bytes + double(batch) * kv_bytes_per_sequence(m, context)};
}

}  // namespace

double predict_decode_step_ai(const ServingModel& model, int64_t batch, int64_t context) {
  const Step s = decode_step(model, batch, context);
  return s.flops / s.bytes;
}

double predict_decode_tokens_per_second(const ServingModel& model, int64_t batch, int64_t context, double peak_gflops,
                                        double bandwidth_gbs) {
  const Step s = decode_step(model, batch, context);
  return double(batch) / std::max(s.flops / (peak_gflops * 1e9), s.bytes / (bandwidth_gbs * 1e9));
}

double predict_kv_equals_weights_batch(const ServingModel& model, int64_t context) {
  return model.parameters * model.weight_bytes / kv_bytes_per_sequence(model, context);
}

}  // namespace inferlab::student
