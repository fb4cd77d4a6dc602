// Predictions P11.1–P11.4 (see predictions.h): replace each NotImplemented with your formula.
#include "11-compute-roof/predictions.h"

#include "common/check.h"

namespace inferlab::student {

double predict_dot_ops_per_instruction(int64_t vector_bits) {
  // TODO(student): products a register holds, and what each does (1 line)
  (void)vector_bits;
  throw NotImplemented("predict_dot_ops_per_instruction");
}

double predict_int8_ceiling_gops(int64_t cores, double ghz, int64_t vector_bits, double instructions_per_cycle) {
  // TODO(student): P11.1 a cycle, times the cycles a second and the cores (1 line)
  (void)cores, (void)ghz, (void)vector_bits, (void)instructions_per_cycle;
  throw NotImplemented("predict_int8_ceiling_gops");
}

double predict_gemm_intensity(int64_t rows, int64_t out, int64_t in, double weight_bytes_per_value) {
  // TODO(student): operations over the bytes of W, x and y (2 lines)
  (void)rows, (void)out, (void)in, (void)weight_bytes_per_value;
  throw NotImplemented("predict_gemm_intensity");
}

int64_t predict_rows_at_int8_ridge(double int8_gops, double bandwidth_gbs, int64_t out, int64_t in,
                                   double weight_bytes_per_value) {
  // TODO(student): the ridge, then the first M whose intensity reaches it — or 0 (roughly 6 lines)
  (void)int8_gops, (void)bandwidth_gbs, (void)out, (void)in, (void)weight_bytes_per_value;
  throw NotImplemented("predict_rows_at_int8_ridge");
}

}  // namespace inferlab::student
