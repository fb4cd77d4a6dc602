#include "kernels/decode/decode_int8.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/check.h"

namespace inferlab {

Cost decode_int8_step_cost(const Int8KvCache& cache, int64_t num_heads) {
  const KvCacheShape& c = cache.shape();
  const double scale = double(bytes_per_scale(cache.scale_dtype()));
  const double G = double(c.num_kv_heads), d = double(c.head_dim);
  Cost total;
  for (int64_t b = 0; b < c.batch; ++b) {
    const double L = double(cache.length(b));
    if (L == 0) continue;
    total.flops += decode_attention_cost({num_heads, c.num_kv_heads, cache.length(b), c.head_dim}, 1.0).flops;
    const double k_scales = cache.key_scaling() == KeyScaling::per_token ? L : d;
    total.bytes += 2.0 * G * L * d + G * (L + k_scales) * scale + 2.0 * double(num_heads) * d * 4.0;
  }
  return total;
}

Tensor<double> decode_int8_reference(const Tensor<float>& q, const Int8KvCache& cache) {
  const DecodeShape s = decode_shape(q, cache);
  const int64_t d = s.head_dim;
  Tensor<double> out(s.query_shape());
  const double scale = 1.0 / std::sqrt(double(d));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.num_heads; ++h) {
      const int64_t g = h / s.group_size(), L = cache.length(b);
      const float* q_row = q.data() + (b * s.num_heads + h) * d;
      std::vector<double> p(static_cast<size_t>(L), 0.0);
      double max_score = -INFINITY, sum = 0.0;
      for (int64_t j = 0; j < L; ++j) {
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c) dot += double(q_row[c]) * double(cache.key(b, g, j, c));
        p[size_t(j)] = dot * scale;
        max_score = std::max(max_score, p[size_t(j)]);
      }
      for (double& x : p) sum += (x = std::exp(x - max_score));
      for (int64_t c = 0; c < d; ++c) {
        double acc = 0.0;
        for (int64_t j = 0; j < L; ++j) acc += p[size_t(j)] * double(cache.value(b, g, j, c));
        out[(b * s.num_heads + h) * d + c] = acc / sum;
      }
    }
  return out;
}

}  // namespace inferlab
