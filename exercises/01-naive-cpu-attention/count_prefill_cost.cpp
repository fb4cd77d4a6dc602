// Exercise 1.3 — see ch01.h for the task.
#include "01-naive-cpu-attention/ch01.h"
#include "common/check.h"

namespace inferlab::student {

Cost count_prefill_cost(int64_t seq_len, int64_t head_dim, double bytes_per_element) {
  // TODO(student): flops = 2·L²·d (Q·Kᵀ) + 2·L²·d (P·V);
  // bytes = bytes_per_element · (elements of Q, K, V, the L×L scores, O). (4 lines)
  (void)seq_len, (void)head_dim, (void)bytes_per_element;
  throw NotImplemented("count_prefill_cost");
}

}  // namespace inferlab::student
