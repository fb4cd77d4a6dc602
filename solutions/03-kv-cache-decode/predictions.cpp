// Predictions P3.1–P3.4 — straightforward answers. See exercises/03-kv-cache-decode/predictions.h.
#include "03-kv-cache-decode/predictions.h"

#include <cmath>

namespace inferlab::student {

double predict_decode_ai(int64_t context, int64_t head_dim, int64_t group_size, double bytes_per_element) {
  const double L = double(context), d = double(head_dim), g = double(group_size);
  const double flops = g * 4.0 * L * d;                               // q·k_j and p_j·v_j per query head
  const double bytes = bytes_per_element * (2.0 * L * d + 2.0 * g * d);  // K, V once; q and out per head
  return flops / bytes;
}

double predict_kv_bytes_per_token(int64_t layers, int64_t kv_heads, int64_t head_dim, double bytes_per_element) {
  return 2.0 * double(layers) * double(kv_heads) * double(head_dim) * bytes_per_element;  // 2: K and V
}

double predict_decode_step_ms(double weight_gb, int64_t layers, int64_t kv_heads, int64_t head_dim,
                              double kv_bytes_per_element, int64_t batch, int64_t context, double bandwidth_gbs) {
  const double kv = predict_kv_bytes_per_token(layers, kv_heads, head_dim, kv_bytes_per_element);
  const double bytes = weight_gb * 1e9 + double(batch) * double(context) * kv;
  return 1e3 * bytes / (bandwidth_gbs * 1e9);
}

int64_t predict_max_cached_tokens(double memory_gib, double weight_gb, int64_t layers, int64_t kv_heads,
                                  int64_t head_dim, double bytes_per_element) {
  const double free_bytes = memory_gib * 1073741824.0 - weight_gb * 1e9;
  if (free_bytes <= 0.0) return 0;
  return static_cast<int64_t>(std::floor(free_bytes / predict_kv_bytes_per_token(layers, kv_heads, head_dim,
                                                                                 bytes_per_element)));
}

}  // namespace inferlab::student
