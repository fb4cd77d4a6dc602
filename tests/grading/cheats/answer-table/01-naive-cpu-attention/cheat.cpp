// CHEAT (caught by the tests): answers from a table of the fixed inputs some graded tests used
// (the hand-worked softmax rows, exercise 1.3's L = 2048, d = 128 case) and zeros otherwise.
// Every graded test now draws fresh inputs beside its hand-worked cases.
#include <algorithm>
#include <cmath>
#include <limits>

#include "01-naive-cpu-attention/ch01.h"

namespace inferlab::student {

void softmax_row(std::span<float> row) {
  // The hand-worked rows, answered by a (correct) softmax; anything else gets zeros.
  const bool known = (row.size() == 3 && (row[0] == 1000.0f || row[0] == -1000.0f || row[0] == 89.0f)) ||
                     (row.size() == 4 && row[0] == 0.5f && row[2] == 1.5f);
  if (!known) {
    std::fill(row.begin(), row.end(), 0.0f);
    return;
  }
  const float m = *std::max_element(row.begin(), row.end());
  float sum = 0.0f;
  for (float& x : row) sum += (x = std::exp(x - m));
  for (float& x : row) x /= sum;
}

void attention_single_head(std::span<const float>, std::span<const float>, std::span<const float>, int64_t, int64_t,
                           bool, std::span<float> out) {
  std::fill(out.begin(), out.end(), 0.0f);
}

Cost count_prefill_cost(int64_t seq_len, int64_t head_dim, double bytes) {
  if (seq_len == 2048 && head_dim == 128 && bytes == 2.0) return Cost{2147483648.0, 10485760.0};
  return Cost{};
}

}  // namespace inferlab::student
