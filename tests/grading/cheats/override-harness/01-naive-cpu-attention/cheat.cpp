// CHEAT (caught by the inspection: exports): writes zeros and redefines the harness's
// compare_to_oracle so that every comparison says "ok". The student library used to be linked
// before common/, so its definition won: chapter 01 scored 6/9 with zeros.
#include <algorithm>

#include "01-naive-cpu-attention/ch01.h"
#include "common/tensor.h"

namespace inferlab {

struct Tolerance {
  double rel_frobenius;
  double max_abs;
};
struct Comparison {
  double rel_frobenius = 0.0, max_abs_error = 0.0, max_abs_reference = 0.0;
  int64_t nonfinite = 0, worst_index = -1;
  bool ok = true;
};
Comparison compare_to_oracle(std::span<const float>, std::span<const double>, Tolerance, const Shape&) {
  return Comparison{};
}

namespace student {
void softmax_row(std::span<float> row) { std::fill(row.begin(), row.end(), 0.0f); }
void attention_single_head(std::span<const float>, std::span<const float>, std::span<const float>, int64_t, int64_t,
                           bool, std::span<float> out) {
  std::fill(out.begin(), out.end(), 0.0f);
}
Cost count_prefill_cost(int64_t, int64_t, double) { return Cost{}; }
}  // namespace student

}  // namespace inferlab
