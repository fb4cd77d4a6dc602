// The KV storage's codec, written once for every format (kv_storage.h): poisoned allocation,
// element and scale reads, the rounding or quantizing row write, row poisoning and copies.
#include "kernels/kv/kv_storage.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/check.h"
#include "common/half.h"
#include "kernels/kv/fp8_e4m3.h"
#include "kernels/kv/quantize.h"

namespace inferlab {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint16_t kHalfNaN = 0x7E00;  // a quiet NaN in fp16

template <class T>
T load_as(const std::byte* p) {
  T x;
  std::memcpy(&x, p, sizeof(T));
  return x;
}

template <class T>
void store_as(std::byte* p, T x) {
  std::memcpy(p, &x, sizeof(T));
}

}  // namespace

KvStorage::KvStorage(KvFormat format, int64_t num_layers, int64_t rows_per_layer, int64_t head_dim,
                     int64_t k_scales_per_layer)
    : format_(format),
      num_layers_(num_layers),
      rows_per_layer_(rows_per_layer),
      head_dim_(head_dim),
      k_scales_per_layer_(format.quantized() ? k_scales_per_layer : 0) {
  require_positive("num_layers", num_layers);
  require_positive("rows_per_layer", rows_per_layer);
  require_positive("head_dim", head_dim);
  const size_t rows = size_t(num_layers * rows_per_layer);
  // Unused rows are poisoned: 0xFF bytes are NaN in fp32 and fp16 (and −1 in int8, whose NaN
  // scales poison the row); FP8 rows hold the NaN code.
  const std::byte fill = format_.dtype == KvDtype::fp8 ? std::byte{kFp8E4M3NaN} : std::byte{0xFF};
  k_.assign(rows * size_t(head_dim) * format_.element_bytes(), fill);
  v_.assign(k_.size(), fill);
  if (format_.quantized()) {
    require_positive("k_scales_per_layer", k_scales_per_layer);
    k_scales_.resize(size_t(num_layers * k_scales_per_layer_) * format_.scale_bytes());
    v_scales_.resize(rows * format_.scale_bytes());
    poison_k_scales(0, num_layers * k_scales_per_layer_);
    for (size_t i = 0; i < rows; ++i) poison_scale(v_scales_, int64_t(i));
  }
}

// ---- scales and elements ----

float KvStorage::scale_at(const HugePageBuffer<std::byte>& scales, int64_t i) const {
  if (format_.scale_bytes() == 2) return half_bits_to_float(load_as<uint16_t>(scales.data() + 2 * i));
  return load_as<float>(scales.data() + 4 * i);
}

float KvStorage::set_scale(HugePageBuffer<std::byte>& scales, int64_t i, float scale) {
  if (format_.scale_bytes() == 2) {
    const uint16_t bits = scale_to_fp16_up(scale);
    store_as(scales.data() + 2 * i, bits);
    return half_bits_to_float(bits);
  }
  store_as(scales.data() + 4 * i, scale);
  return scale;
}

void KvStorage::poison_scale(HugePageBuffer<std::byte>& scales, int64_t i) {
  if (format_.scale_bytes() == 2) {
    store_as(scales.data() + 2 * i, kHalfNaN);
  } else {
    store_as(scales.data() + 4 * i, kNaN);
  }
}

float KvStorage::element(const HugePageBuffer<std::byte>& from, int64_t index) const {
  switch (format_.dtype) {
    case KvDtype::fp32:
      return load_as<float>(from.data() + 4 * index);
    case KvDtype::fp16:
      return half_bits_to_float(load_as<uint16_t>(from.data() + 2 * index));
    case KvDtype::int8:
      return float(static_cast<int8_t>(from[size_t(index)]));
    case KvDtype::fp8:
      return fp8_e4m3_to_float(static_cast<uint8_t>(from[size_t(index)]));
  }
  return kNaN;
}

float KvStorage::k_scale(int64_t i) const { return format_.quantized() ? scale_at(k_scales_, i) : 0.0f; }

float KvStorage::v_scale(int64_t row) const { return format_.quantized() ? scale_at(v_scales_, row) : 0.0f; }

bool KvStorage::k_scale_unset(int64_t i) const { return std::isnan(scale_at(k_scales_, i)); }

float KvStorage::key(int64_t row, int64_t c, int64_t k_scale_index) const {
  const float x = element(k_, row * head_dim_ + c);
  return format_.quantized() ? k_scale(k_scale_index) * x : x;
}

float KvStorage::value(int64_t row, int64_t c) const {
  const float x = element(v_, row * head_dim_ + c);
  return format_.quantized() ? v_scale(row) * x : x;
}

// ---- writing ----

float KvStorage::set_k_scale(int64_t i, float scale) { return set_scale(k_scales_, i, scale); }

void KvStorage::store_row(int64_t row, const float* k_row, const float* v_row, int64_t k_channel_scales) {
  const int64_t d = head_dim_;
  switch (format_.dtype) {
    case KvDtype::fp32:
      std::memcpy(k_.data() + 4 * row * d, k_row, size_t(4 * d));
      std::memcpy(v_.data() + 4 * row * d, v_row, size_t(4 * d));
      return;
    case KvDtype::fp16:
      for (int64_t c = 0; c < d; ++c) {
        store_as(k_.data() + 2 * (row * d + c), float_to_half_bits(k_row[c]));
        store_as(v_.data() + 2 * (row * d + c), float_to_half_bits(v_row[c]));
      }
      return;
    case KvDtype::fp8: {
      auto* k = reinterpret_cast<uint8_t*>(k_.data()) + row * d;
      auto* v = reinterpret_cast<uint8_t*>(v_.data()) + row * d;
      set_scale(k_scales_, row, quantize_row_fp8({k_row, size_t(d)}, {k, size_t(d)}, saturated_));
      set_scale(v_scales_, row, quantize_row_fp8({v_row, size_t(d)}, {v, size_t(d)}, saturated_));
      return;
    }
    case KvDtype::int8:
      break;
  }
  auto* k = reinterpret_cast<int8_t*>(k_.data()) + row * d;
  auto* v = reinterpret_cast<int8_t*>(v_.data()) + row * d;
  // Stores x with scale Δ, counting a value that has to be clamped: round(|x|/Δ) > 127, or
  // x ≠ 0 with Δ = 0 (a per-channel scale calibrated on zeros).
  const auto quantize = [this](float x, float scale) {
    if (scale > 0.0f ? std::fabs(std::round(x / scale)) > 127.0f : x != 0.0f) ++saturated_;
    return quantize_int8(x, scale);
  };
  float v_max = 0.0f;
  for (int64_t c = 0; c < d; ++c) v_max = std::max(v_max, std::fabs(v_row[c]));
  const float v_scale = set_scale(v_scales_, row, int8_scale(v_max));
  for (int64_t c = 0; c < d; ++c) v[c] = quantize(v_row[c], v_scale);
  if (!format_.per_channel()) {
    float k_max = 0.0f;
    for (int64_t c = 0; c < d; ++c) k_max = std::max(k_max, std::fabs(k_row[c]));
    const float k_scale = set_scale(k_scales_, row, int8_scale(k_max));
    for (int64_t c = 0; c < d; ++c) k[c] = quantize(k_row[c], k_scale);
    return;
  }
  for (int64_t c = 0; c < d; ++c) {
    const int64_t i = k_channel_scales + c;
    float scale = scale_at(k_scales_, i);
    if (std::isnan(scale)) scale = set_scale(k_scales_, i, int8_scale(std::fabs(k_row[c])));  // no prompt: this token calibrates
    k[c] = quantize(k_row[c], scale);
  }
}

void KvStorage::poison_rows(int64_t first, int64_t count) {
  const size_t d = size_t(head_dim_);
  const size_t begin = size_t(first) * d, bytes = size_t(count) * d * format_.element_bytes();
  switch (format_.dtype) {
    case KvDtype::fp32:
    case KvDtype::fp16:
      std::memset(k_.data() + begin * format_.element_bytes(), 0xFF, bytes);
      std::memset(v_.data() + begin * format_.element_bytes(), 0xFF, bytes);
      return;
    case KvDtype::fp8:
      std::memset(k_.data() + begin, kFp8E4M3NaN, bytes);
      std::memset(v_.data() + begin, kFp8E4M3NaN, bytes);
      for (int64_t r = first; r < first + count; ++r) {
        poison_scale(k_scales_, r);
        poison_scale(v_scales_, r);
      }
      return;
    case KvDtype::int8:  // the codes stay; NaN scales make the row decode to NaN
      for (int64_t r = first; r < first + count; ++r) {
        poison_scale(v_scales_, r);
        if (!format_.per_channel()) poison_scale(k_scales_, r);
      }
      return;
  }
}

void KvStorage::poison_k_scales(int64_t first, int64_t count) {
  for (int64_t i = first; i < first + count; ++i) poison_scale(k_scales_, i);
}

void KvStorage::copy_rows(int64_t from, int64_t to, int64_t count) {
  const size_t row_bytes = size_t(head_dim_) * format_.element_bytes(), scale_bytes = format_.scale_bytes();
  const size_t n = size_t(count);
  std::memcpy(k_.data() + size_t(to) * row_bytes, k_.data() + size_t(from) * row_bytes, n * row_bytes);
  std::memcpy(v_.data() + size_t(to) * row_bytes, v_.data() + size_t(from) * row_bytes, n * row_bytes);
  if (format_.quantized()) {  // per-token scales (a paged cache has no per-channel ones)
    std::memcpy(k_scales_.data() + size_t(to) * scale_bytes, k_scales_.data() + size_t(from) * scale_bytes,
                n * scale_bytes);
    std::memcpy(v_scales_.data() + size_t(to) * scale_bytes, v_scales_.data() + size_t(from) * scale_bytes,
                n * scale_bytes);
  }
}

}  // namespace inferlab
