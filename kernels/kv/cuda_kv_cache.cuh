#pragma once
// The KV cache in device memory (compiled for sim and cuda): one copy type for every format and
// both layouts — the host cache's storage uploaded as it is (poisoned rows and scales
// included), its lengths, a paged cache's block table (one int32 array [batch][max_blocks_per_seq],
// vLLM's layout), and typed views of the rows for kernels (KvRows of kv_layout.h, with device
// pointers).
//
// Element types on the device: float (fp32), __half (fp16: the same 16 bits the host stores),
// int8_t (INT8 codes), uint8_t (FP8 E4M3 codes); scales float, or __half for INT8 with fp16
// scales.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/kv/kv_cache.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS {

// The device copy of a host KvCache (all layers).
class DeviceKvCache {
 public:
  explicit DeviceKvCache(const KvCache& cache)
      : shape_(cache.shape()),
        format_(cache.format()),
        paging_(cache.paging()),
        max_blocks_per_seq_(cache.max_blocks_per_seq()),
        rows_per_layer_(cache.rows_per_layer()),
        k_scales_per_layer_(cache.k_scales_per_layer()),
        k_(cache.k_bytes().size()),
        v_(cache.v_bytes().size()),
        k_scales_(cache.k_scale_bytes().size()),
        v_scales_(cache.v_scale_bytes().size()),
        lengths_(size_t(cache.shape().batch)),
        block_table_(cache.block_table().size()) {
    k_.upload(cache.k_bytes().data());
    v_.upload(cache.v_bytes().data());
    if (k_scales_.size() > 0) k_scales_.upload(cache.k_scale_bytes().data());
    if (v_scales_.size() > 0) v_scales_.upload(cache.v_scale_bytes().data());
    lengths_.upload(reinterpret_cast<const int*>(cache.lengths().data()));
    if (block_table_.size() > 0) block_table_.upload(reinterpret_cast<const int*>(cache.block_table().data()));
  }

  bool paged() const { return paging_.block_size > 0; }

  // The rows, scales and layout of layer @p layer: T and S must be what the format stores
  // (see the file comment) and Layout the cache's, else std::logic_error.
  template <class T, class S = float, class Layout = ContiguousLayout>
  KvRows<T, S, Layout> rows(int64_t layer = 0) const {
    constexpr bool kFp32 = std::is_same_v<T, float>, kFp16 = std::is_same_v<T, __half>,
                   kInt8 = std::is_same_v<T, int8_t>, kFp8 = std::is_same_v<T, uint8_t>;
    constexpr bool kPaged = std::is_same_v<Layout, PagedLayout>;
    const KvDtype dtype = format_.dtype;
    const bool element_ok = (kFp32 && dtype == KvDtype::fp32) || (kFp16 && dtype == KvDtype::fp16) ||
                            (kInt8 && dtype == KvDtype::int8) || (kFp8 && dtype == KvDtype::fp8);
    if (!element_ok || (format_.quantized() && format_.scale_bytes() != sizeof(S)) || layer < 0 ||
        layer >= shape_.num_layers || kPaged != paged())
      throw std::logic_error("DeviceKvCache::rows: the cache stores " + format_.name() + " with " +
                             std::to_string(shape_.num_layers) + " layer(s), " + (paged() ? "paged" : "contiguous"));
    const size_t rows_per_layer = size_t(rows_per_layer_);
    KvRows<T, S, Layout> rows;
    rows.k = reinterpret_cast<const T*>(k_.data()) + size_t(layer) * rows_per_layer * size_t(shape_.head_dim);
    rows.v = reinterpret_cast<const T*>(v_.data()) + size_t(layer) * rows_per_layer * size_t(shape_.head_dim);
    if (format_.quantized()) {
      rows.k_scales = reinterpret_cast<const S*>(k_scales_.data()) + size_t(layer * k_scales_per_layer_);
      rows.v_scales = reinterpret_cast<const S*>(v_scales_.data()) + size_t(layer) * rows_per_layer;
    }
    rows.lengths = lengths_.data();
    if constexpr (kPaged) {
      rows.layout = {reinterpret_cast<const int32_t*>(block_table_.data()), max_blocks_per_seq_, paging_.block_size,
                     shape_.num_kv_heads};
    } else {
      rows.layout = {shape_.num_kv_heads, shape_.max_seq_len};
    }
    rows.head_dim = shape_.head_dim;
    rows.per_channel = format_.per_channel();
    return rows;
  }

  // Calls @p kernel with rows<T, S, Layout>(layer) for the cache's own layout (as
  // KvCache::with_rows does on the host).
  template <class T, class S = float, class Kernel>
  decltype(auto) with_rows(int64_t layer, Kernel&& kernel) const {
    if (paged()) return std::forward<Kernel>(kernel)(rows<T, S, PagedLayout>(layer));
    return std::forward<Kernel>(kernel)(rows<T, S, ContiguousLayout>(layer));
  }

  // The same rows, writable: what the append kernels write into.
  template <class T, class S = float, class Layout = ContiguousLayout>
  KvSlots<T, S, Layout> slots(int64_t layer = 0) {
    const KvRows<T, S, Layout> r = rows<T, S, Layout>(layer);
    return {const_cast<T*>(r.k),
            const_cast<T*>(r.v),
            const_cast<S*>(r.k_scales),
            const_cast<S*>(r.v_scales),
            r.lengths,
            r.layout,
            r.head_dim,
            r.per_channel};
  }

  const KvCacheShape& shape() const { return shape_; }
  const KvFormat& format() const { return format_; }
  const KvPaging& paging() const { return paging_; }
  int64_t max_blocks_per_seq() const { return max_blocks_per_seq_; }
  // Slots per layer (KvCache::slots_per_layer()).
  int64_t slots_per_layer() const { return rows_per_layer_ / shape_.num_kv_heads; }

  // A resident cache's step (the model runner's): uploads every row's length (batch entries)
  // and, paged, the block tables ([batch][max_blocks_per_seq], −1 unmapped) — what the host
  // cache keeps itself, here taken from the step plan. Queued on the default stream.
  void set_tables(const std::vector<int32_t>& lengths, const std::vector<int32_t>& block_table) {
    if (lengths.size() != lengths_.size() || block_table.size() != block_table_.size())
      throw std::invalid_argument("DeviceKvCache::set_tables: " + std::to_string(lengths.size()) + " lengths and " +
                                  std::to_string(block_table.size()) + " table entries for a cache of " +
                                  std::to_string(lengths_.size()) + " rows and " + std::to_string(block_table_.size()) +
                                  " entries");
    lengths_.upload(reinterpret_cast<const int*>(lengths.data()));
    if (block_table_.size() > 0) block_table_.upload(reinterpret_cast<const int*>(block_table.data()));
  }

  // Paged: copies every row and scale of block @p from into block @p to in every layer
  // (copy-on-write), as KvCache::copy_block does on the host; device to device.
  void copy_block(int64_t from, int64_t to) {
    check_block(from, "from");
    check_block(to, "to");
    if (from == to) return;
    for_block_bytes(from, [&](std::byte* base, size_t first_byte, size_t bytes) {
      const size_t to_byte = first_byte + size_t(to - from) * bytes;
      check_cuda(cudaMemcpy(base + to_byte, base + first_byte, bytes, cudaMemcpyDeviceToDevice), "copy_block");
    });
  }

  // Paged: every byte of block @p block's rows and scales, in every layer, set to 0xFF (NaN for
  // fp32/fp16 elements and for scales, the NaN code for FP8): a fresh block, as
  // KvCache::poison_block does on the host.
  void poison_block(int64_t block) {
    check_block(block, "block");
    for_block_bytes(block, [&](std::byte* base, size_t first_byte, size_t bytes) {
      check_cuda(cudaMemset(base + first_byte, 0xFF, bytes), "poison_block");
    });
  }

  // Copies K, V and the scales back into @p cache (its lengths are the caller's business).
  void download(KvCache& cache) const {
    k_.download(cache.k_bytes().data());
    v_.download(cache.v_bytes().data());
    if (k_scales_.size() > 0) k_scales_.download(cache.k_scale_bytes().data());
    if (v_scales_.size() > 0) v_scales_.download(cache.v_scale_bytes().data());
  }

 private:
  void check_block(int64_t block, const char* what) const {
    if (!paged() || block < 0 || block >= paging_.num_blocks)
      throw std::invalid_argument(std::string("DeviceKvCache: ") + what + " = " + std::to_string(block) +
                                  (paged() ? " is outside the pool's " + std::to_string(paging_.num_blocks) + " blocks"
                                           : " names a block of a contiguous cache"));
  }
  // Calls @p at(base, first byte, bytes) for the contiguous bytes of block @p block in each layer
  // of K, V and (quantized formats: per-token scales only, paged) their scales: a block's rows
  // are num_kv_heads · block_size consecutive rows of each layer.
  template <class At>
  void for_block_bytes(int64_t block, const At& at) const {
    const size_t rows = size_t(shape_.num_kv_heads * paging_.block_size);
    const size_t row_bytes = size_t(shape_.head_dim) * format_.element_bytes(), scale_bytes = format_.scale_bytes();
    for (int64_t layer = 0; layer < shape_.num_layers; ++layer) {
      const size_t first_row = size_t(layer * rows_per_layer_) + size_t(block) * rows;
      at(k_.data(), first_row * row_bytes, rows * row_bytes);
      at(v_.data(), first_row * row_bytes, rows * row_bytes);
      if (format_.quantized()) {
        at(k_scales_.data(), first_row * scale_bytes, rows * scale_bytes);
        at(v_scales_.data(), first_row * scale_bytes, rows * scale_bytes);
      }
    }
  }

  KvCacheShape shape_;
  KvFormat format_;
  KvPaging paging_;
  int64_t max_blocks_per_seq_ = 0;
  int64_t rows_per_layer_ = 0;
  int64_t k_scales_per_layer_ = 0;
  DeviceBuffer<std::byte> k_, v_, k_scales_, v_scales_;
  DeviceBuffer<int> lengths_;
  DeviceBuffer<int> block_table_;  // paged: [batch][max_blocks_per_seq]; empty when contiguous
};

}  // namespace inferlab::INFERLAB_BACKEND_NS
