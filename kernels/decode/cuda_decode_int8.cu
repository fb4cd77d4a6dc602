// cuda/decode_int8 — chapter 04: one decode step over an INT8 KV cache, dequantized in the kernel.
// (Version ladder: cuda/decode (ch03, fp32/fp16 cache) → this: 1 byte per cached element.)
//
// The kernel is chapter 03's (decode_rows_kernel in cuda_decode.cuh: block per (query head,
// sequence), key groups of G lanes, block reductions, softmax in shared memory) with int8 rows:
// Int8Rows (below) widens 16 int8 per 16-byte load (a uint4; char4 loads when
// head_dim is a multiple of 4 only, else single bytes) and folds the scales out of the loops:
//   per-channel K: q'_c = q_c · Δk_c / √d, once per block;
//   per-token K:   s_j = Δk_j · (q' · k̂_j), one multiply per score;
//   V:             acc += (p_j · Δv_j) · v̂_j — the row's scale rides on its probability.
// For head_dim 128 a row is 8 uint4: G×C = 2×4 (16 keys per warp per step, 64 bytes per lane in
// flight per key); scales are fp32 or fp16 (Int8Rows<float> / Int8Rows<__half>).
//
// Why fp32 FMA after conversion and not __dp4a: __dp4a multiplies two int8 vectors, so the
// query would have to be quantized to int8 too — a second rounding (≈ max|q|/254 per element)
// on the fp32 activations that enters every score, and decode is memory-bound anyway: the
// conversion costs issue slots we have to spare while waiting on the cache's bytes, and the
// bytes are what the INT8 cache saves.
//
// Cost per block: 4·L·d FLOPs; reads L·d bytes of K and of V plus 2–4 bytes of scale per row
// (per-channel K: 2–4·d bytes per block). Keys j ≥ lengths[b] are never read (their scales are
// NaN on the host: poisoned).
#include <cmath>
#include <string>

#include "kernels/decode/cuda_decode.cuh"
#include "kernels/decode/cuda_decode.h"
#include "kernels/decode/cuda_decode_host.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

__device__ inline float scale_value(float s) {
  return s;
}
__device__ inline float scale_value(__half s) {
  return __half2float(s);
}

// The Rows of decode_rows_kernel for an INT8 cache whose scales are stored as S (float or
// __half): int8 rows widened to float in the loads, the scales folded out of the inner loops —
// per-channel K into the query (q'_c = q_c·Δk_c), per-token K into the score (s_j = Δk_j·(q·k̂_j)),
// V into the probability (p_j·Δv_j). Per-token scales sit at the row's index (kv_layout.h).
template <class S, class Layout>
struct Int8Rows : RowLoads<int8_t, S, Layout> {
  __device__ float query_factor(int b, int g, int c) const {
    const KvRows<int8_t, S, Layout>& r = this->cache;
    return r.per_channel ? scale_value(r.k_scales[size_t(r.layout.head(b, g)) * size_t(r.head_dim) + c]) : 1.0f;
  }
  __device__ float score(size_t row, float dot) const {
    return this->cache.per_channel ? dot : dot * scale_value(this->cache.k_scales[row]);
  }
  __device__ float value_weight(size_t row, float p) const { return p * scale_value(this->cache.v_scales[row]); }
};

}  // namespace

template <class S, class Layout>
void decode_int8_device(const DeviceDecode<int8_t, S, Layout>& p, cudaStream_t stream) {
  using Rows = Int8Rows<S, Layout>;
  const Rows rows{{p.cache}};
  constexpr int kVectorWidth = 16;  // 16 int8 = one 16-byte load
  if (p.shape.head_dim % kVectorWidth == 0) {
    launch_decode_rows<Rows, kVectorWidth>(rows, p.q, p.out, p.shape, p.max_length, stream, "cuda/decode_int8");
  } else {  // char4 loads where the row is a whole number of them, else single bytes
    launch_decode_rows<Rows, 4>(rows, p.q, p.out, p.shape, p.max_length, stream, "cuda/decode_int8");
  }
}

template void decode_int8_device<float>(const DeviceDecode<int8_t, float>&, cudaStream_t);
template void decode_int8_device<__half>(const DeviceDecode<int8_t, __half>&, cudaStream_t);
template void decode_int8_device<float, PagedLayout>(const DeviceDecode<int8_t, float, PagedLayout>&, cudaStream_t);
template void decode_int8_device<__half, PagedLayout>(const DeviceDecode<int8_t, __half, PagedLayout>&, cudaStream_t);

namespace {

template <class S>
void decode_int8_host(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  const DeviceKvCache device_cache(cache);
  decode_on_host_tensors(q, out, "cuda/decode_int8", [&](const float* q_device, float* out_device) {
    device_cache.with_rows<int8_t, S>(0, [&](const auto& rows) {
      using Layout = std::decay_t<decltype(rows.layout)>;
      decode_int8_device<S, Layout>({q_device, rows, out_device, s, int(cache.max_length())}, nullptr);
    });
  });
}

}  // namespace

void decode_int8_cuda(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  if (cache.format().scale_dtype == ScaleDtype::fp16) {
    decode_int8_host<__half>(q, cache, out);
  } else {
    decode_int8_host<float>(q, cache, out);  // rows<int8_t>() refuses any format but INT8
  }
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
