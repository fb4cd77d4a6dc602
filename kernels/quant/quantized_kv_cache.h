#pragma once
/// @file quantized_kv_cache.h
/// The bookkeeping the chapter-04 quantized KV caches share (Int8KvCache, Fp8KvCache): the sizes,
/// the tokens cached per sequence, the count of saturated values, and the checks made before
/// anything is written — shapes, capacity (appending to a full sequence is an error) and
/// finiteness (a NaN or ±Inf cannot be quantized: std::invalid_argument naming the sequence and
/// the KV head, nothing written). The element format, the scales and how unused slots are
/// poisoned belong to each cache.

#include <cstdint>
#include <vector>

#include "common/tensor.h"
#include "kernels/decode/decode.h"
#include "kernels/decode/kv_cache.h"

namespace inferlab {

/// The common part of a quantized KV cache (see the file comment); the caches derive from it.
class QuantizedKvCache {
 public:
  /// The sizes.
  const KvCacheShape& shape() const { return shape_; }
  /// Tokens cached for every sequence.
  const std::vector<int32_t>& lengths() const { return lengths_; }
  /// Tokens cached for @p sequence.
  int64_t length(int64_t sequence) const;
  /// The longest length in the batch.
  int64_t max_length() const;
  /// Values clamped while quantizing (each cache says when that happens).
  int64_t saturated_count() const { return saturated_; }

  /// Checks shapes ([batch, num_kv_heads, head_dim]), capacity and finiteness of one token per
  /// sequence; throws std::invalid_argument naming the full sequence or the (sequence, KV head)
  /// whose k_new or v_new holds a NaN/Inf. Every append version calls it before writing.
  void check_append(const Tensor<float>& k_new, const Tensor<float>& v_new) const;
  /// Increments every length (after an append wrote the slots).
  void commit_append();

 protected:
  /// An empty cache of @p shape; throws std::invalid_argument naming a size that is not
  /// positive. @p format ("INT8", "FP8") names the element format in errors.
  QuantizedKvCache(const KvCacheShape& shape, const char* format);

  /// Throws std::invalid_argument unless 0 ≤ @p sequence < batch.
  void check_sequence(int64_t sequence) const;
  /// Checks a prompt for @p sequence: @p k and @p v [num_kv_heads, seq_len, head_dim],
  /// seq_len ≤ max_seq_len, every value finite (else std::invalid_argument naming sequence and
  /// KV head). Returns seq_len.
  int64_t check_prefill(int64_t sequence, const Tensor<float>& k, const Tensor<float>& v) const;

  KvCacheShape shape_;            ///< the sizes
  std::vector<int32_t> lengths_;  ///< tokens cached per sequence
  int64_t saturated_ = 0;         ///< values clamped so far

 private:
  // Throws naming (sequence, KV head) when one of the @p n floats at @p x is NaN or ±Inf.
  void require_finite(const float* x, int64_t n, const char* what, int64_t sequence, int64_t kv_head) const;

  const char* format_;
};

/// decode_shape() for a quantized cache: @p q checked against its sizes and lengths (decode.h).
inline DecodeShape decode_shape(const Tensor<float>& q, const QuantizedKvCache& cache) {
  return decode_shape(q, cache.shape(), cache.lengths());
}

}  // namespace inferlab
