// cuda/decode_int8 — chapter 04: one decode step over an INT8 KV cache, dequantized in the kernel.
// (Version ladder: cuda/decode (ch03, fp32/fp16 cache) → this: 1 byte per cached element.)
//
// Launch: grid (num_heads, batch), block 128 (4 warps), dynamic shared memory
// (max_length + 4·head_dim) floats (scores, then the warps' partial outputs), as cuda/decode.
// Each warp takes one key at a time; lane l holds vectors l, l+32, … of the row, a vector being
// a char4 (4 int8 = one 4-byte load) when head_dim % 4 == 0, else one int8.
//
//   pass 1 (K)  dot(q', k̂_j) over the lane's char4s, converted to float and FMA'd; warp
//               butterfly; per-token K: s_j = k_scale_j · dot. Per-channel K: the channel
//               scales are folded into q' once (q'_c = q_c · k_scale_c / √d);
//   softmax     block_reduce max, exp in place, block_reduce sum;
//   pass 2 (V)  acc += (p_j · v_scale_j) · v̂_j per lane's dims; warps combined in shared memory.
//
// Why fp32 FMA after conversion and not __dp4a: __dp4a multiplies two int8 vectors, so the
// query would have to be quantized to int8 too — a second rounding (≈ max|q|/254 per element)
// on the fp32 activations that enters every score, and decode is memory-bound anyway: the
// conversion costs issue slots we have to spare while waiting on the cache's bytes, and the
// bytes are what the INT8 cache saves.
//
// Cost per block: 4·L·d FLOPs; reads L·d bytes of K and of V plus 4–8·L bytes of scales.
// Keys j ≥ lengths[b] are never read (their scales are NaN on the host: poisoned).
#include <cmath>
#include <string>

#include "kernels/attention/softmax_warp.cuh"
#include "kernels/decode/decode_int8.h"
#include "kernels/quant/cuda_int8_kv_cache.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadDim = 512;

template <int W>
__device__ inline void load_int8(const int8_t* p, float (&x)[W]) {
  if constexpr (W == 4) {
    const char4 c = *reinterpret_cast<const char4*>(p);  // one 4-byte load
    x[0] = float(c.x);
    x[1] = float(c.y);
    x[2] = float(c.z);
    x[3] = float(c.w);
  } else {
    for (int w = 0; w < W; ++w) x[w] = float(p[w]);
  }
}

// W: int8 per vector; C: vectors per lane (⌈head_dim / (32·W)⌉ rounded up to a compiled value).
template <int W, int C>
__global__ void decode_int8_kernel(const float* q, DeviceInt8KvCache cache, float* out, int num_heads, int group_size,
                                   int max_length, float scale) {
  SIMT_DYNAMIC_SHARED(float, shared);
  float* scores = shared;
  float* partial = shared + max_length;  // [kWarps][head_dim]
  __shared__ float slots[32];
  const unsigned full = 0xffffffffu;
  const int h = blockIdx.x, b = blockIdx.y;
  const int head_dim = int(cache.shape.head_dim), max_seq_len = int(cache.shape.max_seq_len);
  const int g = h / group_size, num_kv_heads = num_heads / group_size;
  const int L = cache.lengths[b];
  float* o = out + (size_t(b) * num_heads + h) * head_dim;
  if (L <= 0 || L > max_length) {  // uniform over the block
    for (int c = threadIdx.x; c < head_dim; c += blockDim.x) o[c] = L <= 0 ? 0.0f : NAN;
    return;
  }
  const size_t head = size_t(b) * num_kv_heads + g;
  const int8_t* K = cache.k + head * size_t(max_seq_len) * head_dim;
  const int8_t* V = cache.v + head * size_t(max_seq_len) * head_dim;
  const float* v_scale = cache.v_scales + head * size_t(max_seq_len);
  const float* k_scale = cache.k_scales + head * size_t(cache.per_channel ? head_dim : max_seq_len);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = head_dim / W;

  float q_reg[C][W];
  const float* q_row = q + (size_t(b) * num_heads + h) * head_dim;
  for (int i = 0; i < C; ++i) {
    const int vec = lane + 32 * i;
    for (int w = 0; w < W; ++w) {
      const int c = vec * W + w;
      q_reg[i][w] = vec < n ? q_row[c] * scale * (cache.per_channel ? k_scale[c] : 1.0f) : 0.0f;
    }
  }

  // Pass 1: one key per warp per step; the loop bound is warp-uniform (all lanes shuffle).
  for (int j = warp; j < L; j += kWarps) {
    float dot = 0.0f;
    for (int i = 0; i < C; ++i) {
      const int vec = lane + 32 * i;
      if (vec < n) {
        float x[W];
        load_int8<W>(K + size_t(j) * head_dim + vec * W, x);
        for (int w = 0; w < W; ++w) dot += q_reg[i][w] * x[w];
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(full, dot, offset);
    if (lane == 0) scores[j] = cache.per_channel ? dot : dot * k_scale[j];
  }
  __syncthreads();  // every score is in shared memory before any thread reads one

  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < L; j += blockDim.x) local_max = fmaxf(local_max, scores[j]);
  const float max_score = block_reduce<true>(local_max, slots);
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < L; j += blockDim.x) {
    const float p = __expf(scores[j] - max_score);
    scores[j] = p;
    local_sum += p;
  }
  // block_reduce's first barrier also publishes the probabilities written just above.
  const float inv_sum = 1.0f / block_reduce<false>(local_sum, slots);

  float acc[C][W];
  for (int i = 0; i < C; ++i)
    for (int w = 0; w < W; ++w) acc[i][w] = 0.0f;
  for (int j = warp; j < L; j += kWarps) {
    const float p = scores[j] * v_scale[j];  // the row's scale rides on its probability
    for (int i = 0; i < C; ++i) {
      const int vec = lane + 32 * i;
      if (vec < n) {
        float x[W];
        load_int8<W>(V + size_t(j) * head_dim + vec * W, x);
        for (int w = 0; w < W; ++w) acc[i][w] += p * x[w];
      }
    }
  }
  for (int i = 0; i < C; ++i) {
    const int vec = lane + 32 * i;
    if (vec < n)
      for (int w = 0; w < W; ++w) partial[warp * head_dim + vec * W + w] = acc[i][w];
  }
  __syncthreads();  // every warp's partial output is in shared memory before the final sum
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum += partial[w * head_dim + c];
    o[c] = sum * inv_sum;
  }
}

template <int W, int C>
cudaError_t launch(const float* q, const DeviceInt8KvCache& cache, float* out, const DecodeShape& s, int max_length,
                   size_t shared_bytes) {
  auto kernel = decode_int8_kernel<W, C>;
  if (shared_bytes > 48 * 1024)
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)),
               "cudaFuncSetAttribute (decode_int8 scores)");
  return simt::launch(kernel, dim3(unsigned(s.num_heads), unsigned(s.batch)), dim3(kThreads), shared_bytes, nullptr,
                      q, cache, out, int(s.num_heads), int(s.group_size()), max_length,
                      1.0f / std::sqrt(static_cast<float>(s.head_dim)));
}

}  // namespace

void decode_int8_cuda(const Tensor<float>& q, const Int8KvCache& cache, Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  const int d = int(s.head_dim);
  require(d <= kMaxHeadDim, "head_dim", d, "must be ≤ " + std::to_string(kMaxHeadDim) + " for cuda/decode_int8");
  require(s.batch <= 65535, "batch", s.batch, "must be ≤ 65535 (grid.y) for cuda/decode_int8");
  const int max_length = int(cache.max_length());
  const size_t shared_bytes = (size_t(max_length) + size_t(kWarps) * size_t(d)) * sizeof(float);
  int device = 0, shared_limit = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute (shared memory per block)");
  require(shared_bytes <= size_t(shared_limit), "max_length", max_length,
          "the scores do not fit in shared memory: split the keys over blocks (chapter 05)");
  const DeviceInt8KvCacheCopy device_cache(cache);
  DeviceBuffer<float> q_device(size_t(q.size()));
  q_device.upload(q.data());
  DeviceBuffer<float> out_device(size_t(out.size()));
  out_device.poison();  // an element the kernel forgets stays NaN
  const DeviceInt8KvCache view = device_cache.view();
  cudaError_t status;
  if (d % 4 == 0) {  // char4 rows: d ≤ 512 → at most 4 vectors per lane
    status = d <= 128 ? launch<4, 1>(q_device.data(), view, out_device.data(), s, max_length, shared_bytes)
                      : launch<4, 4>(q_device.data(), view, out_device.data(), s, max_length, shared_bytes);
  } else {
    status = launch<1, 16>(q_device.data(), view, out_device.data(), s, max_length, shared_bytes);
  }
  check_cuda(status, "decode_int8_kernel");
  check_cuda(cudaDeviceSynchronize(), "cuda/decode_int8");
  out_device.download(out.data());
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
