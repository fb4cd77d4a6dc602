#pragma once
// The INT8 KV cache in device memory (chapter 04; layout in kernels/quant/int8_kv_cache.h),
// shared by cuda/append_int8 and cuda/decode_int8, and the device level of cuda/decode_int8
// (what a model calls every step and what the benchmark times). Compiled for sim and cuda.
#include <cstdint>

#include "kernels/decode/cuda_decode.cuh"
#include "kernels/device_buffer.cuh"
#include "kernels/quant/int8_kv_cache.h"

namespace inferlab::INFERLAB_BACKEND_NS {

// Device pointers of one INT8 cache. The scales are fp32 (k_scales, v_scales) or fp16
// (k_scales_fp16, v_scales_fp16) as the host cache's ScaleDtype says; the other pair is null.
struct DeviceInt8KvCache {
  int8_t* k = nullptr;              // [batch][num_kv_heads][max_seq_len][head_dim]
  int8_t* v = nullptr;              // same
  float* k_scales = nullptr;        // per token [b][g][max_seq_len] or per channel [b][g][head_dim]
  float* v_scales = nullptr;        // [b][g][max_seq_len]
  __half* k_scales_fp16 = nullptr;  // as k_scales, fp16
  __half* v_scales_fp16 = nullptr;  // as v_scales, fp16
  const int* lengths = nullptr;     // [batch]
  KvCacheShape shape;
  bool per_channel = false;
};

__device__ inline float scale_value(float s) {
  return s;
}
__device__ inline float scale_value(__half s) {
  return __half2float(s);
}

// The smallest fp16 ≥ @p scale (≥ 0), capped at 65504: the host's scale_to_fp16_up on the device.
__device__ inline __half scale_to_fp16_up_device(float scale) {
  unsigned short bits = __half_as_ushort(__float2half_rn(scale));
  if (bits >= 0x7C00u) return __ushort_as_half(0x7BFFu);  // past the largest finite fp16
  if (__half2float(__ushort_as_half(bits)) < scale) ++bits;
  return __ushort_as_half(bits > 0x7BFFu ? static_cast<unsigned short>(0x7BFFu) : bits);
}

// The Rows of decode_rows_kernel (kernels/decode/cuda_decode.cuh) for an INT8 cache whose
// scales are stored as S (float or __half): int8 rows widened to float in the loads, the scales
// folded out of the inner loops — per-channel K into the query (q'_c = q_c·Δk_c), per-token K
// into the score (s_j = Δk_j·(q·k̂_j)), V into the probability (p_j·Δv_j).
template <class S>
struct Int8Rows : RowLoads<int8_t> {
  const S* k_scales = nullptr;
  const S* v_scales = nullptr;
  const int* lengths = nullptr;
  bool per_channel = false;
  __device__ float query_factor(size_t channel) const { return per_channel ? scale_value(k_scales[channel]) : 1.0f; }
  __device__ float score(size_t token, float dot) const {
    return per_channel ? dot : dot * scale_value(k_scales[token]);
  }
  __device__ float value_weight(size_t token, float p) const { return p * scale_value(v_scales[token]); }
};

// One INT8 decode step in device memory: q and out [batch, num_heads, head_dim] (fp32).
struct DeviceDecodeInt8 {
  const float* q = nullptr;
  DeviceInt8KvCache cache;
  float* out = nullptr;
  DecodeShape shape;
  int max_length = 0;  // an upper bound on every lengths[b] (sizes the scores' shared memory)
};

// cuda/decode_int8 at the device level (cuda_decode_int8.cu): queues the kernel on @p stream.
// Throws as decode_device (head_dim > 512, scores too large for shared memory, launch error).
void decode_int8_device(const DeviceDecodeInt8& problem, cudaStream_t stream);

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
        k_scales_fp16_(cache.k_scales_fp16().size()),
        v_scales_fp16_(cache.v_scales_fp16().size()),
        lengths_(size_t(cache.shape().batch)) {
    k_.upload(cache.k_int8().data());
    v_.upload(cache.v_int8().data());
    if (cache.scale_dtype() == ScaleDtype::fp32) {
      k_scales_.upload(cache.k_scales().data());
      v_scales_.upload(cache.v_scales().data());
    } else {
      k_scales_fp16_.upload(reinterpret_cast<const __half*>(cache.k_scales_fp16().data()));
      v_scales_fp16_.upload(reinterpret_cast<const __half*>(cache.v_scales_fp16().data()));
    }
    lengths_.upload(reinterpret_cast<const int*>(cache.lengths().data()));
  }
  DeviceInt8KvCache view() const {
    return {
        k_.data(),       v_.data(), k_scales_.data(), v_scales_.data(), k_scales_fp16_.data(), v_scales_fp16_.data(),
        lengths_.data(), shape_,    per_channel_};
  }
  // Copies K, V and the scales back into @p cache (lengths are the caller's business).
  void download(Int8KvCache& cache) const {
    k_.download(cache.k_int8().data());
    v_.download(cache.v_int8().data());
    if (cache.scale_dtype() == ScaleDtype::fp32) {
      k_scales_.download(cache.k_scales().data());
      v_scales_.download(cache.v_scales().data());
    } else {
      k_scales_fp16_.download(reinterpret_cast<__half*>(cache.k_scales_fp16().data()));
      v_scales_fp16_.download(reinterpret_cast<__half*>(cache.v_scales_fp16().data()));
    }
  }

 private:
  KvCacheShape shape_;
  bool per_channel_;
  DeviceBuffer<int8_t> k_, v_;
  DeviceBuffer<float> k_scales_, v_scales_;
  DeviceBuffer<__half> k_scales_fp16_, v_scales_fp16_;
  DeviceBuffer<int> lengths_;
};

}  // namespace inferlab::INFERLAB_BACKEND_NS
