// Predictions P2.1–P2.3 — straightforward answers. See exercises/02-gpu-prefill/predictions.h.
#include "02-gpu-prefill/predictions.h"

#include <algorithm>

namespace inferlab::student {

double predict_article_ai_fp16(int64_t seq_len, int64_t head_dim) {
  const double L = double(seq_len), d = double(head_dim);
  return 4.0 * L * L * d / (2.0 * (L * L + 4.0 * L * d));  // = 2d / (1 + 4d/L)
}

double predict_unfused_ai_fp16(int64_t seq_len, int64_t head_dim) {
  const double L = double(seq_len), d = double(head_dim);
  return 4.0 * L * L * d / (2.0 * (4.0 * L * L + 4.0 * L * d));  // = L·d / (2(L + d)) → d/2
}

double predict_unfused_ceiling_tflops(int64_t seq_len, int64_t head_dim, double peak_tflops, double bandwidth_tbs) {
  return std::min(peak_tflops, predict_unfused_ai_fp16(seq_len, head_dim) * bandwidth_tbs);
}

int64_t predict_gemm_tile(int64_t shared_memory_kib, double bytes_per_element) {
  const double budget = double(shared_memory_kib) * 1024.0;
  int64_t tile = 1;
  while (2.0 * double(2 * tile) * double(2 * tile) * bytes_per_element <= budget) tile *= 2;
  return tile;
}

}  // namespace inferlab::student
