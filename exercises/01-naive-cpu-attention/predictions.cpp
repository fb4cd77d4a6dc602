// Predictions P1.1–P1.3 — see predictions.h for the questions. Work each number out on paper
// first, then write the formula here and compare with the measurement the header names.
#include "01-naive-cpu-attention/predictions.h"
#include "common/check.h"

namespace inferlab::student {

double predict_article_ai(int64_t seq_len, int64_t head_dim, double bytes_per_element) {
  // TODO(student): FLOPs / bytes, the bytes as the article counts them (lesson §2). (2 lines)
  (void)seq_len, (void)head_dim, (void)bytes_per_element;
  throw NotImplemented("predict_article_ai");
}

double predict_unfused_ai(int64_t seq_len, int64_t head_dim, double bytes_per_element) {
  // TODO(student): the same FLOPs over the real unfused pipeline's bytes. (2 lines)
  (void)seq_len, (void)head_dim, (void)bytes_per_element;
  throw NotImplemented("predict_unfused_ai");
}

double predict_fused_ai(int64_t seq_len, int64_t head_dim, double bytes_per_element) {
  // TODO(student): the same FLOPs over Q, K, V and O alone. (1 line)
  (void)seq_len, (void)head_dim, (void)bytes_per_element;
  throw NotImplemented("predict_fused_ai");
}

double predict_attainable_gflops(double arithmetic_intensity, double peak_gflops, double bandwidth_gbs) {
  // TODO(student): the roofline, min of the two roofs. (1 line)
  (void)arithmetic_intensity, (void)peak_gflops, (void)bandwidth_gbs;
  throw NotImplemented("predict_attainable_gflops");
}

double predict_unfused_time_floor_ms(int64_t num_heads, int64_t seq_len, int64_t head_dim, double bytes_per_element,
                                     double peak_gflops, double bandwidth_gbs) {
  // TODO(student): FLOPs and unfused bytes of every head; the larger of the two times, in ms. (4 lines)
  (void)num_heads, (void)seq_len, (void)head_dim, (void)bytes_per_element, (void)peak_gflops, (void)bandwidth_gbs;
  throw NotImplemented("predict_unfused_time_floor_ms");
}

}  // namespace inferlab::student
