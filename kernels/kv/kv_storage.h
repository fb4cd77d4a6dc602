#pragma once
/// @file kv_storage.h
/// The bytes of a KV cache and their codec: for each of num_layers layers, rows_per_layer rows
/// of K and as many of V (head_dim elements each, in the format's element type: kv_format.h) and,
/// for the quantized formats, their scales. That is all a KV cache *stores*: which sequence owns
/// which rows — the lengths and the block tables — is an index over it. Chapter 06's pool is
/// num_blocks · num_kv_heads · block_size rows a layer, its block tables live in the step plan
/// (runtime/model/step_plan.h) or in a KvCache (kv_cache.h); chapters 03–05's contiguous cache
/// is the same storage with one block of max_seq_len tokens per sequence.
///
/// Rows are numbered across layers: row r of layer l is l · rows_per_layer + r. Every row and
/// scale starts poisoned — NaN bits for fp32/fp16 elements and for scales, the NaN code for FP8 —
/// and poison_rows() poisons again, so a kernel that reads a row nobody wrote produces NaN (an
/// INT8 row keeps its codes: its NaN scale poisons it).

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/huge_pages.h"
#include "kernels/kv/kv_format.h"

namespace inferlab {

/// The rows and scales of a KV cache (see the file comment).
class KvStorage {
 public:
  /// Room for @p num_layers layers of @p rows_per_layer K and V rows of @p head_dim elements in
  /// @p format and, quantized, one V scale per row and @p k_scales_per_layer K scales a layer
  /// (rows_per_layer per-token; per-channel: head_dim per (sequence, KV head)); all poisoned.
  /// Throws std::invalid_argument naming a size that is not positive.
  KvStorage(KvFormat format, int64_t num_layers, int64_t rows_per_layer, int64_t head_dim,
            int64_t k_scales_per_layer);

  /// The element format.
  const KvFormat& format() const { return format_; }
  /// Layers.
  int64_t num_layers() const { return num_layers_; }
  /// K rows (= V rows) per layer.
  int64_t rows_per_layer() const { return rows_per_layer_; }
  /// Elements per row.
  int64_t head_dim() const { return head_dim_; }
  /// K scales per layer (0 for fp32/fp16).
  int64_t k_scales_per_layer() const { return k_scales_per_layer_; }

  /// Element @p c of K row @p row (of all layers) as float: fp16 converted exactly, codes
  /// dequantized with their scale (@p k_scale: the index of the K scale that applies).
  float key(int64_t row, int64_t c, int64_t k_scale) const;
  /// Element @p c of V row @p row as float (dequantized with the row's scale).
  float value(int64_t row, int64_t c) const;
  /// K scale @p i (of all layers) as a float; 0 for fp32/fp16.
  float k_scale(int64_t i) const;
  /// The scale of V row @p row as a float; 0 for fp32/fp16.
  float v_scale(int64_t row) const;
  /// True when K scale @p i is the poison (NaN): a per-channel scale no prompt calibrated.
  bool k_scale_unset(int64_t i) const;

  /// Writes one token's K and V rows (@p k_row, @p v_row: head_dim floats) into row @p row,
  /// rounded or quantized to the format. Quantized: INT8 per-token and FP8 rows get their own
  /// scales; INT8 per-channel K uses the scales at @p k_channel_scales … + head_dim − 1,
  /// calibrating any that is still unset on this token. Clamped values are counted
  /// (saturated_count()). The caller has checked the values are finite (quantized formats).
  void store_row(int64_t row, const float* k_row, const float* v_row, int64_t k_channel_scales = -1);
  /// Sets per-channel K scale @p i to @p scale (stored rounded up when scales are fp16) and
  /// returns the value kept.
  float set_k_scale(int64_t i, float scale);
  /// Poisons rows @p first … first + count − 1 (and their per-token scales).
  void poison_rows(int64_t first, int64_t count);
  /// Copies rows @p from … from + count − 1 (and their per-token scales) onto rows @p to … (a
  /// block's copy-on-write). The ranges must not overlap.
  void copy_rows(int64_t from, int64_t to, int64_t count);
  /// Poisons K scales @p first … first + count − 1.
  void poison_k_scales(int64_t first, int64_t count);

  /// Values clamped while quantizing (see kv_cache.h's saturated_count()).
  int64_t saturated_count() const { return saturated_; }
  /// Adds @p count to saturated_count() (a device write reports its clamps).
  void add_saturated(int64_t count) { saturated_ += count; }

  /// K's elements, all layers, as raw bytes.
  std::span<std::byte> k_bytes() { return {k_.data(), k_.size()}; }
  /// V's elements.
  std::span<std::byte> v_bytes() { return {v_.data(), v_.size()}; }
  /// K's elements.
  std::span<const std::byte> k_bytes() const { return {k_.data(), k_.size()}; }
  /// V's elements.
  std::span<const std::byte> v_bytes() const { return {v_.data(), v_.size()}; }
  /// K's scales as raw bytes (empty for fp32/fp16).
  std::span<std::byte> k_scale_bytes() { return {k_scales_.data(), k_scales_.size()}; }
  /// V's scales.
  std::span<std::byte> v_scale_bytes() { return {v_scales_.data(), v_scales_.size()}; }
  /// K's scales.
  std::span<const std::byte> k_scale_bytes() const { return {k_scales_.data(), k_scales_.size()}; }
  /// V's scales.
  std::span<const std::byte> v_scale_bytes() const { return {v_scales_.data(), v_scales_.size()}; }

 private:
  float element(const HugePageBuffer<std::byte>& from, int64_t index) const;
  float scale_at(const HugePageBuffer<std::byte>& scales, int64_t i) const;
  float set_scale(HugePageBuffer<std::byte>& scales, int64_t i, float scale);
  void poison_scale(HugePageBuffer<std::byte>& scales, int64_t i);

  KvFormat format_;
  int64_t num_layers_ = 0, rows_per_layer_ = 0, head_dim_ = 0, k_scales_per_layer_ = 0;
  int64_t saturated_ = 0;
  HugePageBuffer<std::byte> k_, v_;                // elements, all layers
  HugePageBuffer<std::byte> k_scales_, v_scales_;  // scales (quantized formats), all layers
};

}  // namespace inferlab
