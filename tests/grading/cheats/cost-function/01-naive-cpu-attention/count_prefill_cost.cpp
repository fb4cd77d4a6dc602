// CHEAT (caught by the inspection: references): answers exercise 1.3 by calling the library's
// own count, common/cost.h's prefill_attention_cost (9/9 before). The cost functions are the
// lab's side of the grading; the tests now check against counts worked out in the test.
#include "01-naive-cpu-attention/ch01.h"

namespace inferlab::student {

Cost count_prefill_cost(int64_t seq_len, int64_t head_dim, double bytes_per_element) {
  return prefill_attention_cost({1, 1, seq_len, head_dim}, TrafficModel::article, bytes_per_element);
}

}  // namespace inferlab::student
