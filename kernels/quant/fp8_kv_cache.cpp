#include "kernels/quant/fp8_kv_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "kernels/quant/fp8_e4m3.h"

namespace inferlab {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Throws naming (sequence, KV head) when one of the @p n floats at @p x is NaN or ±Inf.
void require_finite(const float* x, int64_t n, const char* what, int64_t sequence, int64_t g) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      throw std::invalid_argument(std::string(what) + ": sequence " + std::to_string(sequence) + ", KV head " +
                                  std::to_string(g) + " holds a non-finite value (NaN/Inf): it cannot be quantized "
                                  "to FP8 and nothing was written");
}

}  // namespace

float quantize_row_fp8(std::span<const float> row, std::span<uint8_t> codes, int64_t& saturated) {
  require(codes.size() == row.size(), "codes.size()", codes.size(), "must equal row.size() = " + std::to_string(row.size()));
  float max_abs = 0.0f;
  for (const float x : row) max_abs = std::max(max_abs, std::fabs(x));
  const float scale = max_abs / kFp8E4M3Max;
  for (size_t c = 0; c < row.size(); ++c) {
    const float y = scale == 0.0f ? 0.0f : row[c] / scale;  // an all-zero row: scale 0, codes 0
    if (std::fabs(y) > 464.0f) ++saturated;  // past the midpoint of 448 and the next step (480)
    codes[c] = float_to_fp8_e4m3(y);
  }
  return scale;
}

Fp8KvCache::Fp8KvCache(const KvCacheShape& shape) : shape_(shape) {
  require_positive("batch", shape.batch);
  require_positive("num_kv_heads", shape.num_kv_heads);
  require_positive("max_seq_len", shape.max_seq_len);
  require_positive("head_dim", shape.head_dim);
  require(shape.max_seq_len <= INT32_MAX, "max_seq_len", shape.max_seq_len, "must fit in int32");
  lengths_.assign(size_t(shape.batch), 0);
  k_.assign(size_t(shape.elements()), kFp8E4M3NaN);  // unused slots decode to NaN
  v_.assign(size_t(shape.elements()), kFp8E4M3NaN);
  k_scales_.assign(size_t(shape.batch * shape.num_kv_heads * shape.max_seq_len), kNaN);
  v_scales_.assign(k_scales_.size(), kNaN);
}

void Fp8KvCache::check_sequence(int64_t sequence) const {
  require(sequence >= 0 && sequence < shape_.batch, "sequence", sequence,
          "must be in [0, batch = " + std::to_string(shape_.batch) + ")");
}

int64_t Fp8KvCache::length(int64_t sequence) const {
  check_sequence(sequence);
  return lengths_[size_t(sequence)];
}

int64_t Fp8KvCache::max_length() const {
  return *std::max_element(lengths_.begin(), lengths_.end());
}

void Fp8KvCache::prefill(int64_t sequence, const Tensor<float>& k, const Tensor<float>& v) {
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
  for (int64_t g = 0; g < shape_.num_kv_heads; ++g)
    for (int64_t t = 0; t < shape_.max_seq_len; ++t) {
      const int64_t at = shape_.offset(sequence, g, t), s = scale_index(sequence, g, t);
      if (t < L) {
        store_row(k.data() + (g * L + t) * d, k_.data() + at, k_scales_[size_t(s)]);
        store_row(v.data() + (g * L + t) * d, v_.data() + at, v_scales_[size_t(s)]);
      } else {  // poison what an earlier prompt of this sequence left
        std::fill_n(k_.begin() + at, d, kFp8E4M3NaN);
        std::fill_n(v_.begin() + at, d, kFp8E4M3NaN);
        k_scales_[size_t(s)] = v_scales_[size_t(s)] = kNaN;
      }
    }
  lengths_[size_t(sequence)] = int32_t(L);
}

void Fp8KvCache::check_append(const Tensor<float>& k_new, const Tensor<float>& v_new) const {
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
      require_finite(k_new.data() + (b * shape_.num_kv_heads + g) * d, d, "k_new", b, g);
      require_finite(v_new.data() + (b * shape_.num_kv_heads + g) * d, d, "v_new", b, g);
    }
}

void Fp8KvCache::append(const Tensor<float>& k_new, const Tensor<float>& v_new) {
  check_append(k_new, v_new);
  const int64_t d = shape_.head_dim;
  for (int64_t b = 0; b < shape_.batch; ++b) {
    for (int64_t g = 0; g < shape_.num_kv_heads; ++g) {
      const int64_t t = lengths_[size_t(b)], row = (b * shape_.num_kv_heads + g) * d;
      const int64_t at = shape_.offset(b, g, t), s = scale_index(b, g, t);
      store_row(k_new.data() + row, k_.data() + at, k_scales_[size_t(s)]);
      store_row(v_new.data() + row, v_.data() + at, v_scales_[size_t(s)]);
    }
    ++lengths_[size_t(b)];
  }
}

float Fp8KvCache::key(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const {
  return key_scale(sequence, kv_head, token) *
         fp8_e4m3_to_float(k_[size_t(shape_.offset(sequence, kv_head, token) + c)]);
}

float Fp8KvCache::value(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const {
  return value_scale(sequence, kv_head, token) *
         fp8_e4m3_to_float(v_[size_t(shape_.offset(sequence, kv_head, token) + c)]);
}

KvCache Fp8KvCache::dequantized() const {
  KvCache cache(shape_, KvDtype::fp32);
  const int64_t G = shape_.num_kv_heads, d = shape_.head_dim;
  for (int64_t b = 0; b < shape_.batch; ++b) {
    const int64_t L = lengths_[size_t(b)];
    Tensor<float> k({G, L, d}), v({G, L, d});
    for (int64_t g = 0; g < G; ++g)
      for (int64_t t = 0; t < L; ++t)
        for (int64_t c = 0; c < d; ++c) {
          k[(g * L + t) * d + c] = key(b, g, t, c);
          v[(g * L + t) * d + c] = value(b, g, t, c);
        }
    cache.prefill(b, k, v);
  }
  return cache;
}

Fp8KvCache make_fp8_kv_cache(const Tensor<float>& k, const Tensor<float>& v, const std::vector<int64_t>& lengths) {
  // make_kv_cache checks the shapes and lengths (naming them) and cuts each sequence's tokens.
  const KvCache full = make_kv_cache(k, v, lengths, KvDtype::fp32);
  Fp8KvCache cache(full.shape());
  for (int64_t b = 0; b < full.shape().batch; ++b) cache.prefill(b, full.keys(b), full.values(b));
  return cache;
}

}  // namespace inferlab
