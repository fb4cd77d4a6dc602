// Exercise 5.1 — the online-softmax update. See ch05.h for the task.
#include "05-fused-attention/ch05.h"
#include "common/check.h"

namespace inferlab::student {

void online_softmax_update(OnlineSoftmaxState& state, std::span<const float> scores, std::span<const float> values) {
  const size_t head_dim = state.acc.size();
  require(head_dim > 0, "state.acc.size()", head_dim, "must be head_dim ≥ 1");
  require(values.size() == scores.size() * head_dim, "values.size()", values.size(),
          "must be scores.size() · head_dim = " + std::to_string(scores.size() * head_dim));

  throw NotImplemented("online_softmax_update");  // TODO(student): delete this line once the update is written

  // TODO(student): the block's new max m' = max(state.max, max_j scores[j]); if it is still −∞
  // (an empty or wholly masked block before any finite score), return unchanged. Otherwise
  // α = exp(state.max − m'); multiply state.sum and every state.acc[c] by α; for each j add
  // p = exp(scores[j] − m') to state.sum and p · values[j·head_dim + c] to state.acc[c];
  // state.max = m'. (roughly 15 lines)
}

}  // namespace inferlab::student
