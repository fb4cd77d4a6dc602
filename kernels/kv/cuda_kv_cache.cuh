#pragma once
// The KV cache in device memory (compiled for sim and cuda): one copy type for every format —
// the host cache's storage uploaded as it is (poisoned rows and scales included), its lengths,
// and typed views of the rows for kernels (KvRows of kv_layout.h, with device pointers).
//
// Element types on the device: float (fp32), __half (fp16: the same 16 bits the host stores),
// int8_t (INT8 codes), uint8_t (FP8 E4M3 codes); scales float, or __half for INT8 with fp16
// scales.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
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
        layout_(cache.layout()),
        k_(cache.k_bytes().size()),
        v_(cache.v_bytes().size()),
        k_scales_(cache.k_scale_bytes().size()),
        v_scales_(cache.v_scale_bytes().size()),
        lengths_(size_t(cache.shape().batch)) {
    k_.upload(cache.k_bytes().data());
    v_.upload(cache.v_bytes().data());
    if (k_scales_.size() > 0) k_scales_.upload(cache.k_scale_bytes().data());
    if (v_scales_.size() > 0) v_scales_.upload(cache.v_scale_bytes().data());
    lengths_.upload(reinterpret_cast<const int*>(cache.lengths().data()));
  }

  // The rows, scales and layout of layer @p layer: T and S must be what the format stores
  // (see the file comment), else std::logic_error.
  template <class T, class S = float>
  KvRows<T, S> rows(int64_t layer = 0) const {
    constexpr bool kFp32 = std::is_same_v<T, float>, kFp16 = std::is_same_v<T, __half>,
                   kInt8 = std::is_same_v<T, int8_t>, kFp8 = std::is_same_v<T, uint8_t>;
    const KvDtype dtype = format_.dtype;
    const bool element_ok = (kFp32 && dtype == KvDtype::fp32) || (kFp16 && dtype == KvDtype::fp16) ||
                            (kInt8 && dtype == KvDtype::int8) || (kFp8 && dtype == KvDtype::fp8);
    if (!element_ok || (format_.quantized() && format_.scale_bytes() != sizeof(S)) || layer < 0 ||
        layer >= shape_.num_layers)
      throw std::logic_error("DeviceKvCache::rows: the cache stores " + format_.name() + " with " +
                             std::to_string(shape_.num_layers) + " layer(s)");
    const size_t rows_per_layer = size_t(shape_.rows());
    const size_t k_scales_per_layer =
        format_.per_channel() ? size_t(shape_.batch * shape_.num_kv_heads * shape_.head_dim) : rows_per_layer;
    KvRows<T, S> rows;
    rows.k = reinterpret_cast<const T*>(k_.data()) + size_t(layer) * rows_per_layer * size_t(shape_.head_dim);
    rows.v = reinterpret_cast<const T*>(v_.data()) + size_t(layer) * rows_per_layer * size_t(shape_.head_dim);
    if (format_.quantized()) {
      rows.k_scales = reinterpret_cast<const S*>(k_scales_.data()) + size_t(layer) * k_scales_per_layer;
      rows.v_scales = reinterpret_cast<const S*>(v_scales_.data()) + size_t(layer) * rows_per_layer;
    }
    rows.lengths = lengths_.data();
    rows.layout = layout_;
    rows.head_dim = shape_.head_dim;
    rows.per_channel = format_.per_channel();
    return rows;
  }

  // The same rows, writable: what the append kernels write into.
  template <class T, class S = float>
  KvSlots<T, S> slots(int64_t layer = 0) {
    const KvRows<T, S> r = rows<T, S>(layer);
    return {const_cast<T*>(r.k),        const_cast<T*>(r.v), const_cast<S*>(r.k_scales), const_cast<S*>(r.v_scales),
            r.lengths,                  r.layout,            r.head_dim,                 r.per_channel};
  }

  const KvCacheShape& shape() const { return shape_; }
  const KvFormat& format() const { return format_; }

  // Copies K, V and the scales back into @p cache (its lengths are the caller's business).
  void download(KvCache& cache) const {
    k_.download(cache.k_bytes().data());
    v_.download(cache.v_bytes().data());
    if (k_scales_.size() > 0) k_scales_.download(cache.k_scale_bytes().data());
    if (v_scales_.size() > 0) v_scales_.download(cache.v_scale_bytes().data());
  }

 private:
  KvCacheShape shape_;
  KvFormat format_;
  ContiguousLayout layout_;
  DeviceBuffer<std::byte> k_, v_, k_scales_, v_scales_;
  DeviceBuffer<int> lengths_;
};

}  // namespace inferlab::INFERLAB_BACKEND_NS
