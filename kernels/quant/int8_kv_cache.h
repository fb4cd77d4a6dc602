#pragma once
/// @file int8_kv_cache.h
/// Chapter 04: the KV cache stored as symmetric INT8 with fp32 (or fp16) scales (one layer, on
/// the host).
///
/// Layout: K and V are int8 [batch][num_kv_heads][max_seq_len][head_dim] (as kv_cache.h, one
/// byte per element). Scales (fp32 by default, fp16 with ScaleDtype::fp16):
///   - V: one per (token, KV head): v_scales [batch][num_kv_heads][max_seq_len];
///   - K: per (token, KV head) as V (KeyScaling::per_token), or one per channel of each
///     (sequence, KV head), k_scales [batch][num_kv_heads][head_dim] (KeyScaling::per_channel —
///     the KIVI observation: a few channels of K carry outliers, so a per-token scale set by the
///     outlier wastes the int8 range of every other channel). Per-channel scales are calibrated
///     on the prompt (max |k| over its tokens, per channel; on the first token when the prompt
///     is empty); later tokens are quantized with them and *saturate* where they exceed the
///     range (counted by saturated_count()).
///
/// Quantization of x with scale Δ = max|x| / 127 over its group: q = clamp(round(x / Δ), −127,
/// 127) — rounded, then clamped, never wrapped; x̂ = Δ·q, so |x̂ − x| ≤ Δ/2 inside the range.
/// fp16 scales (ScaleDtype::fp16) halve the scale bytes: Δ is rounded *up* to the next fp16
/// (scale_to_fp16_up), so max|x|/Δ ≤ 127 still holds and the rounding never saturates; the step
/// is then up to 2⁻¹⁰ larger (|x̂ − x| ≤ Δ_fp16/2). A group whose Δ exceeds the largest fp16
/// (max|x| > 65504·127 ≈ 8.3e6) gets Δ = 65504 and saturates (counted).
/// Non-finite input (NaN, ±Inf) is refused with std::invalid_argument naming the sequence and
/// KV head; nothing is written then. Scales of unused slots are poisoned (NaN), so a kernel that
/// reads past a sequence's length produces NaN.
///
///     bytes = 2 · batch · num_kv_heads · max_seq_len · (head_dim + s)     (per-token K scales,
///                                                                         s = 4 or 2 bytes/scale)

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/tensor.h"
#include "kernels/decode/kv_cache.h"
#include "kernels/quant/quantized_kv_cache.h"

namespace inferlab {

/// The granularity of K's scales (V always has one scale per (token, KV head)).
enum class KeyScaling {
  per_token,    ///< one scale per (token, KV head), like V
  per_channel,  ///< one scale per (channel, KV head, sequence), calibrated on the prompt
};

/// "per_token", "per_channel".
std::string_view to_string(KeyScaling scaling);

/// How the scales are stored.
enum class ScaleDtype {
  fp32,  ///< 4 bytes per scale (the default)
  fp16,  ///< 2 bytes per scale, rounded up (see the file comment)
};

/// "fp32", "fp16".
std::string_view to_string(ScaleDtype dtype);
/// Bytes per stored scale: 4 or 2.
inline size_t bytes_per_scale(ScaleDtype dtype) {
  return dtype == ScaleDtype::fp32 ? 4 : 2;
}

/// The fp16 bits of the smallest fp16 ≥ @p scale (a non-negative finite float), capped at the
/// largest finite fp16, 65504: rounding a scale up keeps |x| / scale ≤ 127 for every x of its group.
uint16_t scale_to_fp16_up(float scale);

/// The scale of a group whose largest magnitude is @p max_abs: max_abs / 127 (0 for 0).
float int8_scale(float max_abs);
/// clamp(round(x / scale), −127, 127) (round half away from zero); 0 when scale is 0.
int8_t quantize_int8(float x, float scale);
/// scale · q.
inline float dequantize_int8(int8_t q, float scale) {
  return scale * float(q);
}

/// A contiguous INT8 KV cache (see the file comment); lengths, capacity and input checks are
/// QuantizedKvCache's. saturated_count() counts the values clamped to ±127: per-channel K values
/// of tokens outside the range its scales were calibrated on, and values of a group whose fp16
/// scale hit the fp16 maximum.
class Int8KvCache : public QuantizedKvCache {
 public:
  /// An empty cache with scales stored as @p scale_dtype; throws std::invalid_argument naming
  /// a size that is not positive.
  Int8KvCache(const KvCacheShape& shape, KeyScaling key_scaling, ScaleDtype scale_dtype = ScaleDtype::fp32);

  /// The granularity of K's scales.
  KeyScaling key_scaling() const { return key_scaling_; }
  /// How the scales are stored.
  ScaleDtype scale_dtype() const { return scale_dtype_; }
  /// Bytes of K, V and all scales.
  size_t bytes() const;
  /// Bytes of all scales alone (K's and V's).
  size_t scale_bytes() const;

  /// Sets every length (each in [0, max_seq_len], else std::invalid_argument naming it) and
  /// poisons the scales past them (NaN); the tokens below keep their bytes and scales. For
  /// callers that fill the storage directly (the benchmark's random caches).
  void set_lengths(const std::vector<int64_t>& lengths);

  /// Quantizes and stores the prompt of @p sequence: @p k, @p v [num_kv_heads, seq_len, head_dim];
  /// per-channel K scales are set from it. Throws std::invalid_argument on a shape error, a
  /// prompt longer than max_seq_len, or a non-finite value (naming sequence and KV head).
  void prefill(int64_t sequence, const Tensor<float>& k, const Tensor<float>& v);
  /// The CPU quantize-on-append ("cpu/append_int8"): check_append(), quantize each sequence's
  /// token into slot lengths[b], commit_append() (a device append commits after writing).
  void append(const Tensor<float>& k_new, const Tensor<float>& v_new);
  /// Adds @p count to saturated_count() (a device append reports its clamps).
  void add_saturated(int64_t count) { saturated_ += count; }

  /// K element (sequence, kv_head, token, c), dequantized.
  float key(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const;
  /// V element, dequantized.
  float value(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const;
  /// The quantization step (scale) of K element (sequence, kv_head, token, c).
  float key_step(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const;
  /// The quantization step of V row (sequence, kv_head, token).
  float value_step(int64_t sequence, int64_t kv_head, int64_t token) const;

  /// Flat index of the scale of (sequence, kv_head, token) in v_scales (and per-token k_scales).
  int64_t token_scale_index(int64_t sequence, int64_t kv_head, int64_t token) const {
    return (sequence * shape_.num_kv_heads + kv_head) * shape_.max_seq_len + token;
  }
  /// Flat index of channel c's scale of (sequence, kv_head) in per-channel k_scales.
  int64_t channel_scale_index(int64_t sequence, int64_t kv_head, int64_t c) const {
    return (sequence * shape_.num_kv_heads + kv_head) * shape_.head_dim + c;
  }

  /// Storage, for kernels and uploads. The scales live in k_scales()/v_scales() (fp32) or in
  /// k_scales_fp16()/v_scales_fp16() (fp16 bits), as scale_dtype() says; the other pair is empty.
  HugePageBuffer<int8_t>& k_int8() { return k_; }
  HugePageBuffer<int8_t>& v_int8() { return v_; }                                   ///< V's int8 storage
  std::vector<float>& k_scales() { return k_scales_; }                           ///< K's fp32 scales
  std::vector<float>& v_scales() { return v_scales_; }                           ///< V's fp32 scales
  std::vector<uint16_t>& k_scales_fp16() { return k_scales_fp16_; }              ///< K's fp16 scales (bits)
  std::vector<uint16_t>& v_scales_fp16() { return v_scales_fp16_; }              ///< V's fp16 scales (bits)
  const HugePageBuffer<int8_t>& k_int8() const { return k_; }                       ///< K's int8 storage
  const HugePageBuffer<int8_t>& v_int8() const { return v_; }                       ///< V's int8 storage
  const std::vector<float>& k_scales() const { return k_scales_; }               ///< K's fp32 scales
  const std::vector<float>& v_scales() const { return v_scales_; }               ///< V's fp32 scales
  const std::vector<uint16_t>& k_scales_fp16() const { return k_scales_fp16_; }  ///< K's fp16 scales
  const std::vector<uint16_t>& v_scales_fp16() const { return v_scales_fp16_; }  ///< V's fp16 scales

 private:
  void poison_unused();
  // Scale i of K or V as a float, whatever the storage.
  float k_scale_at(int64_t i) const;
  float v_scale_at(int64_t i) const;
  // Stores scale @p scale (rounded up to fp16 when the scales are fp16); returns the value kept.
  float set_k_scale(int64_t i, float scale);
  float set_v_scale(int64_t i, float scale);
  // Poisons scale i (NaN).
  void poison_k_scale(int64_t i);
  void poison_v_scale(int64_t i);
  // Quantizes one token (k_row, v_row: head_dim floats) into slot @p token of (sequence, g).
  void store_token(int64_t sequence, int64_t g, int64_t token, const float* k_row, const float* v_row);

  KeyScaling key_scaling_;
  ScaleDtype scale_dtype_;
  HugePageBuffer<int8_t> k_, v_;
  std::vector<float> k_scales_, v_scales_;
  std::vector<uint16_t> k_scales_fp16_, v_scales_fp16_;
};

/// An INT8 cache holding @p k and @p v (full caches [batch, num_kv_heads, max_seq_len, head_dim],
/// the first lengths[b] tokens of each sequence prefilled).
Int8KvCache make_int8_kv_cache(const Tensor<float>& k, const Tensor<float>& v, const std::vector<int64_t>& lengths,
                               KeyScaling key_scaling, ScaleDtype scale_dtype = ScaleDtype::fp32);

}  // namespace inferlab
