#pragma once
/// @file fp8_kv_cache.h
/// Chapter 04: the KV cache stored as FP8 E4M3 bytes with fp32 scales (one layer, on the host) —
/// what vLLM and TensorRT-LLM call an "FP8 KV cache".
///
/// Layout: K and V are E4M3 codes (fp8_e4m3.h) [batch][num_kv_heads][max_seq_len][head_dim], one
/// byte per element, as Int8KvCache; K and V each have one fp32 scale per (token, KV head),
/// k_scales and v_scales [batch][num_kv_heads][max_seq_len]. Quantization of a row x:
/// Δ = max|x| / 448, code = e4m3(x / Δ) (round to nearest even, saturating), x̂ = Δ·value(code).
/// The row's largest element maps to 448 exactly, so nothing saturates; E4M3 keeps 3 mantissa
/// bits, so every element is stored within a relative 1/16 of itself (the INT8 step is absolute:
/// max|x|/254, which is coarse for the small elements of a row holding an outlier).
///
/// The bookkeeping (lengths, capacity, NaN/Inf refused naming the sequence and KV head, nothing
/// written then) is QuantizedKvCache's, shared with Int8KvCache; unused codes and scales are
/// poisoned with NaN. Only CPU quantize-on-append here; cuda/decode_fp8 reads the cache on the
/// device.
///
///     bytes = 2 · batch · num_kv_heads · max_seq_len · (head_dim + 4)

#include <cstdint>
#include <span>
#include <vector>

#include "common/tensor.h"
#include "kernels/decode/kv_cache.h"
#include "kernels/quant/quantized_kv_cache.h"

namespace inferlab {

/// Quantizes one row: Δ = max|x|/448 (0 for an all-zero row, whose codes are then 0), codes[c] =
/// float_to_fp8_e4m3(row[c]/Δ); returns Δ. The row must be finite (the cache checks first) and
/// @p codes as long as @p row. Adds to @p saturated the elements whose |x|/Δ rounded past 448
/// (with Δ from the row's own maximum: none, up to fp32 rounding of the division).
float quantize_row_fp8(std::span<const float> row, std::span<uint8_t> codes, int64_t& saturated);

/// A contiguous FP8 E4M3 KV cache with per-(token, KV head) scales (see the file comment).
/// saturated_count() counts the elements whose scaled value |x|/Δ rounded past 448 and were
/// clamped (with Δ from the row's own maximum this stays 0; it is counted, not assumed).
class Fp8KvCache : public QuantizedKvCache {
 public:
  /// An empty cache; throws std::invalid_argument naming a size that is not positive.
  explicit Fp8KvCache(const KvCacheShape& shape);

  /// Bytes of K, V and the scales.
  size_t bytes() const { return k_.size() + v_.size() + 4 * (k_scales_.size() + v_scales_.size()); }

  /// Quantizes and stores the prompt of @p sequence: @p k, @p v [num_kv_heads, seq_len, head_dim].
  /// Throws std::invalid_argument on a shape error, a prompt longer than max_seq_len, or a
  /// non-finite value (naming sequence and KV head; nothing written).
  void prefill(int64_t sequence, const Tensor<float>& k, const Tensor<float>& v);
  /// The CPU quantize-on-append: check_append(), quantize each sequence's token into slot
  /// lengths[b], commit_append().
  void append(const Tensor<float>& k_new, const Tensor<float>& v_new);

  /// Flat index of the scale of (sequence, kv_head, token) in k_scales and v_scales.
  int64_t scale_index(int64_t sequence, int64_t kv_head, int64_t token) const {
    return (sequence * shape_.num_kv_heads + kv_head) * shape_.max_seq_len + token;
  }
  /// K element (sequence, kv_head, token, c), dequantized.
  float key(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const;
  /// V element, dequantized.
  float value(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const;
  /// The scale Δ of K row (sequence, kv_head, token).
  float key_scale(int64_t sequence, int64_t kv_head, int64_t token) const {
    return k_scales_[size_t(scale_index(sequence, kv_head, token))];
  }
  /// The scale Δ of V row (sequence, kv_head, token).
  float value_scale(int64_t sequence, int64_t kv_head, int64_t token) const {
    return v_scales_[size_t(scale_index(sequence, kv_head, token))];
  }
  /// An fp32 KvCache holding the dequantized values (same lengths, tail poisoned): the float64
  /// oracle decode_reference() over it is what an exact FP8 decode computes.
  KvCache dequantized() const;

  /// K's E4M3 codes.
  const HugePageBuffer<uint8_t>& k_fp8() const { return k_; }
  /// V's E4M3 codes.
  const HugePageBuffer<uint8_t>& v_fp8() const { return v_; }
  /// K's scales.
  const std::vector<float>& k_scales() const { return k_scales_; }
  /// V's scales.
  const std::vector<float>& v_scales() const { return v_scales_; }

 private:
  // Quantizes one row of head_dim floats into codes at @p codes and its scale into @p scale.
  void store_row(const float* x, uint8_t* codes, float& scale) {
    scale = quantize_row_fp8({x, size_t(shape_.head_dim)}, {codes, size_t(shape_.head_dim)}, saturated_);
  }

  HugePageBuffer<uint8_t> k_, v_;
  std::vector<float> k_scales_, v_scales_;
};

/// An FP8 cache holding @p k and @p v (full caches [batch, num_kv_heads, max_seq_len, head_dim],
/// the first lengths[b] tokens of each sequence prefilled).
Fp8KvCache make_fp8_kv_cache(const Tensor<float>& k, const Tensor<float>& v, const std::vector<int64_t>& lengths);

}  // namespace inferlab
