// Exercise 5.1 — the online-softmax update: a straightforward answer. See
// exercises/05-fused-attention/ch05.h.
#include <algorithm>
#include <cmath>

#include "05-fused-attention/ch05.h"
#include "common/check.h"

namespace inferlab::student {

void online_softmax_update(OnlineSoftmaxState& state, std::span<const float> scores, std::span<const float> values) {
  const size_t head_dim = state.acc.size();
  require(head_dim > 0, "state.acc.size()", head_dim, "must be head_dim ≥ 1");
  require(values.size() == scores.size() * head_dim, "values.size()", values.size(),
          "must be scores.size() · head_dim = " + std::to_string(scores.size() * head_dim));

  float new_max = state.max;
  for (float s : scores) new_max = std::max(new_max, s);
  if (new_max == -INFINITY) return;  // nothing finite yet: α would be exp(−∞ − (−∞)) = NaN

  const float alpha = std::exp(state.max - new_max);  // 0 for the first finite block (m = −∞)
  state.sum *= alpha;
  for (float& a : state.acc) a *= alpha;
  for (size_t j = 0; j < scores.size(); ++j) {
    const float p = std::exp(scores[j] - new_max);  // ≤ 1; exp(−∞) = 0 for a masked key
    state.sum += p;
    const float* row = values.data() + j * head_dim;
    for (size_t c = 0; c < head_dim; ++c) state.acc[c] += p * row[c];
  }
  state.max = new_max;
}

}  // namespace inferlab::student
