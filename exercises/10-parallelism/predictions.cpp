// Predictions P10.1–P10.6 — see predictions.h for the questions. Work each number out on paper
// first (the header's worked examples are the lesson's numbers), then write the formula here and
// compare with the measurement the header names.
#include "10-parallelism/predictions.h"
#include "common/check.h"

namespace inferlab::student {

double predict_pipeline_bubble(int64_t stages, int64_t micro_batches) {
  // TODO(student): the slots a stage waits over the slots the step lasts. (1 line)
  (void)stages, (void)micro_batches;
  throw NotImplemented("predict_pipeline_bubble");
}

double predict_allreduce_bytes_per_token_layer(int64_t dim, int64_t bytes_per_element) {
  // TODO(student): how many all-reduces a layer, of how many bytes a token. (1 line)
  (void)dim, (void)bytes_per_element;
  throw NotImplemented("predict_allreduce_bytes_per_token_layer");
}

double predict_ring_bytes_sent_per_rank(double message_bytes, int64_t ranks) {
  // TODO(student): the ring's steps, one chunk each. (1 line)
  (void)message_bytes, (void)ranks;
  throw NotImplemented("predict_ring_bytes_sent_per_rank");
}

double predict_tp_decode_step_seconds(double weight_bytes, int64_t ranks, double bandwidth_gbs, int64_t layers,
                                      double allreduce_latency_seconds) {
  // TODO(student): the reading of a rank's weights, then the all-reduces (none when not split).
  // (2 lines)
  (void)weight_bytes, (void)ranks, (void)bandwidth_gbs, (void)layers, (void)allreduce_latency_seconds;
  throw NotImplemented("predict_tp_decode_step_seconds");
}

double predict_tp_speedup(double weight_bytes, int64_t ranks, double bandwidth_gbs, int64_t layers,
                          double allreduce_latency_seconds) {
  // TODO(student): one device's step over the split one's (P10.4 twice). (1 line)
  (void)weight_bytes, (void)ranks, (void)bandwidth_gbs, (void)layers, (void)allreduce_latency_seconds;
  throw NotImplemented("predict_tp_speedup");
}

int64_t predict_kv_replicas(int64_t n_heads, int64_t n_kv_heads, int64_t ranks) {
  // TODO(student): the query heads first, then the KV heads split or replicated. (4 lines)
  (void)n_heads, (void)n_kv_heads, (void)ranks;
  throw NotImplemented("predict_kv_replicas");
}

}  // namespace inferlab::student
