// Predictions P2.1–P2.3 — see predictions.h for the questions. Work each number out on paper
// first, then write the formula here and compare with the measurement the header names.
#include "02-gpu-prefill/predictions.h"
#include "common/check.h"

namespace inferlab::student {

double predict_article_ai_fp16(int64_t seq_len, int64_t head_dim) {
  // TODO(student): 4·L²·d FLOPs over the article's fp16 bytes (lesson §6). (2 lines)
  (void)seq_len, (void)head_dim;
  throw NotImplemented("predict_article_ai_fp16");
}

double predict_unfused_ai_fp16(int64_t seq_len, int64_t head_dim) {
  // TODO(student): the same FLOPs over the real unfused pipeline's fp16 bytes. (2 lines)
  (void)seq_len, (void)head_dim;
  throw NotImplemented("predict_unfused_ai_fp16");
}

double predict_unfused_ceiling_tflops(int64_t seq_len, int64_t head_dim, double peak_tflops, double bandwidth_tbs) {
  // TODO(student): the roofline at that AI. (2 lines)
  (void)seq_len, (void)head_dim, (void)peak_tflops, (void)bandwidth_tbs;
  throw NotImplemented("predict_unfused_ceiling_tflops");
}

int64_t predict_gemm_tile(int64_t shared_memory_kib, double bytes_per_element) {
  // TODO(student): double T while two (2T)×(2T) tiles still fit. (3 lines)
  (void)shared_memory_kib, (void)bytes_per_element;
  throw NotImplemented("predict_gemm_tile");
}

}  // namespace inferlab::student
