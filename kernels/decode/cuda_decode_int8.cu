// cuda/decode_int8 — chapter 04: one decode step over an INT8 KV cache, dequantized in the kernel.
// (Version ladder: cuda/decode (ch03, fp32/fp16 cache) → this: 1 byte per cached element.)
//
// The kernel is chapter 03's (decode_rows_kernel in cuda_decode.cuh: block per (query head,
// sequence), key groups of G lanes, block reductions, softmax in shared memory) with int8 rows:
// Int8Rows (cuda_int8_kv_cache.cuh) widens 16 int8 per 16-byte load (a uint4; char4 loads when
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

#include "kernels/decode/decode_int8.h"
#include "kernels/quant/cuda_int8_kv_cache.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

template <class S>
void launch_int8(const DeviceDecodeInt8& p, const S* k_scales, const S* v_scales, cudaStream_t stream) {
  const Int8Rows<S> rows{{p.cache.k, p.cache.v}, k_scales, v_scales, p.cache.lengths, p.cache.per_channel};
  constexpr int kVectorWidth = 16;  // 16 int8 = one 16-byte load
  if (p.shape.head_dim % kVectorWidth == 0) {
    launch_decode_rows<Int8Rows<S>, kVectorWidth>(rows, p.q, p.out, p.shape, p.max_length, stream, "cuda/decode_int8");
  } else {  // char4 loads where the row is a whole number of them, else single bytes
    launch_decode_rows<Int8Rows<S>, 4>(rows, p.q, p.out, p.shape, p.max_length, stream, "cuda/decode_int8");
  }
}

}  // namespace

void decode_int8_device(const DeviceDecodeInt8& p, cudaStream_t stream) {
  if (p.cache.k_scales_fp16 != nullptr) {
    launch_int8<__half>(p, p.cache.k_scales_fp16, p.cache.v_scales_fp16, stream);
  } else {
    launch_int8<float>(p, p.cache.k_scales, p.cache.v_scales, stream);
  }
}

void decode_int8_cuda(const Tensor<float>& q, const Int8KvCache& cache, Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  const DeviceInt8KvCacheCopy device_cache(cache);
  decode_on_host_tensors(q, out, "cuda/decode_int8", [&](const float* q_device, float* out_device) {
    decode_int8_device({q_device, device_cache.view(), out_device, s, int(cache.max_length())}, nullptr);
  });
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
