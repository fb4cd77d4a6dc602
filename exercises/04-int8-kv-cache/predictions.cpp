// Predictions P4.1–P4.4 — see predictions.h for the questions. Work each number out on paper
// first, then write the formula here and compare with the measurement the header names.
#include "04-int8-kv-cache/predictions.h"
#include "common/check.h"

namespace inferlab::student {

double predict_int8_kv_bytes_per_token(int64_t layers, int64_t kv_heads, int64_t head_dim, double scale_bytes) {
  // TODO(student): K and V rows of one byte per element, each with its scale. (1 line)
  (void)layers, (void)kv_heads, (void)head_dim, (void)scale_bytes;
  throw NotImplemented("predict_int8_kv_bytes_per_token");
}

double predict_int8_decode_speedup(int64_t head_dim, double scale_bytes, double baseline_bytes_per_element) {
  // TODO(student): bytes of a baseline row over bytes of an INT8 row. (1 line)
  (void)head_dim, (void)scale_bytes, (void)baseline_bytes_per_element;
  throw NotImplemented("predict_int8_decode_speedup");
}

double predict_int8_max_abs_error(double max_abs) {
  // TODO(student): half a step. (1 line)
  (void)max_abs;
  throw NotImplemented("predict_int8_max_abs_error");
}

double predict_int8_kv_step_speedup(double weight_gb, int64_t layers, int64_t kv_heads, int64_t head_dim,
                                    double scale_bytes, int64_t batch, int64_t context) {
  // TODO(student): (weights + fp16 KV) / (weights + INT8 KV). (4 lines)
  (void)weight_gb, (void)layers, (void)kv_heads, (void)head_dim, (void)scale_bytes, (void)batch, (void)context;
  throw NotImplemented("predict_int8_kv_step_speedup");
}

}  // namespace inferlab::student
