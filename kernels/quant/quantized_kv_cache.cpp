#include "kernels/quant/quantized_kv_cache.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/check.h"

namespace inferlab {

QuantizedKvCache::QuantizedKvCache(const KvCacheShape& shape, const char* format) : shape_(shape), format_(format) {
  require_positive("batch", shape.batch);
  require_positive("num_kv_heads", shape.num_kv_heads);
  require_positive("max_seq_len", shape.max_seq_len);
  require_positive("head_dim", shape.head_dim);
  require(shape.max_seq_len <= INT32_MAX, "max_seq_len", shape.max_seq_len, "must fit in int32");
  lengths_.assign(size_t(shape.batch), 0);
}

void QuantizedKvCache::require_finite(const float* x, int64_t n, const char* what, int64_t sequence,
                                      int64_t kv_head) const {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      throw std::invalid_argument(
          std::string(what) + ": sequence " + std::to_string(sequence) + ", KV head " + std::to_string(kv_head) +
          " holds a non-finite value (NaN/Inf): it cannot be quantized to " + format_ + " and nothing was written");
}

void QuantizedKvCache::check_sequence(int64_t sequence) const {
  require(sequence >= 0 && sequence < shape_.batch, "sequence", sequence,
          "must be in [0, batch = " + std::to_string(shape_.batch) + ")");
}

int64_t QuantizedKvCache::length(int64_t sequence) const {
  check_sequence(sequence);
  return lengths_[size_t(sequence)];
}

int64_t QuantizedKvCache::max_length() const {
  return *std::max_element(lengths_.begin(), lengths_.end());
}

int64_t QuantizedKvCache::check_prefill(int64_t sequence, const Tensor<float>& k, const Tensor<float>& v) const {
  check_sequence(sequence);
  check_rank(k, 3, "k");
  check_shape(v, k.shape(), "v");
  const int64_t L = k.dim(1), d = shape_.head_dim;
  require(k.dim(0) == shape_.num_kv_heads && k.dim(2) == d, "k.shape", to_string(k.shape()),
          "must be [num_kv_heads, seq_len, head_dim]");
  require(L <= shape_.max_seq_len, "seq_len (k.shape[1])", L, "exceeds the cache's max_seq_len");
  for (int64_t g = 0; g < shape_.num_kv_heads; ++g) {
    require_finite(k.data() + g * L * d, L * d, "k (prefill)", sequence, g);
    require_finite(v.data() + g * L * d, L * d, "v (prefill)", sequence, g);
  }
  return L;
}

void QuantizedKvCache::check_append(const Tensor<float>& k_new, const Tensor<float>& v_new) const {
  const Shape token_shape{shape_.batch, shape_.num_kv_heads, shape_.head_dim};
  check_shape(k_new, token_shape, "k_new");
  check_shape(v_new, token_shape, "v_new");
  for (int64_t b = 0; b < shape_.batch; ++b)
    require(lengths_[size_t(b)] < shape_.max_seq_len, "lengths[" + std::to_string(b) + "]", lengths_[size_t(b)],
            "sequence " + std::to_string(b) + " is full (max_seq_len = " + std::to_string(shape_.max_seq_len) +
                "): appending would write past the end of its cache");
  const int64_t d = shape_.head_dim;
  for (int64_t b = 0; b < shape_.batch; ++b)
    for (int64_t g = 0; g < shape_.num_kv_heads; ++g) {
      const int64_t row = (b * shape_.num_kv_heads + g) * d;
      require_finite(k_new.data() + row, d, "k_new", b, g);
      require_finite(v_new.data() + row, d, "v_new", b, g);
    }
}

void QuantizedKvCache::commit_append() {
  for (int32_t& length : lengths_) {
    if (length >= shape_.max_seq_len) throw std::logic_error("commit_append: a sequence is already full");
    ++length;
  }
}

}  // namespace inferlab
