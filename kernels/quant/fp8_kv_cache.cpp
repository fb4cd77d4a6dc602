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

Fp8KvCache::Fp8KvCache(const KvCacheShape& shape) : QuantizedKvCache(shape, "FP8") {
  k_.assign(size_t(shape.elements()), kFp8E4M3NaN);  // unused slots decode to NaN
  v_.assign(size_t(shape.elements()), kFp8E4M3NaN);
  k_scales_.assign(size_t(shape.batch * shape.num_kv_heads * shape.max_seq_len), kNaN);
  v_scales_.assign(k_scales_.size(), kNaN);
}

void Fp8KvCache::prefill(int64_t sequence, const Tensor<float>& k, const Tensor<float>& v) {
  const int64_t L = check_prefill(sequence, k, v), d = shape_.head_dim;
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

void Fp8KvCache::append(const Tensor<float>& k_new, const Tensor<float>& v_new) {
  check_append(k_new, v_new);
  const int64_t d = shape_.head_dim;
  for (int64_t b = 0; b < shape_.batch; ++b)
    for (int64_t g = 0; g < shape_.num_kv_heads; ++g) {
      const int64_t t = lengths_[size_t(b)], row = (b * shape_.num_kv_heads + g) * d;
      const int64_t at = shape_.offset(b, g, t), s = scale_index(b, g, t);
      store_row(k_new.data() + row, k_.data() + at, k_scales_[size_t(s)]);
      store_row(v_new.data() + row, v_.data() + at, v_scales_[size_t(s)]);
    }
  commit_append();
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
