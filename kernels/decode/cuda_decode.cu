// cuda/decode — chapter 03: one decode step, one block per (query head, sequence).
// (Version ladder: see cpu_decode.cpp; chapter 05 splits the keys over blocks.)
//
// What it computes (decode.h): out[b][h] = softmax(q[b][h]·K[b][g]ᵀ/√d)·V[b][g] over the
// lengths[b] cached tokens of sequence b, g = h / group_size (GQA); fp32 or fp16 cache, fp32
// arithmetic.
//
// Launch: grid (num_heads, batch), block kDecodeThreads = 128 (4 warps), dynamic shared memory
// (max_length + 4·head_dim) floats: the block's scores, then the warps' partial outputs.
//
// How the work is laid out. A cached row (one key or value, head_dim elements) is read as
// n = head_dim / W vectors of W elements — W = 4 floats (a float4, 16 bytes) or 8 halves (a
// uint4, 16 bytes) when the row is a whole number of them, else W = 1. A *key group* of G
// lanes (a power of two dividing n) shares one row, each lane holding C = n / G of its vectors,
// so a warp works on 32/G keys at a time and every lane has C independent 16-byte loads in
// flight per key. Decode is bandwidth-bound, and bandwidth needs bytes in flight: G is chosen
// so that C ≥ 4 where n allows (2 KiB per warp per step instead of 512 bytes with C = 1). For
// head_dim 64 / 80 / 96 / 128: fp32 G×C = 4×4, 4×5, 4×6, 8×4; fp16 2×4, 2×5, 2×6, 4×4 — every
// lane busy, no row padding. Odd n (head_dim 36: 9 float4) masks a few vector slots.
//
//   pass 1  (K)   each key group: dot(q, k_j) over its lanes' vectors, then a butterfly of
//                 __shfl_xor_sync inside the group (offsets < G) → scores[j] in shared memory;
//   softmax       block_reduce (softmax_warp.cuh: warp shuffles + one shared slot per warp) of
//                 the max, p_j = exp(s_j − max) in place, block_reduce of the sum;
//   pass 2  (V)   each key group accumulates p_j·v_j into registers for its lanes' dims; the
//                 key groups of a warp are combined with shuffles (offsets ≥ G), the 4 warps
//                 through shared memory; out = Σ / Σp.
// Keys j ≥ lengths[b] are never loaded: the poisoned slots past the end stay unread.
//
// Cost per block: 4·L·d FLOPs; reads L·d keys and L·d values (the other query heads of the GQA
// group read the same rows, mostly from L2). AI ≈ 1 FLOP/byte with an fp16 cache.
#include <cmath>
#include <string>

#include "kernels/attention/softmax_warp.cuh"
#include "kernels/decode/cuda_decode.cuh"
#include "kernels/decode/cuda_decode.h"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

constexpr int kDecodeThreads = 128;
constexpr int kDecodeWarps = kDecodeThreads / 32;
constexpr int kMaxHeadDim = 512;

// Loads W cached elements starting at @p p (aligned to W elements) as floats.
template <int W>
__device__ inline void load_row_vector(const float* p, float (&x)[W]) {
  if constexpr (W == 4) {
    const float4 f = *reinterpret_cast<const float4*>(p);  // one 16-byte load
    x[0] = f.x;
    x[1] = f.y;
    x[2] = f.z;
    x[3] = f.w;
  } else {
    for (int w = 0; w < W; ++w) x[w] = p[w];
  }
}
template <int W>
__device__ inline void load_row_vector(const __half* p, float (&x)[W]) {
  if constexpr (W == 8) {
    const uint4 bits = *reinterpret_cast<const uint4*>(p);  // one 16-byte load: 8 halves
    const unsigned words[4] = {bits.x, bits.y, bits.z, bits.w};
    for (int i = 0; i < 4; ++i) {  // each 32-bit word holds two halves, the lower one first
      x[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] & 0xffffu)));
      x[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] >> 16)));
    }
  } else {
    for (int w = 0; w < W; ++w) x[w] = __half2float(p[w]);
  }
}

// T: cache element type; W: elements per vector load; C: vectors per lane per row.
template <class T, int W, int C>
__global__ void decode_kernel(const float* q, const T* k_cache, const T* v_cache, const int* lengths, float* out,
                              int num_heads, int group_size, int max_seq_len, int head_dim, int lanes_per_key,
                              int max_length, float scale) {
  SIMT_DYNAMIC_SHARED(float, shared);
  float* scores = shared;                // [max_length]: scores, then probabilities (unnormalised)
  float* partial = shared + max_length;  // [kDecodeWarps][head_dim]: each warp's Σ p·v
  __shared__ float slots[32];            // block_reduce's one float per warp
  const unsigned full = 0xffffffffu;
  const int h = blockIdx.x, b = blockIdx.y;
  const int g = h / group_size, num_kv_heads = num_heads / group_size;
  const int L = lengths[b];
  float* o = out + (size_t(b) * num_heads + h) * head_dim;
  if (L <= 0 || L > max_length) {  // uniform over the block: no thread waits at a barrier below
    for (int c = threadIdx.x; c < head_dim; c += blockDim.x) o[c] = L <= 0 ? 0.0f : NAN;
    return;
  }
  const size_t head_offset = (size_t(b) * num_kv_heads + g) * size_t(max_seq_len) * head_dim;
  const T* K = k_cache + head_offset;
  const T* V = v_cache + head_offset;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int G = lanes_per_key;
  const int slot = lane % G;         // this lane's place in its key group
  const int key_in_warp = lane / G;  // which of the warp's 32/G keys it works on
  const int keys_per_warp = 32 / G, keys_per_step = kDecodeWarps * keys_per_warp;
  const int n = head_dim / W;  // vectors per row; this lane holds vectors slot + i·G

  // The lane's slice of q, pre-scaled by 1/√d (read once, reused for every key).
  float q_reg[C][W];
  const float* q_row = q + (size_t(b) * num_heads + h) * head_dim;
  for (int i = 0; i < C; ++i) {
    const int vec = slot + i * G;
    for (int w = 0; w < W; ++w) q_reg[i][w] = vec < n ? q_row[vec * W + w] * scale : 0.0f;
  }

  // Pass 1: scores. The loop bound depends on the warp only, so all 32 lanes take part in
  // every shuffle.
  for (int j0 = warp * keys_per_warp; j0 < L; j0 += keys_per_step) {
    const int j = j0 + key_in_warp;
    float dot = 0.0f;
    if (j < L) {  // never touch a slot past the sequence's end
      for (int i = 0; i < C; ++i) {
        const int vec = slot + i * G;
        if (vec < n) {
          float x[W];
          load_row_vector<W>(K + size_t(j) * head_dim + vec * W, x);
          for (int w = 0; w < W; ++w) dot += q_reg[i][w] * x[w];
        }
      }
    }
    for (int offset = G / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(full, dot, offset);
    if (slot == 0 && j < L) scores[j] = dot;
  }
  __syncthreads();  // every score is in shared memory before any thread reads one

  // Softmax: max, then exp in place, then the sum.
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

  // Pass 2: Σ p_j·v_j, each key group over its keys, each lane over its dims.
  float acc[C][W];
  for (int i = 0; i < C; ++i)
    for (int w = 0; w < W; ++w) acc[i][w] = 0.0f;
  for (int j0 = warp * keys_per_warp; j0 < L; j0 += keys_per_step) {
    const int j = j0 + key_in_warp;
    if (j >= L) continue;
    const float p = scores[j];
    for (int i = 0; i < C; ++i) {
      const int vec = slot + i * G;
      if (vec < n) {
        float x[W];
        load_row_vector<W>(V + size_t(j) * head_dim + vec * W, x);
        for (int w = 0; w < W; ++w) acc[i][w] += p * x[w];
      }
    }
  }
  // Lanes with the same slot hold the same dims for different keys: add across key groups.
  for (int offset = G; offset < 32; offset *= 2)
    for (int i = 0; i < C; ++i)
      for (int w = 0; w < W; ++w) acc[i][w] += __shfl_xor_sync(full, acc[i][w], offset);
  if (key_in_warp == 0) {
    for (int i = 0; i < C; ++i) {
      const int vec = slot + i * G;
      if (vec < n)
        for (int w = 0; w < W; ++w) partial[warp * head_dim + vec * W + w] = acc[i][w];
    }
  }
  __syncthreads();  // every warp's partial output is in shared memory before the final sum
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kDecodeWarps; ++w) sum += partial[w * head_dim + c];
    o[c] = sum * inv_sum;
  }
}

// The lanes per key (G) and vectors per lane (C) for n vectors per row: G a power of two
// dividing n (no idle lane) with C = n / G ≥ 4 where possible (more loads in flight per lane);
// when that leaves C > 8 (n with few factors of 2), the smallest G with ⌈n / G⌉ ≤ 8 and the
// last vector slots of some lanes masked. C is rounded up to a compiled value.
struct RowSplit {
  int lanes_per_key;
  int vectors_per_lane;
};
RowSplit split_row(int n) {
  int G = 1;
  while (G < 32 && n % (2 * G) == 0) G *= 2;
  while (G > 1 && n / G < 4) G /= 2;
  if (n / G > 8) {
    G = 1;
    while (G < 32 && (n + G - 1) / G > 8) G *= 2;
  }
  int C = (n + G - 1) / G;
  if (C == 7) C = 8;
  if (C > 8) C = 16;
  return {G, C};
}

template <class T, int W, int C>
cudaError_t launch_decode(const DeviceDecodeOf<T>& p, int lanes_per_key, size_t shared_bytes, cudaStream_t stream) {
  auto kernel = decode_kernel<T, W, C>;
  if (shared_bytes > 48 * 1024) {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)),
               "cudaFuncSetAttribute (decode scores)");
  }
  const DecodeShape& s = p.shape;
  return simt::launch(kernel, dim3(unsigned(s.num_heads), unsigned(s.batch)), dim3(kDecodeThreads), shared_bytes,
                      stream, p.q, static_cast<const T*>(p.cache.k), static_cast<const T*>(p.cache.v), p.cache.lengths,
                      p.out, int(s.num_heads), int(s.group_size()), int(s.max_seq_len), int(s.head_dim), lanes_per_key,
                      p.max_length, 1.0f / std::sqrt(static_cast<float>(s.head_dim)));
}

template <class T, int W>
cudaError_t launch_decode_w(const DeviceDecodeOf<T>& p, RowSplit split, size_t shared_bytes, cudaStream_t stream) {
  switch (split.vectors_per_lane) {
    case 1:
      return launch_decode<T, W, 1>(p, split.lanes_per_key, shared_bytes, stream);
    case 2:
      return launch_decode<T, W, 2>(p, split.lanes_per_key, shared_bytes, stream);
    case 3:
      return launch_decode<T, W, 3>(p, split.lanes_per_key, shared_bytes, stream);
    case 4:
      return launch_decode<T, W, 4>(p, split.lanes_per_key, shared_bytes, stream);
    case 5:
      return launch_decode<T, W, 5>(p, split.lanes_per_key, shared_bytes, stream);
    case 6:
      return launch_decode<T, W, 6>(p, split.lanes_per_key, shared_bytes, stream);
    case 8:
      return launch_decode<T, W, 8>(p, split.lanes_per_key, shared_bytes, stream);
    default:
      return launch_decode<T, W, 16>(p, split.lanes_per_key, shared_bytes, stream);
  }
}

}  // namespace

template <class T>
void decode_device(const DeviceDecodeOf<T>& p, cudaStream_t stream) {
  const DecodeShape& s = p.shape;
  const int d = int(s.head_dim);
  require(d <= kMaxHeadDim, "head_dim", d, "must be ≤ " + std::to_string(kMaxHeadDim) + " for cuda/decode");
  require(p.max_length > 0 && p.max_length <= s.max_seq_len, "max_length", p.max_length,
          "must be in [1, max_seq_len = " + std::to_string(s.max_seq_len) + "]");
  require(s.batch <= 65535, "batch", s.batch, "must be ≤ 65535 (grid.y) for cuda/decode");
  const size_t shared_bytes = (size_t(p.max_length) + size_t(kDecodeWarps) * size_t(d)) * sizeof(float);
  int device = 0, shared_limit = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute (shared memory per block)");
  require(shared_bytes <= size_t(shared_limit), "max_length", p.max_length,
          "needs " + std::to_string(shared_bytes / 1024) + " KiB of shared memory for its scores, more than the " +
              std::to_string(shared_limit / 1024) +
              " KiB a block may use here: split the keys over blocks (chapter 05's split-KV decode)");

  constexpr int kVectorWidth = sizeof(T) == 4 ? 4 : 8;  // 16-byte loads
  const bool vectorised = d % kVectorWidth == 0;
  const RowSplit split = split_row(vectorised ? d / kVectorWidth : d);
  const cudaError_t status = vectorised ? launch_decode_w<T, kVectorWidth>(p, split, shared_bytes, stream)
                                        : launch_decode_w<T, 1>(p, split, shared_bytes, stream);
  check_cuda(status, "decode_kernel");
}

template void decode_device<float>(const DeviceDecodeOf<float>&, cudaStream_t);
template void decode_device<__half>(const DeviceDecodeOf<__half>&, cudaStream_t);

namespace {

template <class T>
void decode_host(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  const DecodeShape shape = decode_shape(q, cache);
  check_decode_output(out, shape);
  const DeviceKvCacheCopy<T> device_cache(cache);
  DeviceBuffer<float> q_device(size_t(q.size()));
  q_device.upload(q.data());
  DeviceBuffer<float> out_device(size_t(out.size()));
  out_device.poison();  // an element the kernel forgets stays NaN
  DeviceDecodeOf<T> problem{q_device.data(), device_cache.view(), out_device.data(), shape, int(cache.max_length())};
  decode_device(problem, nullptr);
  check_cuda(cudaGetLastError(), "cuda/decode");
  check_cuda(cudaDeviceSynchronize(), "cuda/decode");
  out_device.download(out.data());
}

}  // namespace

void decode_cuda(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  if (cache.dtype() == KvDtype::fp16) {
    decode_host<__half>(q, cache, out);
  } else {
    decode_host<float>(q, cache, out);
  }
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
