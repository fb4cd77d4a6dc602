// Predictions P3.1–P3.4 — see predictions.h for the questions. Work each number out on paper
// first, then write the formula here and compare with the measurement the header names.
#include "03-kv-cache-decode/predictions.h"
#include "common/check.h"

namespace inferlab::student {

double predict_decode_ai(int64_t context, int64_t head_dim, int64_t group_size, double bytes_per_element) {
  // TODO(student): FLOPs of the whole group over the bytes of K, V, the q's and the outputs. (3 lines)
  (void)context, (void)head_dim, (void)group_size, (void)bytes_per_element;
  throw NotImplemented("predict_decode_ai");
}

double predict_kv_bytes_per_token(int64_t layers, int64_t kv_heads, int64_t head_dim, double bytes_per_element) {
  // TODO(student): K and V, of every layer and KV head. (1 line)
  (void)layers, (void)kv_heads, (void)head_dim, (void)bytes_per_element;
  throw NotImplemented("predict_kv_bytes_per_token");
}

double predict_decode_step_ms(double weight_gb, int64_t layers, int64_t kv_heads, int64_t head_dim,
                              double kv_bytes_per_element, int64_t batch, int64_t context, double bandwidth_gbs) {
  // TODO(student): weights once + every sequence's KV, over the bandwidth, in ms. (3 lines)
  (void)weight_gb, (void)layers, (void)kv_heads, (void)head_dim, (void)kv_bytes_per_element, (void)batch,
      (void)context, (void)bandwidth_gbs;
  throw NotImplemented("predict_decode_step_ms");
}

int64_t predict_max_cached_tokens(double memory_gib, double weight_gb, int64_t layers, int64_t kv_heads,
                                  int64_t head_dim, double bytes_per_element) {
  // TODO(student): the bytes left after the weights, over the KV bytes of one token. (3 lines)
  (void)memory_gib, (void)weight_gb, (void)layers, (void)kv_heads, (void)head_dim, (void)bytes_per_element;
  throw NotImplemented("predict_max_cached_tokens");
}

}  // namespace inferlab::student
