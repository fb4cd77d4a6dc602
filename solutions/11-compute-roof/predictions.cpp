// Predictions P11.1–P11.4 — straightforward answers. See exercises/11-compute-roof/predictions.h.
#include "11-compute-roof/predictions.h"

namespace inferlab::student {

double predict_dot_ops_per_instruction(int64_t vector_bits) {
  return 2.0 * double(vector_bits / 8);  // a multiply and an add per byte product
}

double predict_int8_ceiling_gops(int64_t cores, double ghz, int64_t vector_bits, double instructions_per_cycle) {
  return double(cores) * ghz * instructions_per_cycle * predict_dot_ops_per_instruction(vector_bits);
}

double predict_gemm_intensity(int64_t rows, int64_t out, int64_t in, double weight_bytes_per_value) {
  const double m = double(rows), n = double(out), k = double(in);
  return 2.0 * m * n * k / (n * k * weight_bytes_per_value + 4.0 * m * k + 4.0 * m * n);
}

int64_t predict_rows_at_int8_ridge(double int8_gops, double bandwidth_gbs, int64_t out, int64_t in,
                                   double weight_bytes_per_value) {
  const double ridge = int8_gops / bandwidth_gbs;
  const double limit = double(out) * double(in) / (2.0 * (double(out) + double(in)));
  if (limit <= ridge) return 0;
  int64_t m = 1;
  while (predict_gemm_intensity(m, out, in, weight_bytes_per_value) < ridge) ++m;
  return m;
}

}  // namespace inferlab::student
