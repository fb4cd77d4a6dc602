// cuda/append and cuda/append_int8 — chapters 03 and 04: write one new token's K and V into the
// KV cache (kv_cache.h), on the device.
//
// Every decode step first appends the new token (its K and V, computed by the layer's
// projections) to each sequence's cache, then runs decode attention over lengths[b] + 1 tokens.
// Both kernels find the slot through the cache's layout (kv_layout.h: row of token lengths[b]).
//
// cuda/append (fp32, fp16). Launch: grid (num_kv_heads, batch), block 128; block (g, b) copies
// k_new[b][g] and v_new[b][g] (head_dim fp32 each) into slot lengths[b] of KV head g of
// sequence b, converted to the cache's type (fp16: round to nearest even, as the host KvCache
// does). Consecutive threads write consecutive elements: coalesced. Bytes: 2·d·(4 + e) per
// (sequence, KV head); no FLOPs.
//
// cuda/append_int8 (INT8): quantize-on-append. Launch as above. Block (g, b): max |v| (and max
// |k| for per-token K scales) over the row by block_reduce, scales stored as fp32 or as fp16
// rounded up (scale_to_fp16_up_device: the rounding never pushes |x|/Δ past 127), a finiteness
// flag reduced the same way, then each thread quantizes its elements: q = clamp(rint(x / Δ),
// −127, 127) — rounded, then clamped in float, so an out-of-range value (per-channel K past the
// prompt's range) saturates instead of wrapping through the int8 cast. Bytes: 2·d·(4 + 1) + 4–8
// per (sequence, KV head). A row with a NaN/Inf writes nothing and sets
// status[b·num_kv_heads + g] = 1; the host reads the flags and throws naming the sequence and KV
// head (the host check runs first anyway — the flag keeps the kernel safe for callers that skip
// it). Clamped values are counted in *saturated (atomicAdd).
//
// Capacity: the host checks that no sequence is full before launching (KvCache::check_append
// throws std::invalid_argument); the kernels also refuse a slot outside [0, max_seq_len), so a
// caller that skipped the check loses the token instead of corrupting the next head's cache.
#include <cfloat>
#include <string>
#include <vector>

#include "kernels/primitives/softmax_warp.cuh"
#include "kernels/kv/cuda_append.h"
#include "kernels/kv/cuda_kv_cache.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

constexpr int kAppendThreads = 128;

// ---- cuda/append ----

__device__ inline void store_cached(float* at, float x) {
  *at = x;
}
__device__ inline void store_cached(__half* at, float x) {
  *at = __float2half_rn(x);
}

template <class T>
__global__ void kv_append_kernel(KvSlots<T> cache, const float* k_new, const float* v_new, int max_seq_len) {
  const int g = blockIdx.x, b = blockIdx.y, d = int(cache.head_dim);
  const int slot = cache.lengths[b];
  if (slot < 0 || slot >= max_seq_len) return;  // full (or corrupt): never write past the end
  const size_t dst = size_t(cache.layout.row(b, g, slot)) * d;
  const size_t src = (size_t(b) * cache.layout.num_kv_heads + g) * d;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    store_cached(cache.k + dst + c, k_new[src + c]);
    store_cached(cache.v + dst + c, v_new[src + c]);
  }
}

// Uploads k_new and v_new, runs @p launch(cache, k_device, v_device), waits (errors name
// @p name).
template <class Launch>
void append_on_device(DeviceKvCache& device_cache, const Tensor<float>& k_new, const Tensor<float>& v_new,
                      const char* name, const Launch& launch) {
  const KvCacheShape& s = device_cache.shape();
  require(s.batch <= 65535, "batch", s.batch, std::string("must be ≤ 65535 (grid.y) for ") + name);
  DeviceBuffer<float> k_device(size_t(k_new.size())), v_device(size_t(v_new.size()));
  k_device.upload(k_new.data());
  v_device.upload(v_new.data());
  check_cuda(launch(dim3(unsigned(s.num_kv_heads), unsigned(s.batch)), k_device.data(), v_device.data()), name);
  check_cuda(cudaDeviceSynchronize(), name);
}

template <class T>
void append_host(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.check_append(k_new, v_new);  // a full sequence throws here, before anything is written
  DeviceKvCache device_cache(cache);
  const KvSlots<T> slots = device_cache.slots<T>();
  append_on_device(device_cache, k_new, v_new, "cuda/append", [&](dim3 grid, const float* k, const float* v) {
    return simt::launch(kv_append_kernel<T>, grid, dim3(kAppendThreads), 0, nullptr, slots, k, v,
                        int(cache.shape().max_seq_len));
  });
  device_cache.download(cache);
  cache.commit_append();
}

}  // namespace

void kv_append_cuda(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  if (cache.dtype() == KvDtype::fp16) {
    append_host<__half>(cache, k_new, v_new);
  } else {
    append_host<float>(cache, k_new, v_new);  // slots<float>() refuses any other format
  }
}

// ---- cuda/append_int8 ----

namespace {

// The smallest fp16 ≥ @p scale (≥ 0), capped at 65504: the host's scale_to_fp16_up on the device.
__device__ inline __half scale_to_fp16_up_device(float scale) {
  unsigned short bits = __half_as_ushort(__float2half_rn(scale));
  if (bits >= 0x7C00u) return __ushort_as_half(0x7BFFu);  // past the largest finite fp16
  if (__half2float(__ushort_as_half(bits)) < scale) ++bits;
  return __ushort_as_half(bits > 0x7BFFu ? static_cast<unsigned short>(0x7BFFu) : bits);
}

__device__ inline int8_t quantize(float x, float scale, int* saturated) {
  if (scale == 0.0f) {  // a per-channel scale calibrated on zeros: any other value is out of range
    if (x != 0.0f) atomicAdd(saturated, 1);
    return 0;
  }
  const float r = roundf(x / scale);  // half away from zero, as the host quantize_int8
  if (fabsf(r) > 127.0f) atomicAdd(saturated, 1);
  return static_cast<int8_t>(fminf(fmaxf(r, -127.0f), 127.0f));
}

// Stores @p scale at scales[i] (when @p write) as S, rounded up for fp16; returns the value kept.
__device__ inline float store_scale(float* scales, size_t i, float scale, bool write) {
  if (write) scales[i] = scale;
  return scale;
}
__device__ inline float store_scale(__half* scales, size_t i, float scale, bool write) {
  const __half rounded = scale_to_fp16_up_device(scale);
  if (write) scales[i] = rounded;
  return __half2float(rounded);
}

__device__ inline float load_scale(const float* scales, size_t i) {
  return scales[i];
}
__device__ inline float load_scale(const __half* scales, size_t i) {
  return __half2float(scales[i]);
}

template <class S>
__global__ void int8_append_kernel(KvSlots<int8_t, S> cache, const float* k_new, const float* v_new, int max_seq_len,
                                   int* status, int* saturated) {
  __shared__ float slots[32];
  const int g = blockIdx.x, b = blockIdx.y;
  const int d = int(cache.head_dim), G = int(cache.layout.num_kv_heads);
  const int slot = cache.lengths[b];
  if (slot < 0 || slot >= max_seq_len) return;  // full: never write past the end
  const float* k_row = k_new + (size_t(b) * G + g) * d;
  const float* v_row = v_new + (size_t(b) * G + g) * d;
  float k_max = 0.0f, v_max = 0.0f, bad = 0.0f;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    const float kc = k_row[c], vc = v_row[c];
    if (!(fabsf(kc) <= FLT_MAX) || !(fabsf(vc) <= FLT_MAX)) bad = 1.0f;  // NaN compares false
    k_max = fmaxf(k_max, fabsf(kc));
    v_max = fmaxf(v_max, fabsf(vc));
  }
  bad = block_reduce<true>(bad, slots);
  if (bad > 0.0f) {  // uniform over the block
    if (threadIdx.x == 0) status[b * G + g] = 1;
    return;
  }
  k_max = block_reduce<true>(k_max, slots);
  v_max = block_reduce<true>(v_max, slots);
  const size_t token_scale = size_t(cache.layout.row(b, g, slot));  // a per-token scale sits at its row
  const size_t row = token_scale * d;
  const bool first = threadIdx.x == 0;
  const float v_scale = store_scale(cache.v_scales, token_scale, v_max / 127.0f, first);
  const float k_scale = cache.per_channel ? 0.0f : store_scale(cache.k_scales, token_scale, k_max / 127.0f, first);
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    cache.v[row + c] = quantize(v_row[c], v_scale, saturated);
    float scale = k_scale;
    if (cache.per_channel) {  // this thread owns channel c's scale: no race
      const size_t channel = size_t(cache.layout.head(b, g)) * d + c;
      scale = load_scale(cache.k_scales, channel);
      if (scale != scale)  // NaN: no prompt, this token calibrates
        scale = store_scale(cache.k_scales, channel, fabsf(k_row[c]) / 127.0f, true);
    }
    cache.k[row + c] = quantize(k_row[c], scale, saturated);
  }
}

template <class S>
void int8_append_host(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.check_append(k_new, v_new);  // full sequence or NaN/Inf: throws before anything is written
  const KvCacheShape& s = cache.shape();
  DeviceKvCache device_cache(cache);
  const KvSlots<int8_t, S> slots = device_cache.slots<int8_t, S>();
  const size_t items = size_t(s.batch * s.num_kv_heads);
  DeviceBuffer<int> status(items), saturated(1);
  check_cuda(cudaMemset(status.data(), 0, items * sizeof(int)), "cudaMemset (status)");
  check_cuda(cudaMemset(saturated.data(), 0, sizeof(int)), "cudaMemset (saturated)");
  append_on_device(device_cache, k_new, v_new, "cuda/append_int8", [&](dim3 grid, const float* k, const float* v) {
    return simt::launch(int8_append_kernel<S>, grid, dim3(kAppendThreads), 0, nullptr, slots, k, v,
                        int(s.max_seq_len), status.data(), saturated.data());
  });
  std::vector<int> flags(items);
  status.download(flags.data());
  for (size_t i = 0; i < items; ++i)
    if (flags[i] != 0)  // the cache on the host is untouched: nothing is downloaded
      throw std::invalid_argument("k_new/v_new: sequence " + std::to_string(i / size_t(s.num_kv_heads)) + ", KV head " +
                                  std::to_string(i % size_t(s.num_kv_heads)) +
                                  " holds a non-finite value (NaN/Inf): not appended");
  int clamped = 0;
  saturated.download(&clamped);
  device_cache.download(cache);
  cache.add_saturated(clamped);
  cache.commit_append();
}

}  // namespace

void int8_append_cuda(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  if (cache.format().scale_dtype == ScaleDtype::fp16) {
    int8_append_host<__half>(cache, k_new, v_new);
  } else {
    int8_append_host<float>(cache, k_new, v_new);  // slots<int8_t>() refuses any format but INT8
  }
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
