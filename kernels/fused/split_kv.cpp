// Split-KV decode, chapter 05: the number of splits and the host-side reduce (split_kv.h).
#include "kernels/fused/split_kv.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace inferlab {

namespace {

// ⌈a / b⌉ for a ≥ 0, b > 0, without forming a + b − 1 (which overflows for the CPU policy's "no
// limit" max_tokens = INT64_MAX; UBSan caught it).
int64_t divide_rounding_up(int64_t a, int64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace

int64_t choose_num_splits(int64_t work_items, int64_t max_length, const SplitPolicy& policy) {
  require_positive("work_items", work_items);
  require_positive("max_length", max_length);
  require_positive("target_items", policy.target_items);
  require_positive("min_tokens", policy.min_tokens);
  require_positive("max_tokens", policy.max_tokens);
  const int64_t to_fill = divide_rounding_up(policy.target_items, work_items);
  const int64_t long_enough = std::max<int64_t>(1, max_length / policy.min_tokens);
  const int64_t must = divide_rounding_up(max_length, policy.max_tokens);
  return std::max(must, std::min(to_fill, long_enough));
}

SplitPolicy cpu_split_policy() {
  return {4 * int64_t(omp_get_max_threads()), 512};
}

SplitPartials::SplitPartials(const DecodeShape& shape, int64_t splits)
    : num_splits(splits),
      head_dim(shape.head_dim),
      acc(size_t(shape.batch * shape.num_heads * splits * shape.head_dim)),
      max(size_t(shape.batch * shape.num_heads * splits)),
      sum(size_t(shape.batch * shape.num_heads * splits)) {
  require_positive("num_splits", splits);
}

void reduce_splits(const SplitPartials& partials, Tensor<float>& out) {
  const int64_t rows = out.size() / partials.head_dim, d = partials.head_dim, S = partials.num_splits;
  require(int64_t(partials.max.size()) == rows * S, "out", to_string(out.shape()),
          "does not match the partials' batch × num_heads × head_dim");
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    float m = -INFINITY;
    for (int64_t s = 0; s < S; ++s) m = std::max(m, partials.max[size_t(partials.index(row, s))]);
    float* o = out.data() + row * d;
    std::fill(o, o + d, 0.0f);
    float total = 0.0f;
    for (int64_t s = 0; s < S; ++s) {
      const int64_t i = partials.index(row, s);
      if (partials.sum[size_t(i)] == 0.0f) continue;  // an empty split: weight 0, acc never read
      const float weight = std::exp(partials.max[size_t(i)] - m);
      total += weight * partials.sum[size_t(i)];
      const float* acc = partials.acc.data() + i * d;
      for (int64_t c = 0; c < d; ++c) o[c] += weight * acc[c];
    }
    const float inv_total = 1.0f / total;
    for (int64_t c = 0; c < d; ++c) o[c] *= inv_total;
  }
}

}  // namespace inferlab
