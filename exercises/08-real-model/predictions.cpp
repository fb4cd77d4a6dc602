// Predictions P8.1–P8.4 — see predictions.h for the questions. Work each number out on paper
// first (SmolLM2's shape is in the header), then write the formula here and compare with the
// measurement the header names.
#include "08-real-model/predictions.h"
#include "common/check.h"

namespace inferlab::student {

double predict_weight_bytes_per_token(const RealModelShape& model, WeightType matrices, WeightType head) {
  // TODO(student): bytes a weight of each format (predictions.h's table); the seven matrices of a
  // layer × layers in `matrices`, the head (vocab × dim) in `head`, the norms in f32. (8 lines)
  (void)model, (void)matrices, (void)head;
  throw NotImplemented("predict_weight_bytes_per_token");
}

double predict_tokens_per_second_ceiling(const RealModelShape& model, WeightType matrices, WeightType head,
                                         double read_gbs) {
  // TODO(student): the bytes one second streams over the bytes of a token. (1 line)
  (void)model, (void)matrices, (void)head, (void)read_gbs;
  throw NotImplemented("predict_tokens_per_second_ceiling");
}

double predict_kv_bytes_per_token(const RealModelShape& model, double kv_element_bytes) {
  // TODO(student): K and V, every layer, every KV head's head_dim elements. (1 line)
  (void)model, (void)kv_element_bytes;
  throw NotImplemented("predict_kv_bytes_per_token");
}

double predict_weight_to_kv_ratio(const RealModelShape& model, WeightType matrices, WeightType head,
                                  double kv_element_bytes, int64_t context) {
  // TODO(student): P8.1 over P8.3 × context. (1 line)
  (void)model, (void)matrices, (void)head, (void)kv_element_bytes, (void)context;
  throw NotImplemented("predict_weight_to_kv_ratio");
}

}  // namespace inferlab::student
