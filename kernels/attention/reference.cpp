// The float64 oracle. Deliberately the plainest possible code: one query row at a time, scores
// in double, max subtracted before exp. It is the independent check for every other version.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/attention.h"

namespace inferlab {

Tensor<double> attention_reference(const Tensor<double>& q, const Tensor<double>& k, const Tensor<double>& v,
                                   bool causal) {
  // Shapes are checked through the float overload's rules (same ranks and relations).
  check_rank(q, 3, "q");
  check_rank(k, 3, "k");
  check_shape(v, k.shape(), "v");
  const int64_t heads = q.dim(0), kv_heads = k.dim(0), L = q.dim(1), d = q.dim(2);
  require(kv_heads > 0 && heads % kv_heads == 0, "num_heads", heads, "must be a multiple of num_kv_heads");
  require(k.dim(1) == L && k.dim(2) == d, "k.shape", to_string(k.shape()), "must match q's seq_len and head_dim");
  const int64_t group = heads / kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));

  Tensor<double> out({heads, L, d});
  std::vector<double> weights(static_cast<size_t>(L));
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t g = h / group;
    for (int64_t i = 0; i < L; ++i) {
      const int64_t keys = causal ? i + 1 : L;
      const double* q_row = q.data() + (h * L + i) * d;
      double max_score = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < keys; ++j) {
        const double* k_row = k.data() + (g * L + j) * d;
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c) dot += q_row[c] * k_row[c];
        weights[size_t(j)] = dot * scale;
        max_score = std::max(max_score, weights[size_t(j)]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < keys; ++j) {
        weights[size_t(j)] = std::exp(weights[size_t(j)] - max_score);
        sum += weights[size_t(j)];
      }
      double* o_row = out.data() + (h * L + i) * d;
      for (int64_t c = 0; c < d; ++c) o_row[c] = 0.0;
      for (int64_t j = 0; j < keys; ++j) {
        const double p = weights[size_t(j)] / sum;
        const double* v_row = v.data() + (g * L + j) * d;
        for (int64_t c = 0; c < d; ++c) o_row[c] += p * v_row[c];
      }
    }
  }
  return out;
}

Tensor<double> attention_reference(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                   bool causal) {
  attention_shape(q, k, v, causal);
  return attention_reference(convert<double>(q), convert<double>(k), convert<double>(v), causal);
}

}  // namespace inferlab
