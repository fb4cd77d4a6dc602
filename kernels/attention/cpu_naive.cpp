// cpu/naive — chapter 01's attention, written the way the math reads.
//
// Version ladder (prefill attention, CPU):
//   cpu/naive    this file: three loops per head — S = Q·Kᵀ/√d (L×L floats), softmax rows, O = P·V.
//   cpu/blocked  chapter 02: cache-blocked, SIMD (AVX-512/AVX2) + OpenMP, still unfused.
//   cpu/openblas chapter 02: the two products as OpenBLAS sgemm calls.
//   cpu/flash    chapter 05: fused, the L×L matrix never exists.
//
// Cost per head: 4·L²·d FLOPs; memory traffic is dominated by the L×L score matrix once
// L ≫ d (see common/cost.h for the three byte models).
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/attention.h"

namespace inferlab {

void attention_cpu_naive(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                         Tensor<float>& out) {
  const AttentionShape shape = attention_shape(q, k, v, causal);
  check_attention_output(out, shape);
  const int64_t L = shape.seq_len, d = shape.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> scores(static_cast<size_t>(L * L));  // S for one head, row-major [query][key]

  for (int64_t h = 0; h < shape.num_heads; ++h) {
    const int64_t g = h / shape.group_size();  // the KV head this query head reads (GQA)
    const float* Q = q.data() + h * L * d;
    const float* K = k.data() + g * L * d;
    const float* V = v.data() + g * L * d;
    float* O = out.data() + h * L * d;

    // 1. S = Q·Kᵀ · 1/√d; masked entries (key after query) are -inf so that exp gives 0.
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t j = 0; j < L; ++j) {
        float dot = 0.0f;
        for (int64_t c = 0; c < d; ++c) dot += Q[i * d + c] * K[j * d + c];
        scores[size_t(i * L + j)] = (causal && j > i) ? -std::numeric_limits<float>::infinity() : dot * scale;
      }
    }
    // 2. Row softmax, numerically stable: exp(s - max) never overflows, and the max entry is 1.
    for (int64_t i = 0; i < L; ++i) {
      float* row = scores.data() + i * L;
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < L; ++j) max_score = std::max(max_score, row[j]);
      float sum = 0.0f;
      for (int64_t j = 0; j < L; ++j) {
        row[j] = std::exp(row[j] - max_score);
        sum += row[j];
      }
      const float inv_sum = 1.0f / sum;
      for (int64_t j = 0; j < L; ++j) row[j] *= inv_sum;
    }
    // 3. O = P·V.
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t c = 0; c < d; ++c) O[i * d + c] = 0.0f;
      for (int64_t j = 0; j < L; ++j) {
        const float p = scores[size_t(i * L + j)];
        for (int64_t c = 0; c < d; ++c) O[i * d + c] += p * V[j * d + c];
      }
    }
  }
}

}  // namespace inferlab
