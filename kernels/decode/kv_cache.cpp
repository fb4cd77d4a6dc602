#include "kernels/decode/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "common/half.h"

namespace inferlab {

std::string_view to_string(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::fp32:
      return "fp32";
    case KvDtype::fp16:
      return "fp16";
  }
  return "?";
}

KvDtype parse_kv_dtype(std::string_view text) {
  if (text == "fp32") return KvDtype::fp32;
  if (text == "fp16") return KvDtype::fp16;
  require(false, "kv dtype", text, "must be fp32 or fp16");
  return KvDtype::fp32;
}

size_t bytes_per_element(KvDtype dtype) {
  return dtype == KvDtype::fp16 ? 2 : 4;
}

Precision precision_of(KvDtype dtype) {
  return dtype == KvDtype::fp16 ? Precision::fp16 : Precision::fp32;
}

KvCache::KvCache(const KvCacheShape& shape, KvDtype dtype) : shape_(shape), dtype_(dtype) {
  require_positive("batch", shape.batch);
  require_positive("num_kv_heads", shape.num_kv_heads);
  require_positive("max_seq_len", shape.max_seq_len);
  require_positive("head_dim", shape.head_dim);
  require(shape.max_seq_len <= INT32_MAX, "max_seq_len", shape.max_seq_len, "must fit in int32");
  const size_t bytes = static_cast<size_t>(element_count(shape.shape())) * bytes_per_element(dtype);
  lengths_.assign(static_cast<size_t>(shape.batch), 0);
  k_.assign(bytes, std::byte{0xFF});  // every slot unused: poisoned
  v_.assign(bytes, std::byte{0xFF});
}

void KvCache::check_sequence(int64_t sequence) const {
  require(sequence >= 0 && sequence < shape_.batch, "sequence", sequence,
          "must be in [0, batch = " + std::to_string(shape_.batch) + ")");
}

int64_t KvCache::length(int64_t sequence) const {
  check_sequence(sequence);
  return lengths_[static_cast<size_t>(sequence)];
}

int64_t KvCache::max_length() const {
  return *std::max_element(lengths_.begin(), lengths_.end());
}

void KvCache::store(HugePageBuffer<std::byte>& to, int64_t index, float x) {
  if (dtype_ == KvDtype::fp32) {
    std::memcpy(to.data() + index * 4, &x, 4);
  } else {
    const uint16_t bits = float_to_half_bits(x);
    std::memcpy(to.data() + index * 2, &bits, 2);
  }
}

float KvCache::load(const HugePageBuffer<std::byte>& from, int64_t index) const {
  if (dtype_ == KvDtype::fp32) {
    float x;
    std::memcpy(&x, from.data() + index * 4, 4);
    return x;
  }
  uint16_t bits;
  std::memcpy(&bits, from.data() + index * 2, 2);
  return half_bits_to_float(bits);
}

void KvCache::prefill(int64_t sequence, const Tensor<float>& k, const Tensor<float>& v) {
  check_sequence(sequence);
  check_rank(k, 3, "k");
  check_shape(v, k.shape(), "v");
  const int64_t L = k.dim(1);
  require(k.dim(0) == shape_.num_kv_heads && k.dim(2) == shape_.head_dim, "k.shape", to_string(k.shape()),
          "must be [num_kv_heads = " + std::to_string(shape_.num_kv_heads) +
              ", seq_len, head_dim = " + std::to_string(shape_.head_dim) + "]");
  require(L <= shape_.max_seq_len, "seq_len (k.shape[1])", L,
          "exceeds the cache's max_seq_len = " + std::to_string(shape_.max_seq_len));
  const int64_t d = shape_.head_dim;
  for (int64_t g = 0; g < shape_.num_kv_heads; ++g)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t c = 0; c < d; ++c) {
        store(k_, shape_.offset(sequence, g, t) + c, k[(g * L + t) * d + c]);
        store(v_, shape_.offset(sequence, g, t) + c, v[(g * L + t) * d + c]);
      }
  lengths_[static_cast<size_t>(sequence)] = static_cast<int32_t>(L);
  poison_unused();
}

void KvCache::check_append(const Tensor<float>& k_new, const Tensor<float>& v_new) const {
  const Shape token_shape{shape_.batch, shape_.num_kv_heads, shape_.head_dim};
  check_shape(k_new, token_shape, "k_new");
  check_shape(v_new, token_shape, "v_new");
  for (int64_t b = 0; b < shape_.batch; ++b) {
    require(lengths_[size_t(b)] < shape_.max_seq_len, "lengths[" + std::to_string(b) + "]", lengths_[size_t(b)],
            "sequence " + std::to_string(b) + " is full (max_seq_len = " + std::to_string(shape_.max_seq_len) +
                "): appending would write past the end of its cache");
  }
}

void KvCache::commit_append() {
  for (int32_t& length : lengths_) {
    if (length >= shape_.max_seq_len) throw std::logic_error("KvCache::commit_append: a sequence is already full");
    ++length;
  }
}

void KvCache::append(const Tensor<float>& k_new, const Tensor<float>& v_new) {
  check_append(k_new, v_new);
  const int64_t d = shape_.head_dim;
  for (int64_t b = 0; b < shape_.batch; ++b)
    for (int64_t g = 0; g < shape_.num_kv_heads; ++g) {
      const int64_t slot = shape_.offset(b, g, lengths_[size_t(b)]);
      for (int64_t c = 0; c < d; ++c) {
        store(k_, slot + c, k_new[(b * shape_.num_kv_heads + g) * d + c]);
        store(v_, slot + c, v_new[(b * shape_.num_kv_heads + g) * d + c]);
      }
    }
  commit_append();
}

void KvCache::set_lengths(const std::vector<int64_t>& lengths) {
  require(static_cast<int64_t>(lengths.size()) == shape_.batch, "lengths.size()", lengths.size(),
          "must equal batch = " + std::to_string(shape_.batch));
  for (size_t b = 0; b < lengths.size(); ++b) {
    require(lengths[b] >= 0 && lengths[b] <= shape_.max_seq_len, "lengths[" + std::to_string(b) + "]", lengths[b],
            "must be in [0, max_seq_len = " + std::to_string(shape_.max_seq_len) + "]");
  }
  for (size_t b = 0; b < lengths.size(); ++b) lengths_[b] = static_cast<int32_t>(lengths[b]);
  poison_unused();
}

void KvCache::poison_unused() {
  const size_t e = bytes_per_element(dtype_);
  for (int64_t b = 0; b < shape_.batch; ++b)
    for (int64_t g = 0; g < shape_.num_kv_heads; ++g) {
      const size_t from = static_cast<size_t>(shape_.offset(b, g, lengths_[size_t(b)])) * e;
      const size_t to = static_cast<size_t>(shape_.offset(b, g, shape_.max_seq_len)) * e;
      std::fill(k_.begin() + std::ptrdiff_t(from), k_.begin() + std::ptrdiff_t(to), std::byte{0xFF});
      std::fill(v_.begin() + std::ptrdiff_t(from), v_.begin() + std::ptrdiff_t(to), std::byte{0xFF});
    }
}

float KvCache::key(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const {
  return load(k_, shape_.offset(sequence, kv_head, token) + c);
}

float KvCache::value(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const {
  return load(v_, shape_.offset(sequence, kv_head, token) + c);
}

Tensor<float> KvCache::keys(int64_t sequence) const {
  const int64_t L = length(sequence), d = shape_.head_dim;
  Tensor<float> out({shape_.num_kv_heads, L, d});
  for (int64_t g = 0; g < shape_.num_kv_heads; ++g)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t c = 0; c < d; ++c) out[(g * L + t) * d + c] = key(sequence, g, t, c);
  return out;
}

Tensor<float> KvCache::values(int64_t sequence) const {
  const int64_t L = length(sequence), d = shape_.head_dim;
  Tensor<float> out({shape_.num_kv_heads, L, d});
  for (int64_t g = 0; g < shape_.num_kv_heads; ++g)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t c = 0; c < d; ++c) out[(g * L + t) * d + c] = value(sequence, g, t, c);
  return out;
}

namespace {
[[noreturn]] void wrong_dtype(const char* accessor, KvDtype dtype) {
  throw std::logic_error(std::string("KvCache::") + accessor + ": the cache stores " + std::string(to_string(dtype)));
}
}  // namespace

const float* KvCache::k_fp32() const {
  if (dtype_ != KvDtype::fp32) wrong_dtype("k_fp32", dtype_);
  return reinterpret_cast<const float*>(k_.data());
}
const float* KvCache::v_fp32() const {
  if (dtype_ != KvDtype::fp32) wrong_dtype("v_fp32", dtype_);
  return reinterpret_cast<const float*>(v_.data());
}
const uint16_t* KvCache::k_fp16() const {
  if (dtype_ != KvDtype::fp16) wrong_dtype("k_fp16", dtype_);
  return reinterpret_cast<const uint16_t*>(k_.data());
}
const uint16_t* KvCache::v_fp16() const {
  if (dtype_ != KvDtype::fp16) wrong_dtype("v_fp16", dtype_);
  return reinterpret_cast<const uint16_t*>(v_.data());
}

KvCache make_kv_cache(const Tensor<float>& k, const Tensor<float>& v, const std::vector<int64_t>& lengths,
                      KvDtype dtype) {
  check_rank(k, 4, "k");
  check_shape(v, k.shape(), "v");
  const KvCacheShape shape{k.dim(0), k.dim(1), k.dim(2), k.dim(3)};
  require(static_cast<int64_t>(lengths.size()) == shape.batch, "lengths.size()", lengths.size(),
          "must equal batch = k.shape[0] = " + std::to_string(shape.batch));
  KvCache cache(shape, dtype);
  cache.set_lengths(lengths);  // checks every length against max_seq_len
  const int64_t d = shape.head_dim;
  for (int64_t b = 0; b < shape.batch; ++b) {
    const int64_t L = lengths[size_t(b)];
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
