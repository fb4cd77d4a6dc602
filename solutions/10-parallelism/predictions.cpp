// Predictions P10.1–P10.6 — straightforward answers. See exercises/10-parallelism/predictions.h.
#include "10-parallelism/predictions.h"

namespace inferlab::student {

double predict_pipeline_bubble(int64_t stages, int64_t micro_batches) {
  return double(stages - 1) / double(micro_batches + stages - 1);
}

double predict_allreduce_bytes_per_token_layer(int64_t dim, int64_t bytes_per_element) {
  return 2.0 * double(dim) * double(bytes_per_element);
}

double predict_ring_bytes_sent_per_rank(double message_bytes, int64_t ranks) {
  return 2.0 * double(ranks - 1) / double(ranks) * message_bytes;
}

double predict_tp_decode_step_seconds(double weight_bytes, int64_t ranks, double bandwidth_gbs, int64_t layers,
                                      double allreduce_latency_seconds) {
  const double read = weight_bytes / (double(ranks) * bandwidth_gbs * 1e9);
  return ranks == 1 ? read : read + 2.0 * double(layers) * allreduce_latency_seconds;
}

double predict_tp_speedup(double weight_bytes, int64_t ranks, double bandwidth_gbs, int64_t layers,
                          double allreduce_latency_seconds) {
  return predict_tp_decode_step_seconds(weight_bytes, 1, bandwidth_gbs, layers, allreduce_latency_seconds) /
         predict_tp_decode_step_seconds(weight_bytes, ranks, bandwidth_gbs, layers, allreduce_latency_seconds);
}

int64_t predict_kv_replicas(int64_t n_heads, int64_t n_kv_heads, int64_t ranks) {
  if (n_heads % ranks != 0) return 0;
  if (ranks <= n_kv_heads) return n_kv_heads % ranks == 0 ? 1 : 0;
  return ranks % n_kv_heads == 0 ? ranks / n_kv_heads : 0;
}

}  // namespace inferlab::student
