// Exercise 1.1 — a straightforward answer. See exercises/01-naive-cpu-attention/ch01.h.
#include <algorithm>
#include <cmath>
#include <limits>

#include "01-naive-cpu-attention/ch01.h"

namespace inferlab::student {

void softmax_row(std::span<float> row) {
  float max_value = -std::numeric_limits<float>::infinity();
  for (float x : row) max_value = std::max(max_value, x);
  float sum = 0.0f;
  for (float& x : row) {
    x = std::exp(x - max_value);  // <= 1: never overflows
    sum += x;
  }
  for (float& x : row) x /= sum;
}

}  // namespace inferlab::student
