// Predictions P4.1–P4.4 — straightforward answers. See exercises/04-int8-kv-cache/predictions.h.
#include "04-int8-kv-cache/predictions.h"

namespace inferlab::student {

double predict_int8_kv_bytes_per_token(int64_t layers, int64_t kv_heads, int64_t head_dim, double scale_bytes) {
  return 2.0 * double(layers) * double(kv_heads) * (double(head_dim) + scale_bytes);  // K and V, each with a scale
}

double predict_int8_decode_speedup(int64_t head_dim, double scale_bytes, double baseline_bytes_per_element) {
  return baseline_bytes_per_element * double(head_dim) / (double(head_dim) + scale_bytes);
}

double predict_int8_max_abs_error(double max_abs) { return max_abs / 127.0 / 2.0; }

double predict_int8_kv_step_speedup(double weight_gb, int64_t layers, int64_t kv_heads, int64_t head_dim,
                                    double scale_bytes, int64_t batch, int64_t context) {
  const double tokens = double(batch) * double(context), weights = weight_gb * 1e9;
  const double fp16 = 2.0 * double(layers) * double(kv_heads) * double(head_dim) * 2.0;
  const double int8 = predict_int8_kv_bytes_per_token(layers, kv_heads, head_dim, scale_bytes);
  return (weights + tokens * fp16) / (weights + tokens * int8);
}

}  // namespace inferlab::student
