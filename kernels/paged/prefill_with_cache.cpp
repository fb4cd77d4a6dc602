// Prefill with a cache (prefill_with_cache.h): the shape checks, the float64 oracle and the cost
// model, shared by every version.
#include "kernels/paged/prefill_with_cache.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/check.h"

namespace inferlab {

ChunkShape chunk_shape(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths, const KvCache& cache) {
  const KvCacheShape& c = cache.shape();
  check_rank(q, 3, "q");
  require(int64_t(chunk_lengths.size()) == c.batch, "chunk_lengths.size()", chunk_lengths.size(),
          "must equal the cache's batch = " + std::to_string(c.batch));
  ChunkShape s;
  s.num_tokens = q.dim(0);
  s.num_heads = q.dim(1);
  s.num_kv_heads = c.num_kv_heads;
  s.head_dim = q.dim(2);
  require(s.head_dim == c.head_dim, "q.shape[2] (head_dim)", s.head_dim,
          "must equal the cache's head_dim = " + std::to_string(c.head_dim));
  require(s.num_heads > 0 && s.num_heads % s.num_kv_heads == 0, "q.shape[1] (num_heads)", s.num_heads,
          "must be a positive multiple of num_kv_heads = " + std::to_string(s.num_kv_heads));
  int64_t total = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t n = chunk_lengths[size_t(b)], L = cache.length(b);
    require(n >= 0 && n <= L, "chunk_lengths[" + std::to_string(b) + "]", n,
            "must be in [0, lengths[b] = " + std::to_string(L) +
                "]: the chunk's K and V are written to the cache before its queries attend");
    for (int64_t i = 0; i < n; ++i) {
      s.token_sequence.push_back(int32_t(b));
      s.token_position.push_back(int32_t(L - n + i));
    }
    total += n;
  }
  require(total == s.num_tokens, "q.shape[0] (num_tokens)", s.num_tokens,
          "must equal Σ chunk_lengths = " + std::to_string(total));
  return s;
}

Tensor<double> prefill_with_cache_reference(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths,
                                            const KvCache& cache) {
  const ChunkShape s = chunk_shape(q, chunk_lengths, cache);
  const int64_t d = s.head_dim;
  const double scale = 1.0 / std::sqrt(double(d));
  Tensor<double> out({s.num_tokens, s.num_heads, d});
  std::vector<double> weights;
  for (int64_t i = 0; i < s.num_tokens; ++i) {
    const int64_t b = s.token_sequence[size_t(i)], keys = s.token_position[size_t(i)] + 1;
    for (int64_t h = 0; h < s.num_heads; ++h) {
      const int64_t g = h / s.group_size();
      const float* q_row = q.data() + (i * s.num_heads + h) * d;
      weights.assign(size_t(keys), 0.0);
      double max_score = -INFINITY;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c) dot += double(q_row[c]) * double(cache.key(b, g, j, c));
        weights[size_t(j)] = dot * scale;
        max_score = std::max(max_score, weights[size_t(j)]);
      }
      double sum = 0.0;
      for (double& w : weights) sum += (w = std::exp(w - max_score));
      double* o = out.data() + (i * s.num_heads + h) * d;
      std::fill(o, o + d, 0.0);
      for (int64_t j = 0; j < keys; ++j)
        for (int64_t c = 0; c < d; ++c) o[c] += weights[size_t(j)] / sum * double(cache.value(b, g, j, c));
    }
  }
  return out;
}

Cost prefill_with_cache_cost(const std::vector<int64_t>& chunk_lengths, const KvCache& cache, int64_t num_heads) {
  const KvCacheShape& c = cache.shape();
  const double d = double(c.head_dim), G = double(c.num_kv_heads);
  const double row_bytes = d * double(cache.format().element_bytes()) + double(cache.format().scale_bytes());
  Cost cost;
  for (int64_t b = 0; b < c.batch; ++b) {
    const double n = double(chunk_lengths.at(size_t(b))), L = double(cache.length(b));
    if (n == 0) continue;
    const double visible = n * (L - n) + n * (n + 1) / 2;  // keys seen by the chunk's queries
    cost.flops += 4.0 * d * double(num_heads) * visible;
    cost.bytes += 2.0 * G * L * row_bytes + 2.0 * n * double(num_heads) * d * 4.0;
  }
  return cost;
}

}  // namespace inferlab
