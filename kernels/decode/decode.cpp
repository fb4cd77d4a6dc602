// The decode contract (decode.h): shape checks, the cost of a ragged step and the float64
// oracle. The oracle is deliberately the plainest code: one (sequence, head) at a time, in
// double, reading only the cached tokens.
#include "kernels/decode/decode.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/check.h"

namespace inferlab {

DecodeShape decode_shape(const Tensor<float>& q, const KvCache& cache) {
  const KvCacheShape& c = cache.shape();
  const std::vector<int32_t>& lengths = cache.lengths();
  check_rank(q, 3, "q");
  const DecodeShape shape{q.dim(0), q.dim(1), c.num_kv_heads, c.max_seq_len, q.dim(2)};
  require_positive("num_heads (q.shape[1])", shape.num_heads);
  require(q.dim(0) == c.batch && q.dim(2) == c.head_dim, "q.shape", to_string(q.shape()),
          "must be [batch = " + std::to_string(c.batch) + ", num_heads, head_dim = " + std::to_string(c.head_dim) +
              "] to match the cache");
  require(shape.num_heads % shape.num_kv_heads == 0, "num_heads", shape.num_heads,
          "must be a multiple of num_kv_heads = " + std::to_string(shape.num_kv_heads));
  for (int64_t b = 0; b < shape.batch; ++b) {
    require(lengths[size_t(b)] > 0, "lengths[" + std::to_string(b) + "]", lengths[size_t(b)],
            "must be > 0 (append the new token's K and V before decoding it)");
  }
  return shape;
}

void check_decode_output(const Tensor<float>& out, const DecodeShape& shape) {
  check_shape(out, shape.query_shape(), "out");
}

Cost decode_step_cost(const KvCache& cache, int64_t num_heads) {
  Cost total;
  const KvCacheShape& c = cache.shape();
  const KvFormat& format = cache.format();
  const double G = double(c.num_kv_heads), d = double(c.head_dim), s = double(format.scale_bytes());
  for (int64_t b = 0; b < c.batch; ++b) {
    if (cache.length(b) == 0) continue;
    const double L = double(cache.length(b));
    if (!format.quantized()) {
      const Cost one = decode_attention_cost({num_heads, c.num_kv_heads, cache.length(b), c.head_dim},
                                             double(format.element_bytes()));
      total.flops += one.flops;
      total.bytes += one.bytes;
      continue;
    }
    total.flops += decode_attention_cost({num_heads, c.num_kv_heads, cache.length(b), c.head_dim}, 1.0).flops;
    const double k_scales = format.per_channel() ? d : L;
    total.bytes += 2.0 * G * L * d + G * (L + k_scales) * s + 2.0 * double(num_heads) * d * 4.0;
  }
  return total;
}

Tensor<double> decode_reference(const Tensor<float>& q, const KvCache& cache) {
  const DecodeShape s = decode_shape(q, cache);
  const int64_t d = s.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  Tensor<double> out(s.query_shape());
  std::vector<double> weights;
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t L = cache.length(b);
    weights.assign(static_cast<size_t>(L), 0.0);
    for (int64_t h = 0; h < s.num_heads; ++h) {
      const int64_t g = h / s.group_size();
      const float* q_row = q.data() + (b * s.num_heads + h) * d;
      double max_score = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < L; ++j) {
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c) dot += double(q_row[c]) * cache.key(b, g, j, c);
        weights[size_t(j)] = dot * scale;
        max_score = std::max(max_score, weights[size_t(j)]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < L; ++j) {
        weights[size_t(j)] = std::exp(weights[size_t(j)] - max_score);
        sum += weights[size_t(j)];
      }
      double* o_row = out.data() + (b * s.num_heads + h) * d;
      for (int64_t c = 0; c < d; ++c) o_row[c] = 0.0;
      for (int64_t j = 0; j < L; ++j) {
        const double p = weights[size_t(j)] / sum;
        for (int64_t c = 0; c < d; ++c) o_row[c] += p * cache.value(b, g, j, c);
      }
    }
  }
  return out;
}

}  // namespace inferlab
