// Predictions P1.1–P1.3 — straightforward answers. See exercises/01-naive-cpu-attention/predictions.h.
#include "01-naive-cpu-attention/predictions.h"

#include <algorithm>

namespace inferlab::student {

namespace {
double flops(double L, double d) { return 4.0 * L * L * d; }  // Q·Kᵀ and P·V, 2·L²·d each
}  // namespace

double predict_article_ai(int64_t seq_len, int64_t head_dim, double bytes_per_element) {
  const double L = double(seq_len), d = double(head_dim);
  return flops(L, d) / (bytes_per_element * (L * L + 4.0 * L * d));  // scores once; Q, K, V, O
}

double predict_unfused_ai(int64_t seq_len, int64_t head_dim, double bytes_per_element) {
  const double L = double(seq_len), d = double(head_dim);
  return flops(L, d) / (bytes_per_element * (4.0 * L * L + 4.0 * L * d));  // scores ×4; Q, K, V, O
}

double predict_fused_ai(int64_t seq_len, int64_t head_dim, double bytes_per_element) {
  const double L = double(seq_len), d = double(head_dim);
  return flops(L, d) / (bytes_per_element * 4.0 * L * d);  // = L / bytes_per_element
}

double predict_attainable_gflops(double arithmetic_intensity, double peak_gflops, double bandwidth_gbs) {
  return std::min(peak_gflops, arithmetic_intensity * bandwidth_gbs);
}

double predict_unfused_time_floor_ms(int64_t num_heads, int64_t seq_len, int64_t head_dim, double bytes_per_element,
                                     double peak_gflops, double bandwidth_gbs) {
  const double L = double(seq_len), d = double(head_dim), h = double(num_heads);
  const double total_flops = h * flops(L, d);
  const double total_bytes = h * bytes_per_element * (4.0 * L * L + 4.0 * L * d);
  return 1e3 * std::max(total_flops / (peak_gflops * 1e9), total_bytes / (bandwidth_gbs * 1e9));
}

}  // namespace inferlab::student
