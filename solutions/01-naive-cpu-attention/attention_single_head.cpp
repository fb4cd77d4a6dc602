// Exercise 1.2 — a straightforward answer. See exercises/01-naive-cpu-attention/ch01.h.
#include <cmath>
#include <vector>

#include "01-naive-cpu-attention/ch01.h"

namespace inferlab::student {

void attention_single_head(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                           int64_t seq_len, int64_t head_dim, bool causal, std::span<float> out) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  std::vector<float> scores(static_cast<size_t>(seq_len));
  for (int64_t i = 0; i < seq_len; ++i) {
    const int64_t keys = causal ? i + 1 : seq_len;
    for (int64_t j = 0; j < keys; ++j) {
      float dot = 0.0f;
      for (int64_t c = 0; c < head_dim; ++c) dot += q[size_t(i * head_dim + c)] * k[size_t(j * head_dim + c)];
      scores[size_t(j)] = dot * scale;
    }
    softmax_row(std::span<float>(scores).first(static_cast<size_t>(keys)));
    for (int64_t c = 0; c < head_dim; ++c) {
      float acc = 0.0f;
      for (int64_t j = 0; j < keys; ++j) acc += scores[size_t(j)] * v[size_t(j * head_dim + c)];
      out[size_t(i * head_dim + c)] = acc;
    }
  }
}

}  // namespace inferlab::student
