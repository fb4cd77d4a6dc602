#pragma once
/// @file kv_cache.h
/// The KV cache, on the host: an index (the lengths and, paged, the block tables) over a
/// KvStorage (kv_storage.h: the rows, the scales and their codec), which it owns or — a view,
/// KvCache(storage, shape, paging) — borrows. One class for every element format (kv_format.h: fp32, fp16,
/// INT8 with scales, FP8 E4M3 with scales), both layouts (kv_layout.h: contiguous, chapters
/// 03–05; paged, chapter 06) and any number of layers sharing one set of lengths.
///
/// Sequence b holds lengths[b] tokens in its first lengths[b] rows of every KV head of every
/// layer. Rows at or past a sequence's length are poisoned — NaN bits for fp32/fp16, 0xFF bytes
/// for INT8 codes with NaN scales, the NaN code for FP8 — so a kernel reading one of them
/// produces NaN. Memory for max_seq_len tokens is reserved up front for every sequence (the
/// contiguous max-length allocation whose waste chapter 06 measures):
///
///     bytes = 2 (K and V) · layers · batch · num_kv_heads · max_seq_len · (head_dim · e + s)
///
/// with e the element bytes and s the scale bytes per row (per-channel K scales: head_dim per
/// (sequence, KV head) instead).
///
/// A paged cache (chapter 06: KvCache(shape, format, paging)) holds instead a pool of
/// paging.num_blocks blocks per layer and a block table per sequence; max_seq_len is then only
/// the block table's reach (⌈max_seq_len / block_size⌉ entries per sequence). Who owns which block
/// is the block pool's business (runtime/paged/): it maps blocks with set_block_table(), poisons
/// fresh ones (poison_block()) and copies shared ones before a write (copy_block()). Every
/// token below a length must sit in a mapped block, else std::invalid_argument. Per-channel K
/// scales are refused: blocks are shared between sequences, so a row's scale must travel with
/// the row.
///
/// Writing: prefill() fills a sequence's first L tokens (quantized for INT8/FP8; per-channel K
/// scales calibrated on them); each decode step appends one token per sequence at slot
/// lengths[b] — append() on the CPU, or a device append kernel between check_append() and
/// commit_append(). Appending to a full sequence, a non-finite value in a quantized cache and
/// every shape error throw std::invalid_argument naming the argument, and write nothing.
/// Reading: key() / value() dequantize one element; rows() hands a kernel the raw rows, scales
/// and layout of one layer (kv_layout.h: KvRows).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "common/tensor.h"
#include "kernels/kv/kv_format.h"
#include "kernels/kv/kv_layout.h"
#include "kernels/kv/kv_storage.h"

namespace inferlab {

/// A KV cache on the host (see the file comment). Device versions upload its storage as it is
/// (the poisoned rows travel too).
class KvCache {
 public:
  /// An empty cache (every length 0, every row poisoned). Throws std::invalid_argument naming
  /// the size that is not positive.
  KvCache(const KvCacheShape& shape, KvFormat format);
  /// An empty paged cache: @p paging.num_blocks blocks of @p paging.block_size tokens per layer,
  /// every block-table entry unmapped (−1), every row poisoned. Throws std::invalid_argument
  /// naming a size that is not positive, and for per-channel K scales.
  KvCache(const KvCacheShape& shape, KvFormat format, KvPaging paging);
  /// An index over rows it does not own: @p storage (made by make_kv_storage() for @p shape and
  /// @p paging; {0, 0} paging: contiguous) keeps its bytes, the new cache starts with every
  /// length 0 and, paged, every block-table entry unmapped. What a model runner builds for one
  /// step over its pool, from the step plan's tables and lengths: nothing is copied, and the
  /// storage must outlive the cache. Throws std::invalid_argument when @p storage's sizes or
  /// format do not match.
  KvCache(KvStorage& storage, const KvCacheShape& shape, KvPaging paging);
  /// A deep copy: the copy owns a copy of the rows (a view's copy too).
  KvCache(const KvCache& other);
  /// A deep copy (see the copy constructor).
  KvCache& operator=(const KvCache& other);
  /// Takes @p other's rows (owned or viewed) and index.
  KvCache(KvCache&& other) noexcept = default;
  /// Takes @p other's rows (owned or viewed) and index.
  KvCache& operator=(KvCache&& other) noexcept = default;
  ~KvCache();

  /// The rows and scales (kv_storage.h), owned or viewed.
  const KvStorage& storage() const { return *storage_; }
  /// The rows and scales, writable.
  KvStorage& storage() { return *storage_; }

  /// The sizes.
  const KvCacheShape& shape() const { return shape_; }
  /// The element format.
  const KvFormat& format() const { return format_; }
  /// The element type (format().dtype).
  KvDtype dtype() const { return format_.dtype; }
  /// True for a paged cache.
  bool paged() const { return paging_.block_size > 0; }
  /// The contiguous layout of one layer; std::logic_error for a paged cache (paged_layout()).
  const ContiguousLayout& layout() const;
  /// The paged layout of one layer (over block_table()); std::logic_error for a contiguous cache.
  PagedLayout paged_layout() const;
  /// The pool's block size and block count ({0, 0} for a contiguous cache).
  const KvPaging& paging() const { return paging_; }
  /// Block-table entries per sequence: ⌈max_seq_len / block_size⌉ (0 when contiguous).
  int64_t max_blocks_per_seq() const { return max_blocks_per_seq_; }
  /// The block tables, [batch][max_blocks_per_seq()] int32 (vLLM's layout); −1 = unmapped.
  const std::vector<int32_t>& block_table() const { return block_table_; }
  /// Rows of K (= of V) per layer: batch · num_kv_heads · max_seq_len contiguous,
  /// num_blocks · num_kv_heads · block_size paged.
  int64_t rows_per_layer() const { return rows_per_layer_; }
  /// K scales per layer (quantized formats): one per row (per-token), or head_dim per
  /// (sequence, KV head) (per-channel).
  int64_t k_scales_per_layer() const {
    return format_.per_channel() ? shape_.batch * shape_.num_kv_heads * shape_.head_dim : rows_per_layer_;
  }
  /// Tokens cached for every sequence (int32, as the device kernels read them).
  const std::vector<int32_t>& lengths() const { return lengths_; }
  /// Tokens cached for @p sequence.
  int64_t length(int64_t sequence) const;
  /// The longest length in the batch.
  int64_t max_length() const;
  /// Values clamped while quantizing: INT8 per-channel K values outside the range their scales
  /// were calibrated on, groups whose fp16 scale hit the fp16 maximum, FP8 values past 448.
  int64_t saturated_count() const { return storage_->saturated_count(); }
  /// Adds @p count to saturated_count() (a device append reports its clamps).
  void add_saturated(int64_t count) { storage_->add_saturated(count); }

  /// Bytes of K (= of V) elements, all layers.
  size_t bytes_per_tensor() const { return storage().k_bytes().size(); }
  /// Bytes of all scales (K's and V's, all layers); 0 for fp32/fp16.
  size_t scale_bytes() const { return storage().k_scale_bytes().size() + storage().v_scale_bytes().size(); }
  /// Bytes of everything: K, V and the scales.
  size_t bytes() const { return 2 * bytes_per_tensor() + scale_bytes(); }

  /// Fills sequence @p sequence of layer @p layer with the tokens of @p k and @p v, both
  /// [num_kv_heads, seq_len, head_dim] (quantized for INT8/FP8; per-channel K scales set from
  /// them): its length becomes seq_len, and the rows past it are poisoned again. Throws
  /// std::invalid_argument on a shape error, seq_len > max_seq_len, or (quantized formats) a
  /// non-finite value, naming the sequence and KV head; nothing is written then.
  void prefill(int64_t sequence, const Tensor<float>& k, const Tensor<float>& v, int64_t layer = 0);

  /// Checks that one token can be appended to every sequence: @p k_new and @p v_new are
  /// [batch, num_kv_heads, head_dim], no sequence is full and (quantized formats) every value
  /// is finite. Throws std::invalid_argument naming the first full sequence ("lengths[b] =
  /// max_seq_len: ... is full") or the (sequence, KV head) holding a NaN/Inf otherwise. Every
  /// append version calls this before it writes anything.
  void check_append(const Tensor<float>& k_new, const Tensor<float>& v_new) const;
  /// Writes one token per sequence into slot lengths[b] of layer @p layer (check_append()
  /// first) without advancing the lengths: a model writes every layer, then commits once.
  void store_appended(const Tensor<float>& k_new, const Tensor<float>& v_new, int64_t layer);
  /// Increments every length by one: the last step of an append, after the new token's K and
  /// V were written at slot lengths[b] of every layer (by store_appended() or a device kernel).
  void commit_append();
  /// The slot (kv_layout.h: vLLM's slot mapping) of token @p token of sequence @p sequence —
  /// through its block table when paged (its block must be mapped, else std::invalid_argument).
  int64_t slot(int64_t sequence, int64_t token) const;
  /// Slots per layer: batch · max_seq_len contiguous, num_blocks · block_size paged.
  int64_t slots_per_layer() const { return rows_per_layer_ / shape_.num_kv_heads; }
  /// slot(b, lengths[b]) for every sequence: where an append writes (every sequence must have
  /// room: check_append()).
  std::vector<int64_t> append_slots() const;
  /// Checks a slot write: @p k and @p v are [num_tokens, num_kv_heads, head_dim], @p slots has
  /// num_tokens entries, each in [0, slots_per_layer()) or −1 (skip the token, as vLLM pads),
  /// no slot twice, and (quantized formats) every written value is finite. Throws
  /// std::invalid_argument naming the entry; writes nothing.
  void check_slots(const Tensor<float>& k, const Tensor<float>& v, std::span<const int64_t> slots) const;
  /// The CPU slot write (vLLM's reshape_and_cache): token i's K and V rows go to slot slots[i]
  /// of layer @p layer (rounded or quantized to the format); the lengths do not change (a
  /// prefill chunk writes its tokens, then the caller sets the lengths). check_slots() first.
  void store_slots(const Tensor<float>& k, const Tensor<float>& v, std::span<const int64_t> slots, int64_t layer);
  /// The CPU append ("cpu/append"): check_append(), write each sequence's new K and V at slot
  /// lengths[b] (rounded or quantized to the format), commit_append(). One-layer caches only.
  void append(const Tensor<float>& k_new, const Tensor<float>& v_new);

  /// Paged: maps sequence @p sequence's logical blocks 0, 1, … to the physical @p blocks (the
  /// rest of its table unmapped). Writes no row. Throws std::invalid_argument naming the entry
  /// when a block id is outside [0, num_blocks), when there are more than max_blocks_per_seq()
  /// of them, or when they do not cover the sequence's cached tokens.
  void set_block_table(int64_t sequence, std::span<const int32_t> blocks);
  /// Detaches @p sequence from its blocks (a request that finished or was preempted): its length
  /// becomes 0 and, paged, its block-table row unmapped. Unlike set_lengths(), nothing is
  /// poisoned — the blocks' rows may belong to other sequences or to the prefix cache now.
  void detach_sequence(int64_t sequence);
  /// Paged: poisons every row (and scale) of block @p block in every layer — the pool calls it
  /// for a block it hands out fresh, so a token nobody wrote reads as NaN.
  void poison_block(int64_t block);
  /// Paged: copies every row and scale of block @p from into block @p to, in every layer
  /// (copy-on-write: a shared, partly filled block is copied before one holder appends to it).
  void copy_block(int64_t from, int64_t to);

  /// Sets every length (each in [0, max_seq_len], else std::invalid_argument naming it) and
  /// poisons the rows past them; the tokens below them keep their values. For callers that
  /// fill the storage directly (the benchmarks' random caches).
  void set_lengths(const std::vector<int64_t>& lengths);

  /// Element (sequence, kv_head, token, c) of K as float (fp16 converted exactly, codes
  /// dequantized).
  float key(int64_t sequence, int64_t kv_head, int64_t token, int64_t c, int64_t layer = 0) const;
  /// Element (sequence, kv_head, token, c) of V as float.
  float value(int64_t sequence, int64_t kv_head, int64_t token, int64_t c, int64_t layer = 0) const;
  /// The scale Δ that multiplies the stored code of K element (sequence, kv_head, token, c): the
  /// row's (INT8 per-token, FP8) or channel c's (INT8 per-channel) — for INT8 also the
  /// quantization step; 0 for fp32/fp16.
  float key_scale(int64_t sequence, int64_t kv_head, int64_t token, int64_t c = 0, int64_t layer = 0) const;
  /// The scale Δ of V row (sequence, kv_head, token); 0 for fp32/fp16.
  float value_scale(int64_t sequence, int64_t kv_head, int64_t token, int64_t layer = 0) const;
  /// The cached keys of @p sequence as [num_kv_heads, length, head_dim] floats.
  Tensor<float> keys(int64_t sequence, int64_t layer = 0) const;
  /// The cached values of @p sequence as [num_kv_heads, length, head_dim] floats.
  Tensor<float> values(int64_t sequence, int64_t layer = 0) const;
  /// An fp32 cache of the same shape holding the dequantized values (same lengths, the rest
  /// poisoned): the float64 oracle over it is what an exact decode of this cache computes.
  KvCache dequantized() const;

  /// The rows, scales and layout of layer @p layer, as a kernel reads them: T is the stored
  /// element (float, uint16_t fp16 bits, int8_t, uint8_t FP8 codes), S the scale (float or
  /// uint16_t fp16 bits) and Layout the cache's (ContiguousLayout or PagedLayout). Throws
  /// std::logic_error when T, S or Layout is not what the cache stores.
  template <class T, class S = float, class Layout = ContiguousLayout>
  KvRows<T, S, Layout> rows(int64_t layer = 0) const;
  /// Calls @p kernel with rows<T, S, Layout>(layer) for the cache's own layout: how a version
  /// runs one kernel template over either layout.
  template <class T, class S = float, class Kernel>
  decltype(auto) with_rows(int64_t layer, Kernel&& kernel) const {
    if (paged()) return std::forward<Kernel>(kernel)(rows<T, S, PagedLayout>(layer));
    return std::forward<Kernel>(kernel)(rows<T, S, ContiguousLayout>(layer));
  }

  /// The row of (sequence, kv_head, token) in one layer, by the cache's layout (= the index of
  /// its per-token scale in layer 0).
  int64_t row(int64_t sequence, int64_t kv_head, int64_t token) const {
    return paged() ? paged_layout().row(sequence, kv_head, token) : layout_.row(sequence, kv_head, token);
  }
  /// Flat index of the per-token scale of (sequence, kv_head, token) of layer 0 (= its row).
  int64_t token_scale_index(int64_t sequence, int64_t kv_head, int64_t token) const {
    return row(sequence, kv_head, token);
  }
  /// Flat index of channel @p c's K scale of (sequence, kv_head) of layer 0.
  int64_t channel_scale_index(int64_t sequence, int64_t kv_head, int64_t c) const {
    return layout_.head(sequence, kv_head) * shape_.head_dim + c;
  }

  /// Typed views of the storage, all layers (layer after layer). Each throws std::logic_error
  /// unless the format stores that type: fp32 → k_fp32(); fp16 → k_fp16() (bits); int8 →
  /// k_int8() with k_scales() (fp32) or k_scales_fp16() (bits); fp8 → k_fp8() with k_scales().
  std::span<const float> k_fp32() const;
  std::span<const float> v_fp32() const;       ///< see k_fp32()
  std::span<const uint16_t> k_fp16() const;    ///< see k_fp32()
  std::span<const uint16_t> v_fp16() const;    ///< see k_fp32()
  std::span<int8_t> k_int8();                  ///< see k_fp32()
  std::span<int8_t> v_int8();                  ///< see k_fp32()
  std::span<const int8_t> k_int8() const;      ///< see k_fp32()
  std::span<const int8_t> v_int8() const;      ///< see k_fp32()
  std::span<const uint8_t> k_fp8() const;      ///< see k_fp32()
  std::span<const uint8_t> v_fp8() const;      ///< see k_fp32()
  std::span<float> k_scales();                 ///< see k_fp32()
  std::span<float> v_scales();                 ///< see k_fp32()
  std::span<const float> k_scales() const;     ///< see k_fp32()
  std::span<const float> v_scales() const;     ///< see k_fp32()
  std::span<uint16_t> k_scales_fp16();         ///< see k_fp32()
  std::span<uint16_t> v_scales_fp16();         ///< see k_fp32()
  std::span<const uint16_t> k_scales_fp16() const;  ///< see k_fp32()
  std::span<const uint16_t> v_scales_fp16() const;  ///< see k_fp32()
  /// K's raw bytes (bytes_per_tensor() of them), for uploads and device appends.
  std::span<std::byte> k_bytes() { return storage().k_bytes(); }
  /// V's raw bytes.
  std::span<std::byte> v_bytes() { return storage().v_bytes(); }
  /// K's raw bytes.
  std::span<const std::byte> k_bytes() const { return storage().k_bytes(); }
  /// V's raw bytes.
  std::span<const std::byte> v_bytes() const { return storage().v_bytes(); }
  /// K's scales as raw bytes (empty for fp32/fp16).
  std::span<std::byte> k_scale_bytes() { return storage().k_scale_bytes(); }
  /// V's scales as raw bytes.
  std::span<std::byte> v_scale_bytes() { return storage().v_scale_bytes(); }
  /// K's scales as raw bytes.
  std::span<const std::byte> k_scale_bytes() const { return storage().k_scale_bytes(); }
  /// V's scales as raw bytes.
  std::span<const std::byte> v_scale_bytes() const { return storage().v_scale_bytes(); }

 private:
  void set_sizes(const KvCacheShape& shape, KvPaging paging);
  void check_sequence(int64_t sequence) const;
  void check_block(int64_t block, const char* what) const;
  // Paged: throws unless tokens [0, tokens) of @p sequence sit in mapped blocks.
  void require_mapped(int64_t sequence, int64_t tokens, const char* what) const;
  void poison_past_length(int64_t sequence);
  void check_layer(int64_t layer) const;
  void require_finite(const float* x, int64_t n, const char* what, int64_t sequence, int64_t kv_head) const;
  void poison_unused();
  // Rows and scales of the whole cache: layer l's row r is l · shape.rows() + r.
  int64_t global_row(int64_t layer, int64_t sequence, int64_t kv_head, int64_t token) const {
    return layer * rows_per_layer_ + row(sequence, kv_head, token);
  }
  int64_t channel_scale(int64_t layer, int64_t sequence, int64_t kv_head, int64_t c) const {
    return (layer * shape_.batch * shape_.num_kv_heads + layout_.head(sequence, kv_head)) * shape_.head_dim + c;
  }
  // Stores one token (k_row, v_row: head_dim floats) into global row @p row of (layer,
  // sequence, kv_head), quantizing with the format's rules.
  void store_token(int64_t layer, int64_t sequence, int64_t kv_head, int64_t row, const float* k_row,
                   const float* v_row);
  void store_slots_unchecked(const Tensor<float>& k, const Tensor<float>& v, std::span<const int64_t> slots,
                             int64_t layer);
  void poison_row(int64_t row);

  KvCacheShape shape_;
  KvFormat format_;
  ContiguousLayout layout_;
  KvPaging paging_;
  int64_t max_blocks_per_seq_ = 0;
  int64_t rows_per_layer_ = 0;
  std::vector<int32_t> block_table_;  // paged: [batch][max_blocks_per_seq], −1 = unmapped
  std::vector<int32_t> lengths_;
  std::unique_ptr<KvStorage> owned_;  // the rows, when the cache owns them (empty for a view)
  KvStorage* storage_ = nullptr;      // the rows: owned_'s, or a view's
};

/// Storage (kv_storage.h) for a cache of @p shape in @p format: with @p paging ({block_size,
/// num_blocks}) the pool's num_blocks · num_kv_heads · block_size rows a layer, without it
/// (contiguous) batch · num_kv_heads · max_seq_len. What KvCache allocates for itself, and what a
/// model runner keeps across steps while each step's block tables and lengths come from the
/// step plan (a KvCache view over it). Throws std::invalid_argument naming a bad size.
KvStorage make_kv_storage(const KvCacheShape& shape, KvFormat format, KvPaging paging = {});

}  // namespace inferlab
