#include "kernels/quant/int8_kv_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "common/half.h"

namespace inferlab {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint16_t kHalfNaN = 0x7E00;      // a quiet NaN in fp16
constexpr uint16_t kHalfMaxBits = 0x7BFF;  // 65504, the largest finite fp16

}  // namespace

std::string_view to_string(KeyScaling scaling) {
  return scaling == KeyScaling::per_token ? "per_token" : "per_channel";
}

std::string_view to_string(ScaleDtype dtype) {
  return dtype == ScaleDtype::fp32 ? "fp32" : "fp16";
}

uint16_t scale_to_fp16_up(float scale) {
  uint16_t bits = float_to_half_bits(scale);     // nearest (ties to even); may be below scale
  if (bits >= 0x7C00u) return kHalfMaxBits;      // past the largest finite fp16 (or Inf)
  if (half_bits_to_float(bits) < scale) ++bits;  // the next fp16 up (positive: the next bit pattern)
  return bits > kHalfMaxBits ? kHalfMaxBits : bits;
}

float int8_scale(float max_abs) {
  return max_abs / 127.0f;
}

int8_t quantize_int8(float x, float scale) {
  if (scale == 0.0f) return 0;
  // Round first, then clamp in float: a value past the range saturates at ±127 instead of
  // wrapping around through the int8 cast (128 → −128 would flip the sign).
  const float r = std::round(x / scale);
  return static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
}

Int8KvCache::Int8KvCache(const KvCacheShape& shape, KeyScaling key_scaling, ScaleDtype scale_dtype)
    : QuantizedKvCache(shape, "INT8"), key_scaling_(key_scaling), scale_dtype_(scale_dtype) {
  k_.assign(size_t(shape.elements()), int8_t(-1));
  v_.assign(size_t(shape.elements()), int8_t(-1));
  const size_t token_scales = size_t(shape.batch * shape.num_kv_heads * shape.max_seq_len);
  const size_t k_count =
      key_scaling == KeyScaling::per_token ? token_scales : size_t(shape.batch * shape.num_kv_heads * shape.head_dim);
  if (scale_dtype == ScaleDtype::fp32) {
    v_scales_.assign(token_scales, kNaN);
    k_scales_.assign(k_count, kNaN);
  } else {
    v_scales_fp16_.assign(token_scales, kHalfNaN);
    k_scales_fp16_.assign(k_count, kHalfNaN);
  }
}

float Int8KvCache::k_scale_at(int64_t i) const {
  return scale_dtype_ == ScaleDtype::fp32 ? k_scales_[size_t(i)] : half_bits_to_float(k_scales_fp16_[size_t(i)]);
}

float Int8KvCache::v_scale_at(int64_t i) const {
  return scale_dtype_ == ScaleDtype::fp32 ? v_scales_[size_t(i)] : half_bits_to_float(v_scales_fp16_[size_t(i)]);
}

float Int8KvCache::set_k_scale(int64_t i, float scale) {
  if (scale_dtype_ == ScaleDtype::fp32) return k_scales_[size_t(i)] = scale;
  k_scales_fp16_[size_t(i)] = scale_to_fp16_up(scale);
  return half_bits_to_float(k_scales_fp16_[size_t(i)]);
}

float Int8KvCache::set_v_scale(int64_t i, float scale) {
  if (scale_dtype_ == ScaleDtype::fp32) return v_scales_[size_t(i)] = scale;
  v_scales_fp16_[size_t(i)] = scale_to_fp16_up(scale);
  return half_bits_to_float(v_scales_fp16_[size_t(i)]);
}

void Int8KvCache::poison_k_scale(int64_t i) {
  if (scale_dtype_ == ScaleDtype::fp32) {
    k_scales_[size_t(i)] = kNaN;
  } else {
    k_scales_fp16_[size_t(i)] = kHalfNaN;
  }
}

void Int8KvCache::poison_v_scale(int64_t i) {
  if (scale_dtype_ == ScaleDtype::fp32) {
    v_scales_[size_t(i)] = kNaN;
  } else {
    v_scales_fp16_[size_t(i)] = kHalfNaN;
  }
}

size_t Int8KvCache::scale_bytes() const {
  return 4 * (k_scales_.size() + v_scales_.size()) + 2 * (k_scales_fp16_.size() + v_scales_fp16_.size());
}

size_t Int8KvCache::bytes() const {
  return k_.size() + v_.size() + scale_bytes();
}

void Int8KvCache::set_lengths(const std::vector<int64_t>& lengths) {
  require(int64_t(lengths.size()) == shape_.batch, "lengths.size()", lengths.size(),
          "must equal batch = " + std::to_string(shape_.batch));
  for (size_t b = 0; b < lengths.size(); ++b)
    require(lengths[b] >= 0 && lengths[b] <= shape_.max_seq_len, "lengths[" + std::to_string(b) + "]", lengths[b],
            "must be in [0, max_seq_len = " + std::to_string(shape_.max_seq_len) + "]");
  for (size_t b = 0; b < lengths.size(); ++b) lengths_[b] = int32_t(lengths[b]);
  poison_unused();
}

void Int8KvCache::poison_unused() {
  for (int64_t b = 0; b < shape_.batch; ++b)
    for (int64_t g = 0; g < shape_.num_kv_heads; ++g)
      for (int64_t t = lengths_[size_t(b)]; t < shape_.max_seq_len; ++t) {
        poison_v_scale(token_scale_index(b, g, t));
        if (key_scaling_ == KeyScaling::per_token) poison_k_scale(token_scale_index(b, g, t));
      }
}

void Int8KvCache::store_token(int64_t sequence, int64_t g, int64_t token, const float* k_row, const float* v_row) {
  const int64_t d = shape_.head_dim;
  const int64_t at = shape_.offset(sequence, g, token);
  float v_max = 0.0f;
  // Stores x with scale Δ, counting a value that has to be clamped: round(|x|/Δ) > 127, or
  // x ≠ 0 with Δ = 0 (a per-channel scale calibrated on zeros).
  const auto store = [this](float x, float scale) {
    if (scale > 0.0f ? std::fabs(std::round(x / scale)) > 127.0f : x != 0.0f) ++saturated_;
    return quantize_int8(x, scale);
  };
  for (int64_t c = 0; c < d; ++c) v_max = std::max(v_max, std::fabs(v_row[c]));
  const float v_scale = set_v_scale(token_scale_index(sequence, g, token), int8_scale(v_max));
  for (int64_t c = 0; c < d; ++c) v_[size_t(at + c)] = store(v_row[c], v_scale);
  if (key_scaling_ == KeyScaling::per_token) {
    float k_max = 0.0f;
    for (int64_t c = 0; c < d; ++c) k_max = std::max(k_max, std::fabs(k_row[c]));
    const float k_scale = set_k_scale(token_scale_index(sequence, g, token), int8_scale(k_max));
    for (int64_t c = 0; c < d; ++c) k_[size_t(at + c)] = store(k_row[c], k_scale);
  } else {
    for (int64_t c = 0; c < d; ++c) {
      const int64_t i = channel_scale_index(sequence, g, c);
      float scale = k_scale_at(i);
      if (std::isnan(scale))
        scale = set_k_scale(i, int8_scale(std::fabs(k_row[c])));  // no prompt: this token calibrates
      k_[size_t(at + c)] = store(k_row[c], scale);
    }
  }
}

void Int8KvCache::prefill(int64_t sequence, const Tensor<float>& k, const Tensor<float>& v) {
  const int64_t L = check_prefill(sequence, k, v), d = shape_.head_dim;
  for (int64_t g = 0; g < shape_.num_kv_heads; ++g) {
    if (key_scaling_ == KeyScaling::per_channel) {
      for (int64_t c = 0; c < d; ++c) {
        float max_abs = 0.0f;
        for (int64_t t = 0; t < L; ++t) max_abs = std::max(max_abs, std::fabs(k[(g * L + t) * d + c]));
        if (L > 0) {
          set_k_scale(channel_scale_index(sequence, g, c), int8_scale(max_abs));
        } else {
          poison_k_scale(channel_scale_index(sequence, g, c));
        }
      }
    }
    for (int64_t t = 0; t < L; ++t) store_token(sequence, g, t, k.data() + (g * L + t) * d, v.data() + (g * L + t) * d);
  }
  lengths_[size_t(sequence)] = int32_t(L);
  poison_unused();
}

void Int8KvCache::append(const Tensor<float>& k_new, const Tensor<float>& v_new) {
  check_append(k_new, v_new);
  const int64_t d = shape_.head_dim;
  for (int64_t b = 0; b < shape_.batch; ++b)
    for (int64_t g = 0; g < shape_.num_kv_heads; ++g) {
      const int64_t row = (b * shape_.num_kv_heads + g) * d;
      store_token(b, g, lengths_[size_t(b)], k_new.data() + row, v_new.data() + row);
    }
  commit_append();
}

float Int8KvCache::key_step(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const {
  return key_scaling_ == KeyScaling::per_token ? k_scale_at(token_scale_index(sequence, kv_head, token))
                                               : k_scale_at(channel_scale_index(sequence, kv_head, c));
}

float Int8KvCache::value_step(int64_t sequence, int64_t kv_head, int64_t token) const {
  return v_scale_at(token_scale_index(sequence, kv_head, token));
}

float Int8KvCache::key(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const {
  return dequantize_int8(k_[size_t(shape_.offset(sequence, kv_head, token) + c)],
                         key_step(sequence, kv_head, token, c));
}

float Int8KvCache::value(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const {
  return dequantize_int8(v_[size_t(shape_.offset(sequence, kv_head, token) + c)], value_step(sequence, kv_head, token));
}

Int8KvCache make_int8_kv_cache(const Tensor<float>& k, const Tensor<float>& v, const std::vector<int64_t>& lengths,
                               KeyScaling key_scaling, ScaleDtype scale_dtype) {
  check_rank(k, 4, "k");
  check_shape(v, k.shape(), "v");
  const KvCacheShape shape{k.dim(0), k.dim(1), k.dim(2), k.dim(3)};
  require(int64_t(lengths.size()) == shape.batch, "lengths.size()", lengths.size(), "must equal batch");
  Int8KvCache cache(shape, key_scaling, scale_dtype);
  const int64_t d = shape.head_dim;
  for (int64_t b = 0; b < shape.batch; ++b) {
    const int64_t L = lengths[size_t(b)];
    require(L >= 0 && L <= shape.max_seq_len, "lengths[" + std::to_string(b) + "]", L, "must be in [0, max_seq_len]");
    Tensor<float> k_b({shape.num_kv_heads, L, d}), v_b({shape.num_kv_heads, L, d});
    for (int64_t g = 0; g < shape.num_kv_heads; ++g) {
      std::copy_n(k.data() + shape.offset(b, g, 0), L * d, k_b.data() + g * L * d);
      std::copy_n(v.data() + shape.offset(b, g, 0), L * d, v_b.data() + g * L * d);
    }
    cache.prefill(b, k_b, v_b);
  }
  return cache;
}

}  // namespace inferlab
