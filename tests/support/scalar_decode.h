#pragma once
/// @file scalar_decode.h
/// A plain fp32 decode step over element accessors: per (sequence, query head), the L scores
/// q·k_j/√d, the softmax with the max subtracted, then Σ_j p_j·v_j / Σ_j p_j. The skeleton of
/// the wrong fixtures in tests/wrong that read a quantized cache: each passes accessors that
/// read an element correctly, or with its one deliberate mistake.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/tensor.h"
#include "kernels/decode/decode.h"

namespace inferlab::testing {

/// Decodes @p q (shape @p s, checked by decode_shape()) over sequences of @p lengths tokens into
/// @p out; @p key(b, g, j, c) and @p value(b, g, j, c) return element c of key / value row j of KV
/// head g of sequence b as a float.
template <class Key, class Value>
void scalar_decode(const Tensor<float>& q, const DecodeShape& s, const std::vector<int32_t>& lengths, const Key& key,
                   const Value& value, Tensor<float>& out) {
  const int64_t d = s.head_dim;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.num_heads; ++h) {
      const int64_t g = h / s.group_size(), L = lengths[size_t(b)];
      std::vector<float> p(static_cast<size_t>(L));
      float max_score = -INFINITY, sum = 0.0f;
      for (int64_t j = 0; j < L; ++j) {
        float dot = 0.0f;
        for (int64_t c = 0; c < d; ++c) dot += q[(b * s.num_heads + h) * d + c] * key(b, g, j, c);
        p[size_t(j)] = dot / std::sqrt(float(d));
        max_score = std::max(max_score, p[size_t(j)]);
      }
      for (float& x : p) sum += (x = std::exp(x - max_score));
      for (int64_t c = 0; c < d; ++c) {
        float acc = 0.0f;
        for (int64_t j = 0; j < L; ++j) acc += p[size_t(j)] * value(b, g, j, c);
        out[(b * s.num_heads + h) * d + c] = acc / sum;
      }
    }
}

}  // namespace inferlab::testing
