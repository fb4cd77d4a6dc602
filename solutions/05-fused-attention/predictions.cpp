// Predictions P5.1–P5.4 — straightforward answers. See exercises/05-fused-attention/predictions.h.
#include "05-fused-attention/predictions.h"

namespace inferlab::student {

double predict_fused_ai_gqa(int64_t seq_len, int64_t head_dim, int64_t group_size, double bytes_per_element) {
  const double L = double(seq_len), d = double(head_dim), g = double(group_size);
  const double flops = g * 4.0 * L * L * d;
  const double bytes = bytes_per_element * (2.0 * g * L * d + 2.0 * L * d);  // Q, O per query head; K, V once
  return flops / bytes;                                                       // = 2·g·L / (e·(g + 1))
}

double predict_fused_traffic_share(int64_t seq_len, int64_t head_dim) {
  const double L = double(seq_len), d = double(head_dim);
  return 4.0 * L * d / (4.0 * L * L + 4.0 * L * d);  // = d / (L + d)
}

double predict_fused_bytes_with_query_tiles(int64_t seq_len, int64_t head_dim, int64_t query_tile,
                                            double bytes_per_element) {
  const double L = double(seq_len), d = double(head_dim);
  const double tiles = double((seq_len + query_tile - 1) / query_tile);
  return bytes_per_element * (2.0 * L * d + 2.0 * L * d * tiles);
}

int64_t predict_max_query_tile(int64_t shared_memory_kib, int64_t head_dim, int64_t key_tile, double bytes_per_element) {
  const double budget = double(shared_memory_kib) * 1024.0, d = double(head_dim), bc = double(key_tile);
  auto bytes = [&](double br) { return bytes_per_element * (br * d + 2.0 * bc * d) + 4.0 * br * bc; };
  int64_t br = 0;
  while (bytes(double(br + 16)) <= budget) br += 16;
  return br;
}

}  // namespace inferlab::student
