// Predictions P5.1–P5.4 — see predictions.h for the questions. Work each number out on paper
// first, then write the formula here and compare with the measurement the header names.
#include "05-fused-attention/predictions.h"
#include "common/check.h"

namespace inferlab::student {

double predict_fused_ai_gqa(int64_t seq_len, int64_t head_dim, int64_t group_size, double bytes_per_element) {
  // TODO(student): the group's FLOPs over its compulsory bytes. (3 lines)
  (void)seq_len, (void)head_dim, (void)group_size, (void)bytes_per_element;
  throw NotImplemented("predict_fused_ai_gqa");
}

double predict_fused_traffic_share(int64_t seq_len, int64_t head_dim) {
  // TODO(student): fused bytes / real unfused bytes (the element size cancels). (2 lines)
  (void)seq_len, (void)head_dim;
  throw NotImplemented("predict_fused_traffic_share");
}

double predict_fused_bytes_with_query_tiles(int64_t seq_len, int64_t head_dim, int64_t query_tile,
                                            double bytes_per_element) {
  // TODO(student): Q and O once, K and V once per query tile. (3 lines)
  (void)seq_len, (void)head_dim, (void)query_tile, (void)bytes_per_element;
  throw NotImplemented("predict_fused_bytes_with_query_tiles");
}

int64_t predict_max_query_tile(int64_t shared_memory_kib, int64_t head_dim, int64_t key_tile, double bytes_per_element) {
  // TODO(student): grow Br by 16 while the four tiles still fit. (4 lines)
  (void)shared_memory_kib, (void)head_dim, (void)key_tile, (void)bytes_per_element;
  throw NotImplemented("predict_max_query_tile");
}

}  // namespace inferlab::student
