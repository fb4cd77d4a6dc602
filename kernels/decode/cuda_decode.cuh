#pragma once
// Shared plumbing of the chapter-03 CUDA code (compiled for sim and cuda). Two layers, as in
// chapter 02 (kernels/attention/cuda_prefill.cuh):
//
//   device level   decode_device<T>, decode_int8_device<S>: the cache, the queries and the
//                  output already in device memory, work queued on a stream, no copy, no
//                  allocation, no wait. What a model calls every step and what the benchmark
//                  times.
//   host tensors   decode_cuda, decode_int8_cuda, decode_fp8_cuda (cuda_decode.h): the DecodeFn
//                  signature that tests and the CLI use — a thin wrapper: DeviceKvCache uploads
//                  the host cache (poisoned rows included), the wrapper calls the device level,
//                  then waits, checks and copies back (decode_on_host_tensors in
//                  cuda_decode_host.cuh, shared with chapter 05's wrappers).
//
// The cache on the device is kernels/kv/cuda_kv_cache.cuh's DeviceKvCache; a kernel reads it as
// KvRows (kv_layout.h): rows where the cache's layout puts them, and their scales.
//
// It also holds the decode kernel itself, decode_rows_kernel<Rows, W, C>, as a template over
// how cached rows are read (Rows): cuda/decode instantiates it with CachedRows<T> (fp32/fp16
// rows as stored), chapter 04's cuda/decode_int8 with Int8Rows (int8 rows and their scales)
// and cuda/decode_fp8 with Fp8Rows (E4M3 rows). The layout of the work, the reductions and the
// softmax are written once; cuda_decode.cu explains them.
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/ceil_div.h"
#include "common/check.h"
#include "kernels/primitives/softmax_warp.cuh"
#include "kernels/decode/decode.h"
#include "kernels/kv/cuda_kv_cache.cuh"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS {

// One decode step in device memory: q and out [batch, num_heads, head_dim] (fp32), the cache's
// rows of element type T with scales S in either layout (kv_layout.h: KvRows, device pointers;
// paged: the block table too).
template <class T, class S = float, class Layout = ContiguousLayout>
struct DeviceDecode {
  const float* q = nullptr;
  KvRows<T, S, Layout> cache;
  float* out = nullptr;
  DecodeShape shape;
  // An upper bound on every lengths[b] (the host knows it: the scheduler's longest sequence).
  // It sizes the shared memory of the scores; a sequence longer than it gets NaN outputs
  // instead of a shared-memory overflow.
  int max_length = 0;
};

// cuda/decode (cuda_decode.cu), T = float or __half: one block per (query head, sequence).
// Queues the kernel on @p stream. Throws std::invalid_argument when head_dim > 512 or the
// scores of max_length keys do not fit in this device's shared memory per block (chapter 05's
// split-KV decode then), std::runtime_error on a launch error.
template <class T, class Layout = ContiguousLayout>
void decode_device(const DeviceDecode<T, float, Layout>& problem, cudaStream_t stream);

// cuda/decode_int8 (cuda_decode_int8.cu), scales S = float or __half: the same kernel over INT8
// rows. Throws as decode_device.
template <class S, class Layout = ContiguousLayout>
void decode_int8_device(const DeviceDecode<int8_t, S, Layout>& problem, cudaStream_t stream);

// ---- The decode kernel, shared by cuda/decode and cuda/decode_int8 (see cuda_decode.cu) ----

constexpr int kDecodeThreads = 128;
constexpr int kDecodeWarps = kDecodeThreads / 32;
constexpr int kMaxDecodeHeadDim = 512;

// One cached element as a float (the scalar path of the row loads below).
__device__ inline float cached_to_float(float x) {
  return x;
}
__device__ inline float cached_to_float(__half x) {
  return __half2float(x);
}
__device__ inline float cached_to_float(int8_t x) {
  return float(x);
}

// Loads W cached elements starting at @p p (aligned to W elements) as floats: one 16-byte load
// for 4 floats, 8 halves or 16 int8; a 4-byte char4 for 4 int8; else W scalar loads. The
// overload for FP8 E4M3 codes (uint8_t) is defined in cuda_decode_fp8.cu, its only user.
template <int W>
__device__ inline void load_row_vector(const float* p, float (&x)[W]) {
  if constexpr (W == 4) {
    const float4 f = *reinterpret_cast<const float4*>(p);
    x[0] = f.x;
    x[1] = f.y;
    x[2] = f.z;
    x[3] = f.w;
  } else {
    for (int w = 0; w < W; ++w) x[w] = cached_to_float(p[w]);
  }
}
template <int W>
__device__ inline void load_row_vector(const __half* p, float (&x)[W]) {
  if constexpr (W == 8) {
    const uint4 bits = *reinterpret_cast<const uint4*>(p);
    const unsigned words[4] = {bits.x, bits.y, bits.z, bits.w};
    for (int i = 0; i < 4; ++i) {  // each 32-bit word holds two halves, the lower one first
      x[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] & 0xffffu)));
      x[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] >> 16)));
    }
  } else {
    for (int w = 0; w < W; ++w) x[w] = cached_to_float(p[w]);
  }
}
template <int W>
__device__ inline void load_row_vector(const int8_t* p, float (&x)[W]) {
  if constexpr (W == 16) {
    const uint4 bits = *reinterpret_cast<const uint4*>(p);
    const unsigned words[4] = {bits.x, bits.y, bits.z, bits.w};
    for (int i = 0; i < 4; ++i)  // each 32-bit word holds four int8, the lowest byte first
      for (int k = 0; k < 4; ++k) x[4 * i + k] = float(static_cast<int8_t>((words[i] >> (8 * k)) & 0xffu));
  } else if constexpr (W == 4) {
    const char4 c = *reinterpret_cast<const char4*>(p);
    x[0] = float(c.x);
    x[1] = float(c.y);
    x[2] = float(c.z);
    x[3] = float(c.w);
  } else {
    for (int w = 0; w < W; ++w) x[w] = cached_to_float(p[w]);
  }
}
template <int W>
__device__ void load_row_vector(const uint8_t* p, float (&x)[W]);

// The Rows of decode_rows_kernel: K and V rows of element type T (float, __half, int8_t or FP8
// codes as uint8_t) with scales S, read through the cache's layout (kv_layout.h: contiguous, or
// paged — one block-table load per key, the only difference) W elements at a time as floats.
// The hooks fold a quantized cache's scales out of the inner loops; for a plain fp32/fp16 cache
// (CachedRows) they change nothing.
template <class T, class S = float, class Layout = ContiguousLayout>
struct RowLoads {
  KvRows<T, S, Layout> cache;
  // Tokens cached for sequence b.
  __device__ int length(int b) const { return cache.lengths[b]; }
  // The row of token j of KV head g of sequence b.
  __device__ size_t row(int b, int g, int j) const { return size_t(cache.layout.row(b, g, j)); }
  // Element `at` (row · head_dim + column) of K / V onward, W of them, as floats.
  template <int W>
  __device__ void load_key(size_t at, float (&x)[W]) const {
    load_row_vector<W>(cache.k + at, x);
  }
  template <int W>
  __device__ void load_value(size_t at, float (&x)[W]) const {
    load_row_vector<W>(cache.v + at, x);
  }
};

// The Rows of a plain fp32/fp16 cache: rows read as stored, no scales.
template <class T, class Layout = ContiguousLayout>
struct CachedRows : RowLoads<T, float, Layout> {
  // Factor of query element c for KV head g of sequence b: 1.
  __device__ float query_factor(int, int, int) const { return 1.0f; }
  // The score of the key in row `row` from its dot product: as is.
  __device__ float score(size_t, float dot) const { return dot; }
  // The weight of value row `row` from its probability: as is.
  __device__ float value_weight(size_t, float p) const { return p; }
};

// One decode step, one block per (query head, sequence) — see cuda_decode.cu for the layout.
// Rows: how rows are read (CachedRows<T>, or int8 rows with scales); W: elements per vector
// load; C: vectors per lane per row.
template <class Rows, int W, int C>
__global__ void decode_rows_kernel(const float* q, Rows rows, float* out, int num_heads, int group_size,
                                   int head_dim, int lanes_per_key, int max_length, float scale) {
  SIMT_DYNAMIC_SHARED(float, shared);
  float* scores = shared;                // [max_length]: scores, then probabilities (unnormalised)
  float* partial = shared + max_length;  // [kDecodeWarps][head_dim]: each warp's Σ p·v
  __shared__ float slots[32];            // block_reduce's one float per warp
  const unsigned full = 0xffffffffu;
  const int h = blockIdx.x, b = blockIdx.y;
  const int g = h / group_size;
  const int L = rows.length(b);
  float* o = out + (size_t(b) * num_heads + h) * head_dim;
  if (L <= 0 || L > max_length) {  // uniform over the block: no thread waits at a barrier below
    for (int c = threadIdx.x; c < head_dim; c += blockDim.x) o[c] = L <= 0 ? 0.0f : NAN;
    return;
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int G = lanes_per_key;
  const int slot = lane % G;         // this lane's place in its key group
  const int key_in_warp = lane / G;  // which of the warp's 32/G keys it works on
  const int keys_per_warp = 32 / G, keys_per_step = kDecodeWarps * keys_per_warp;
  const int n = head_dim / W;  // vectors per row; this lane holds vectors slot + i·G

  // The lane's slice of q, pre-scaled by 1/√d (and by the rows' per-channel factor), read once.
  float q_reg[C][W];
  const float* q_row = q + (size_t(b) * num_heads + h) * head_dim;
  for (int i = 0; i < C; ++i) {
    const int vec = slot + i * G;
    for (int w = 0; w < W; ++w) {
      const int c = vec * W + w;
      q_reg[i][w] = vec < n ? q_row[c] * scale * rows.query_factor(b, g, c) : 0.0f;
    }
  }

  // Pass 1: scores. The loop bound depends on the warp only, so all 32 lanes take part in
  // every shuffle.
  for (int j0 = warp * keys_per_warp; j0 < L; j0 += keys_per_step) {
    const int j = j0 + key_in_warp;
    const size_t row = j < L ? rows.row(b, g, j) : 0;  // where the layout keeps key j
    float dot = 0.0f;
    if (j < L) {  // never touch a slot past the sequence's end
      for (int i = 0; i < C; ++i) {
        const int vec = slot + i * G;
        if (vec < n) {
          float x[W];
          rows.template load_key<W>(row * head_dim + vec * W, x);
          for (int w = 0; w < W; ++w) dot += q_reg[i][w] * x[w];
        }
      }
    }
    for (int offset = G / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(full, dot, offset);
    if (slot == 0 && j < L) scores[j] = rows.score(row, dot);
  }
  __syncthreads();  // every score is in shared memory before any thread reads one

  // Softmax: max, then exp in place, then the sum (whose first barrier also publishes the
  // probabilities).
  const float inv_sum = 1.0f / block_softmax_numerators(scores, L, slots).sum;

  // Pass 2: Σ p_j·v_j, each key group over its keys, each lane over its dims.
  float acc[C][W];
  for (int i = 0; i < C; ++i)
    for (int w = 0; w < W; ++w) acc[i][w] = 0.0f;
  for (int j0 = warp * keys_per_warp; j0 < L; j0 += keys_per_step) {
    const int j = j0 + key_in_warp;
    if (j >= L) continue;
    const size_t row = rows.row(b, g, j);
    const float p = rows.value_weight(row, scores[j]);
    for (int i = 0; i < C; ++i) {
      const int vec = slot + i * G;
      if (vec < n) {
        float x[W];
        rows.template load_value<W>(row * head_dim + vec * W, x);
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
inline RowSplit split_row(int n) {
  int G = 1;
  while (G < 32 && n % (2 * G) == 0) G *= 2;
  while (G > 1 && n / G < 4) G /= 2;
  if (n / G > 8) {
    G = 1;
    while (G < 32 && ceil_div(n, G) > 8) G *= 2;
  }
  int C = ceil_div(n, G);
  if (C == 7) C = 8;
  if (C > 8) C = 16;
  return {G, C};
}

// The scalar path (head_dim not a whole number of vectors: an odd size, off the 16-byte loads)
// is compiled for one register tile only: each lane holds up to 16 elements of a row, masked
// past head_dim, with the fewest lanes per key that reach — G the smallest power of two with
// ⌈head_dim / G⌉ ≤ 16. One kernel per Rows type instead of one per C: no shape a benchmark
// times takes this path, and its tile only sets how many loads a lane has in flight.
constexpr int kScalarVectorsPerLane = 16;
inline int scalar_lanes_per_key(int head_dim) {
  int G = 1;
  while (G < 32 && ceil_div(head_dim, G) > kScalarVectorsPerLane) G *= 2;
  return G;
}

template <class Rows, int W, int C>
cudaError_t launch_decode_rows_wc(const Rows& rows, const float* q, float* out, const DecodeShape& s, int max_length,
                                  int lanes_per_key, size_t shared_bytes, cudaStream_t stream) {
  auto kernel = decode_rows_kernel<Rows, W, C>;
  if (shared_bytes > 48 * 1024) {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)),
               "cudaFuncSetAttribute (decode scores)");
  }
  return simt::launch(kernel, dim3(unsigned(s.num_heads), unsigned(s.batch)), dim3(kDecodeThreads), shared_bytes,
                      stream, q, rows, out, int(s.num_heads), int(s.group_size()), int(s.head_dim), lanes_per_key,
                      max_length, 1.0f / std::sqrt(static_cast<float>(s.head_dim)));
}

template <class Rows, int W>
cudaError_t launch_decode_rows_w(const Rows& rows, const float* q, float* out, const DecodeShape& s, int max_length,
                                 RowSplit split, size_t shared_bytes, cudaStream_t stream) {
  const auto go = [&](auto c) {
    return launch_decode_rows_wc<Rows, W, decltype(c)::value>(rows, q, out, s, max_length, split.lanes_per_key,
                                                              shared_bytes, stream);
  };
  switch (split.vectors_per_lane) {
    case 1:
      return go(std::integral_constant<int, 1>{});
    case 2:
      return go(std::integral_constant<int, 2>{});
    case 3:
      return go(std::integral_constant<int, 3>{});
    case 4:
      return go(std::integral_constant<int, 4>{});
    case 5:
      return go(std::integral_constant<int, 5>{});
    case 6:
      return go(std::integral_constant<int, 6>{});
    case 8:
      return go(std::integral_constant<int, 8>{});
    default:
      return go(std::integral_constant<int, 16>{});
  }
}

// Checks the problem (head_dim ≤ 512, max_length in [1, max_seq_len], batch ≤ 65535, the
// scores fit in this device's shared memory — else chapter 05's split-KV decode) and queues
// decode_rows_kernel on @p stream: vectors of kVectorWidth elements (16 bytes, or 4 for int8
// rows read as char4) when head_dim is a whole number of them, else single elements. @p name
// names the version in errors.
template <class Rows, int kVectorWidth>
void launch_decode_rows(const Rows& rows, const float* q, float* out, const DecodeShape& s, int max_length,
                        cudaStream_t stream, const char* name) {
  const int d = int(s.head_dim);
  require(d <= kMaxDecodeHeadDim, "head_dim", d,
          "must be ≤ " + std::to_string(kMaxDecodeHeadDim) + " for " + std::string(name));
  require(max_length > 0 && max_length <= s.max_seq_len, "max_length", max_length,
          "must be in [1, max_seq_len = " + std::to_string(s.max_seq_len) + "]");
  require(s.batch <= 65535, "batch", s.batch, "must be ≤ 65535 (grid.y) for " + std::string(name));
  const size_t shared_bytes = (size_t(max_length) + size_t(kDecodeWarps) * size_t(d)) * sizeof(float);
  int device = 0, shared_limit = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute (shared memory per block)");
  require(shared_bytes <= size_t(shared_limit), "max_length", max_length,
          "needs " + std::to_string(shared_bytes / 1024) + " KiB of shared memory for its scores, more than the " +
              std::to_string(shared_limit / 1024) +
              " KiB a block may use here: split the keys over blocks (chapter 05's split-KV decode)");
  const bool vectorised = d % kVectorWidth == 0;
  const cudaError_t status =
      vectorised ? launch_decode_rows_w<Rows, kVectorWidth>(rows, q, out, s, max_length, split_row(d / kVectorWidth),
                                                            shared_bytes, stream)
                 : launch_decode_rows_wc<Rows, 1, kScalarVectorsPerLane>(rows, q, out, s, max_length,
                                                                         scalar_lanes_per_key(d), shared_bytes, stream);
  check_cuda(status, name);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
