// cuda/append and cuda/append_int8 — chapters 03, 04 and 06: write new tokens' K and V into the
// KV cache (kv_cache.h), on the device.
//
// Every decode step first appends the new token (its K and V, computed by the layer's
// projections) to each sequence's cache, then runs decode attention over lengths[b] + 1 tokens;
// a prefill chunk (chapter 07) writes many tokens of one sequence. Both are one operation, as in
// vLLM's reshape_and_cache: token i of the launch goes to slot slots[i] (kv_layout.h: slot =
// block · block_size + offset, the same for every KV head), a slot the host computed — from the
// lengths for an append (KvCache::append_slots), through the block table when paged. The kernels
// never look at a length or a block table: one kernel serves both layouts, and a slot of −1 is
// skipped (a padded token).
//
// cuda/append (fp32, fp16). Launch: grid (num_kv_heads, num_tokens), block 128; block (g, i)
// copies k_new[i][g] and v_new[i][g] (head_dim fp32 each) into row slot_row(slots[i], g),
// converted to the cache's type (fp16: round to nearest even, as the host KvCache does).
// Consecutive threads write consecutive elements: coalesced. Bytes: 2·d·(4 + e) per
// (token, KV head); no FLOPs.
//
// cuda/append_int8 (INT8): quantize-on-append. Launch as above. Block (g, i): max |v| (and max
// |k| for per-token K scales) over the row by block_reduce, scales stored as fp32 or as fp16
// rounded up (scale_to_fp16_up_device: the rounding never pushes |x|/Δ past 127), a finiteness
// flag reduced the same way, then each thread quantizes its elements: q = clamp(rint(x / Δ),
// −127, 127) — rounded, then clamped in float, so an out-of-range value (per-channel K past the
// prompt's range) saturates instead of wrapping through the int8 cast. Bytes: 2·d·(4 + 1) + 4–8
// per (token, KV head). A row with a NaN/Inf writes nothing and sets status[i·num_kv_heads + g]
// = 1; the host reads the flags and throws naming the token and KV head (the host check runs
// first anyway — the flag keeps the kernel safe for callers that skip it). Clamped values are
// counted in *saturated (atomicAdd).
//
// Capacity: the host checks every slot before launching (KvCache::check_append: no sequence is
// full; KvCache::check_slots: every slot inside the pool, none twice) and throws
// std::invalid_argument; the kernels also skip a slot outside [0, slots_per_layer), so a caller
// that skipped the check loses the token instead of corrupting another sequence's rows.
#include <algorithm>
#include <cfloat>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/kv/cuda_append.cuh"
#include "kernels/kv/cuda_append.h"
#include "kernels/kv/cuda_kv_cache.cuh"
#include "kernels/primitives/softmax_warp.cuh"

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

template <class T, class Layout>
__global__ void kv_write_kernel(KvSlots<T, float, Layout> cache, const float* k_new, const float* v_new,
                                int64_t token_stride, const int64_t* slots, int64_t slots_per_layer) {
  const int g = blockIdx.x, i = blockIdx.y, d = int(cache.head_dim);
  const int64_t slot = slots[i];
  if (slot < 0 || slot >= slots_per_layer) return;  // padded (−1) or corrupt: never write outside the pool
  const size_t dst = size_t(cache.layout.slot_row(slot, g)) * d;
  const size_t src = size_t(i) * size_t(token_stride) + size_t(g) * d;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    store_cached(cache.k + dst + c, k_new[src + c]);
    store_cached(cache.v + dst + c, v_new[src + c]);
  }
}

// Uploads k, v ([num_tokens, num_kv_heads, head_dim]) and the slots, runs @p launch over grid
// (num_kv_heads, num_tokens) and waits (errors name @p name).
template <class Launch>
void write_on_device(const KvCacheShape& s, const Tensor<float>& k, const Tensor<float>& v,
                     std::span<const int64_t> slots, const char* name, const Launch& launch) {
  const int64_t tokens = int64_t(slots.size());
  if (tokens == 0) return;
  require(tokens <= 65535, "slots.size()", tokens, std::string("must be ≤ 65535 (grid.y) for ") + name);
  DeviceBuffer<float> k_device(size_t(k.size())), v_device(size_t(v.size()));
  k_device.upload(k.data());
  v_device.upload(v.data());
  DeviceBuffer<int64_t> slots_device(slots.size());
  slots_device.upload(slots.data());
  check_cuda(launch(dim3(unsigned(s.num_kv_heads), unsigned(tokens)), k_device.data(), v_device.data(),
                    static_cast<const int64_t*>(slots_device.data())),
             name);
  check_cuda(cudaDeviceSynchronize(), name);
}

// Writes token i of k and v at slot slots[i] of layer @p layer of @p cache (checked by the caller).
template <class T>
void write_host(KvCache& cache, const Tensor<float>& k, const Tensor<float>& v, std::span<const int64_t> slots,
                int64_t layer) {
  DeviceKvCache device_cache(cache);
  device_cache.with_rows<T>(layer, [&](const auto& rows) {
    using Layout = std::decay_t<decltype(rows.layout)>;
    const KvSlots<T, float, Layout> target = device_cache.slots<T, float, Layout>(layer);
    write_on_device(cache.shape(), k, v, slots, "cuda/append",
                    [&](dim3 grid, const float* k_device, const float* v_device, const int64_t* slots_device) {
                      return simt::launch(kv_write_kernel<T, Layout>, grid, dim3(kAppendThreads), 0, nullptr, target,
                                          k_device, v_device, cache.shape().num_kv_heads * cache.shape().head_dim,
                                          slots_device, cache.slots_per_layer());
                    });
  });
  device_cache.download(cache);
}

template <class T>
void append_host(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.check_append(k_new, v_new);  // a full sequence throws here, before anything is written
  write_host<T>(cache, k_new, v_new, cache.append_slots(), 0);
  cache.commit_append();
}

}  // namespace

void kv_write_slots_device(DeviceKvCache& cache, const float* k, const float* v, int64_t token_stride,
                           const int64_t* slots, int64_t num_tokens, int64_t layer) {
  if (num_tokens == 0) return;
  require(num_tokens <= 65535, "num_tokens", num_tokens, "must be ≤ 65535 (grid.y) for kv_write_slots_device");
  const auto write = [&]<class T>(T*) {
    cache.with_rows<T>(layer, [&](const auto& rows) {
      using Layout = std::decay_t<decltype(rows.layout)>;
      check_cuda(
          simt::launch(kv_write_kernel<T, Layout>, dim3(unsigned(cache.shape().num_kv_heads), unsigned(num_tokens)),
                       dim3(kAppendThreads), 0, nullptr, cache.slots<T, float, Layout>(layer), k, v, token_stride,
                       slots, cache.slots_per_layer()),
          "kv_write_slots_device");
    });
  };
  switch (cache.format().dtype) {
    case KvDtype::fp32:
      return write(static_cast<float*>(nullptr));
    case KvDtype::fp16:
      return write(static_cast<__half*>(nullptr));
    default:
      throw std::logic_error("kv_write_slots_device: no resident write for " + cache.format().name() +
                             " (fp32 and fp16 have one)");
  }
}

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

template <class S, class Layout>
__global__ void int8_write_kernel(KvSlots<int8_t, S, Layout> cache, const float* k_new, const float* v_new,
                                  const int64_t* slots, int64_t slots_per_layer, int* status, int* saturated) {
  __shared__ float reduce_slots[32];
  const int g = blockIdx.x, i = blockIdx.y;
  const int d = int(cache.head_dim), G = int(cache.layout.num_kv_heads);
  const int64_t slot = slots[i];
  if (slot < 0 || slot >= slots_per_layer) return;  // padded (−1) or corrupt: never write outside the pool
  const float* k_row = k_new + (size_t(i) * G + g) * d;
  const float* v_row = v_new + (size_t(i) * G + g) * d;
  float k_max = 0.0f, v_max = 0.0f, bad = 0.0f;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    const float kc = k_row[c], vc = v_row[c];
    if (!(fabsf(kc) <= FLT_MAX) || !(fabsf(vc) <= FLT_MAX)) bad = 1.0f;  // NaN compares false
    k_max = fmaxf(k_max, fabsf(kc));
    v_max = fmaxf(v_max, fabsf(vc));
  }
  bad = block_reduce<true>(bad, reduce_slots);
  if (bad > 0.0f) {  // uniform over the block
    if (threadIdx.x == 0) status[i * G + g] = 1;
    return;
  }
  k_max = block_reduce<true>(k_max, reduce_slots);
  v_max = block_reduce<true>(v_max, reduce_slots);
  const size_t token_scale = size_t(cache.layout.slot_row(slot, g));  // a per-token scale sits at its row
  const size_t row = token_scale * d;
  const bool first = threadIdx.x == 0;
  const float v_scale = store_scale(cache.v_scales, token_scale, v_max / 127.0f, first);
  const float k_scale = cache.per_channel ? 0.0f : store_scale(cache.k_scales, token_scale, k_max / 127.0f, first);
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    cache.v[row + c] = quantize(v_row[c], v_scale, saturated);
    float scale = k_scale;
    if (cache.per_channel) {  // this thread owns channel c's scale: no race (contiguous caches only)
      const size_t channel = size_t(cache.layout.slot_head(slot, g)) * d + c;
      scale = load_scale(cache.k_scales, channel);
      if (scale != scale)  // NaN: no prompt, this token calibrates
        scale = store_scale(cache.k_scales, channel, fabsf(k_row[c]) / 127.0f, true);
    }
    cache.k[row + c] = quantize(k_row[c], scale, saturated);
  }
}

// Quantizes token i of k and v into slot slots[i] of layer @p layer of @p cache (checked by the caller).
template <class S>
void int8_write_host(KvCache& cache, const Tensor<float>& k, const Tensor<float>& v, std::span<const int64_t> slots,
                     int64_t layer) {
  const KvCacheShape& s = cache.shape();
  DeviceKvCache device_cache(cache);
  const size_t items = std::max<size_t>(1, slots.size() * size_t(s.num_kv_heads));
  DeviceBuffer<int> status(items), saturated(1);
  check_cuda(cudaMemset(status.data(), 0, items * sizeof(int)), "cudaMemset (status)");
  check_cuda(cudaMemset(saturated.data(), 0, sizeof(int)), "cudaMemset (saturated)");
  device_cache.with_rows<int8_t, S>(layer, [&](const auto& rows) {
    using Layout = std::decay_t<decltype(rows.layout)>;
    const KvSlots<int8_t, S, Layout> target = device_cache.slots<int8_t, S, Layout>(layer);
    write_on_device(s, k, v, slots, "cuda/append_int8",
                    [&](dim3 grid, const float* k_device, const float* v_device, const int64_t* slots_device) {
                      return simt::launch(int8_write_kernel<S, Layout>, grid, dim3(kAppendThreads), 0, nullptr, target,
                                          k_device, v_device, slots_device, cache.slots_per_layer(), status.data(),
                                          saturated.data());
                    });
  });
  std::vector<int> flags(items);
  status.download(flags.data());
  for (size_t i = 0; i < slots.size() * size_t(s.num_kv_heads); ++i)
    if (flags[i] != 0)  // the cache on the host is untouched: nothing is downloaded
      throw std::invalid_argument("k/v: token " + std::to_string(i / size_t(s.num_kv_heads)) + ", KV head " +
                                  std::to_string(i % size_t(s.num_kv_heads)) +
                                  " holds a non-finite value (NaN/Inf): not written");
  int clamped = 0;
  saturated.download(&clamped);
  device_cache.download(cache);
  cache.add_saturated(clamped);
}

template <class S>
void int8_append_host(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.check_append(k_new, v_new);  // full sequence or NaN/Inf: throws before anything is written
  int8_write_host<S>(cache, k_new, v_new, cache.append_slots(), 0);
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

void kv_write_slots_cuda(KvCache& cache, const Tensor<float>& k, const Tensor<float>& v, std::span<const int64_t> slots,
                         int64_t layer) {
  require(layer >= 0 && layer < cache.shape().num_layers, "layer", layer,
          "must be in [0, num_layers = " + std::to_string(cache.shape().num_layers) + ")");
  cache.check_slots(k, v, slots);  // shapes, range, duplicates, finiteness: before anything is written
  switch (cache.dtype()) {
    case KvDtype::fp32:
      return write_host<float>(cache, k, v, slots, layer);
    case KvDtype::fp16:
      return write_host<__half>(cache, k, v, slots, layer);
    case KvDtype::int8:
      if (cache.format().scale_dtype == ScaleDtype::fp16) return int8_write_host<__half>(cache, k, v, slots, layer);
      return int8_write_host<float>(cache, k, v, slots, layer);
    case KvDtype::fp8:
      break;
  }
  throw std::logic_error("kv_write_slots_cuda: no device write for " + cache.format().name() + " (cpu: store_slots)");
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
