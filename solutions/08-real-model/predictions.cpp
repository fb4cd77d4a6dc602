// Predictions P8.1–P8.4 — straightforward answers. See exercises/08-real-model/predictions.h.
#include "08-real-model/predictions.h"

namespace inferlab::student {

namespace {

double bytes_per_weight(WeightType type) {
  switch (type) {
    case WeightType::f32:
      return 4.0;
    case WeightType::f16:
      return 2.0;
    case WeightType::q8_0:
      return 34.0 / 32.0;  // fp16 d + 32 int8 codes
    case WeightType::q4_1:
      return 20.0 / 32.0;  // fp16 d, fp16 m + 32 4-bit codes
  }
  return 0.0;
}

}  // namespace

double predict_weight_bytes_per_token(const RealModelShape& m, WeightType matrices, WeightType head) {
  const double q = double(m.heads * m.head_dim), kv = double(m.kv_heads * m.head_dim), d = double(m.dim);
  const double per_layer = q * d + 2.0 * kv * d + d * q + 3.0 * double(m.hidden_dim) * d;
  const double norms = double(2 * m.layers + 1) * d * 4.0;
  return double(m.layers) * per_layer * bytes_per_weight(matrices) + double(m.vocab) * d * bytes_per_weight(head) +
         norms;
}

double predict_tokens_per_second_ceiling(const RealModelShape& model, WeightType matrices, WeightType head,
                                         double read_gbs) {
  return read_gbs * 1e9 / predict_weight_bytes_per_token(model, matrices, head);
}

double predict_kv_bytes_per_token(const RealModelShape& m, double kv_element_bytes) {
  return 2.0 * double(m.layers) * double(m.kv_heads) * double(m.head_dim) * kv_element_bytes;
}

double predict_weight_to_kv_ratio(const RealModelShape& model, WeightType matrices, WeightType head,
                                  double kv_element_bytes, int64_t context) {
  return predict_weight_bytes_per_token(model, matrices, head) /
         (predict_kv_bytes_per_token(model, kv_element_bytes) * double(context));
}

}  // namespace inferlab::student
