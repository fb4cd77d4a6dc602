// Exercise 1.3 — a straightforward answer. See exercises/01-naive-cpu-attention/ch01.h.
#include "01-naive-cpu-attention/ch01.h"

namespace inferlab::student {

Cost count_prefill_cost(int64_t seq_len, int64_t head_dim, double bytes_per_element) {
  const double L = static_cast<double>(seq_len), d = static_cast<double>(head_dim);
  Cost cost;
  cost.flops = 2.0 * L * L * d + 2.0 * L * L * d;
  cost.bytes = bytes_per_element * (3.0 * L * d + L * L + L * d);
  return cost;
}

}  // namespace inferlab::student
