// Exercise 1.2 — see ch01.h for the task.
#include "01-naive-cpu-attention/ch01.h"
#include "common/check.h"

namespace inferlab::student {

void attention_single_head(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                           int64_t seq_len, int64_t head_dim, bool causal, std::span<float> out) {
  // TODO(student): for each query row i: scores[j] = q_i·k_j / sqrt(head_dim) for the keys it
  // may see (j <= i when causal), softmax_row(scores), then out_i = sum_j scores[j] * v_j.
  // (roughly 20 lines)
  (void)q, (void)k, (void)v, (void)seq_len, (void)head_dim, (void)causal, (void)out;
  throw NotImplemented("attention_single_head");
}

}  // namespace inferlab::student
