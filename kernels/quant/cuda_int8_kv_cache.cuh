#pragma once
// The INT8 KV cache in device memory (chapter 04; layout in kernels/quant/int8_kv_cache.h),
// shared by cuda/append_int8 and cuda/decode_int8. Compiled for sim and cuda.
#include <cstdint>

#include "kernels/device_buffer.cuh"
#include "kernels/quant/int8_kv_cache.h"

namespace inferlab::INFERLAB_BACKEND_NS {

// Device pointers of one INT8 cache.
struct DeviceInt8KvCache {
  int8_t* k = nullptr;           // [batch][num_kv_heads][max_seq_len][head_dim]
  int8_t* v = nullptr;           // same
  float* k_scales = nullptr;     // per token [b][g][max_seq_len] or per channel [b][g][head_dim]
  float* v_scales = nullptr;     // [b][g][max_seq_len]
  const int* lengths = nullptr;  // [batch]
  KvCacheShape shape;
  bool per_channel = false;
};

// The device copy of a host Int8KvCache (poisoned scales included).
class DeviceInt8KvCacheCopy {
 public:
  explicit DeviceInt8KvCacheCopy(const Int8KvCache& cache)
      : shape_(cache.shape()),
        per_channel_(cache.key_scaling() == KeyScaling::per_channel),
        k_(cache.k_int8().size()),
        v_(cache.v_int8().size()),
        k_scales_(cache.k_scales().size()),
        v_scales_(cache.v_scales().size()),
        lengths_(size_t(cache.shape().batch)) {
    k_.upload(cache.k_int8().data());
    v_.upload(cache.v_int8().data());
    k_scales_.upload(cache.k_scales().data());
    v_scales_.upload(cache.v_scales().data());
    lengths_.upload(reinterpret_cast<const int*>(cache.lengths().data()));
  }
  DeviceInt8KvCache view() const {
    return {k_.data(), v_.data(), k_scales_.data(), v_scales_.data(), lengths_.data(), shape_, per_channel_};
  }
  // Copies K, V and the scales back into @p cache (lengths are the caller's business).
  void download(Int8KvCache& cache) const {
    k_.download(cache.k_int8().data());
    v_.download(cache.v_int8().data());
    k_scales_.download(cache.k_scales().data());
    v_scales_.download(cache.v_scales().data());
  }

 private:
  KvCacheShape shape_;
  bool per_channel_;
  DeviceBuffer<int8_t> k_, v_;
  DeviceBuffer<float> k_scales_, v_scales_;
  DeviceBuffer<int> lengths_;
};

}  // namespace inferlab::INFERLAB_BACKEND_NS
