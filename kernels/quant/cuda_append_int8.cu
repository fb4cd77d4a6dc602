// cuda/append_int8 — chapter 04: quantize-on-append. One new token's K and V (fp32) become
// int8 rows plus fp32 scales in slot lengths[b].
//
// Launch: grid (num_kv_heads, batch), block 128. Block (g, b): max |v| (and max |k| for
// per-token K scales) over the row by block_reduce, scales stored as fp32 or as fp16 rounded
// up (scale_to_fp16_up_device: the rounding never pushes |x|/Δ past 127), a finiteness flag reduced the same way,
// then each thread quantizes its elements: q = clamp(rint(x / Δ), −127, 127) — rounded, then
// clamped in float, so an out-of-range value (per-channel K past the prompt's range) saturates
// instead of wrapping through the int8 cast. Bytes: 2·d·(4 + 1) + 4–8 per (sequence, KV head).
//
// A row with a NaN/Inf writes nothing and sets status[b·num_kv_heads + g] = 1; the host reads
// the flags and throws naming the sequence and KV head (the host check runs first anyway —
// the flag keeps the kernel safe for callers that skip it). Clamped values are counted in
// *saturated (atomicAdd).
#include <cfloat>
#include <string>

#include "kernels/attention/softmax_warp.cuh"
#include "kernels/decode/decode_int8.h"
#include "kernels/quant/cuda_int8_kv_cache.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

constexpr int kAppendThreads = 128;

__device__ inline int8_t quantize(float x, float scale, int* saturated) {
  if (scale == 0.0f) {  // a per-channel scale calibrated on zeros: any other value is out of range
    if (x != 0.0f) atomicAdd(saturated, 1);
    return 0;
  }
  const float r = roundf(x / scale);  // half away from zero, as the host quantize_int8
  if (fabsf(r) > 127.0f) atomicAdd(saturated, 1);
  return static_cast<int8_t>(fminf(fmaxf(r, -127.0f), 127.0f));
}

// Stores scale @p scale at index @p i of the fp32 or fp16 scales (fp16: rounded up, so that
// |x|/scale ≤ 127 still holds) when @p write; returns the value stored, which every thread of
// the block computes alike.
__device__ inline float store_scale(float* fp32, __half* fp16, size_t i, float scale, bool write) {
  if (fp16 != nullptr) {
    const __half rounded = scale_to_fp16_up_device(scale);
    if (write) fp16[i] = rounded;
    return __half2float(rounded);
  }
  if (write) fp32[i] = scale;
  return scale;
}

// Scale i of the fp32 or fp16 scales as a float.
__device__ inline float load_scale(const float* fp32, const __half* fp16, size_t i) {
  return fp16 != nullptr ? __half2float(fp16[i]) : fp32[i];
}

__global__ void int8_append_kernel(DeviceInt8KvCache cache, const float* k_new, const float* v_new, int* status,
                                   int* saturated) {
  __shared__ float slots[32];
  const int g = blockIdx.x, b = blockIdx.y;
  const KvCacheShape& s = cache.shape;
  const int d = int(s.head_dim), G = int(s.num_kv_heads);
  const int slot = cache.lengths[b];
  if (slot < 0 || slot >= s.max_seq_len) return;  // full: never write past the end
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
  const size_t row = ((size_t(b) * G + g) * size_t(s.max_seq_len) + slot) * d;
  const size_t token_scale = (size_t(b) * G + g) * size_t(s.max_seq_len) + slot;
  const bool first = threadIdx.x == 0;
  const float v_scale = store_scale(cache.v_scales, cache.v_scales_fp16, token_scale, v_max / 127.0f, first);
  const float k_scale =
      cache.per_channel ? 0.0f : store_scale(cache.k_scales, cache.k_scales_fp16, token_scale, k_max / 127.0f, first);
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    cache.v[row + c] = quantize(v_row[c], v_scale, saturated);
    float scale = k_scale;
    if (cache.per_channel) {  // this thread owns channel c's scale: no race
      const size_t channel = (size_t(b) * G + g) * d + c;
      scale = load_scale(cache.k_scales, cache.k_scales_fp16, channel);
      if (scale != scale)  // NaN: no prompt, this token calibrates
        scale = store_scale(cache.k_scales, cache.k_scales_fp16, channel, fabsf(k_row[c]) / 127.0f, true);
    }
    cache.k[row + c] = quantize(k_row[c], scale, saturated);
  }
}

}  // namespace

void int8_append_cuda(Int8KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.check_append(k_new, v_new);  // full sequence or NaN/Inf: throws before anything is written
  const KvCacheShape& s = cache.shape();
  require(s.batch <= 65535, "batch", s.batch, "must be ≤ 65535 (grid.y) for cuda/append_int8");
  const DeviceInt8KvCacheCopy device_cache(cache);
  DeviceBuffer<float> k_device(size_t(k_new.size())), v_device(size_t(v_new.size()));
  k_device.upload(k_new.data());
  v_device.upload(v_new.data());
  const size_t items = size_t(s.batch * s.num_kv_heads);
  DeviceBuffer<int> status(items), saturated(1);
  check_cuda(cudaMemset(status.data(), 0, items * sizeof(int)), "cudaMemset (status)");
  check_cuda(cudaMemset(saturated.data(), 0, sizeof(int)), "cudaMemset (saturated)");
  check_cuda(
      simt::launch(int8_append_kernel, dim3(unsigned(s.num_kv_heads), unsigned(s.batch)), dim3(kAppendThreads), 0,
                   nullptr, device_cache.view(), k_device.data(), v_device.data(), status.data(), saturated.data()),
      "int8_append_kernel");
  check_cuda(cudaDeviceSynchronize(), "cuda/append_int8");
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

}  // namespace inferlab::INFERLAB_BACKEND_NS
