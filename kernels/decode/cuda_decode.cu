// cuda/decode — chapter 03: one decode step, one block per (query head, sequence).
// (Version ladder: see cpu_decode.cpp; chapter 05 splits the keys over blocks.)
//
// What it computes (decode.h): out[b][h] = softmax(q[b][h]·K[b][g]ᵀ/√d)·V[b][g] over the
// lengths[b] cached tokens of sequence b, g = h / group_size (GQA); fp32 or fp16 cache, fp32
// arithmetic.
//
// Launch: grid (num_heads, batch), block kDecodeThreads = 128 (4 warps), dynamic shared memory
// (max_length + 4·head_dim) floats: the block's scores, then the warps' partial outputs. The
// kernel is decode_rows_kernel in cuda_decode.cuh, a template over how rows are read, written
// once for this version and chapter 04's cuda/decode_int8 (int8 rows dequantized in the loads).
//
// How the work is laid out. A cached row (one key or value, head_dim elements) is read as
// n = head_dim / W vectors of W elements — W = 4 floats (a float4, 16 bytes) or 8 halves (a
// uint4, 16 bytes) when the row is a whole number of them, else W = 1. A *key group* of G
// lanes (a power of two dividing n) shares one row, each lane holding C = n / G of its vectors,
// so a warp works on 32/G keys at a time and every lane has C independent 16-byte loads in
// flight per key. Decode is bandwidth-bound, and bandwidth needs bytes in flight: G is chosen
// so that C ≥ 4 where n allows (2 KiB per warp per step instead of 512 bytes with C = 1). For
// head_dim 64 / 80 / 96 / 128: fp32 G×C = 4×4, 4×5, 4×6, 8×4; fp16 2×4, 2×5, 2×6, 4×4 — every
// lane busy, no row padding. Odd n (head_dim 36: 9 float4) masks a few vector slots. W = 1 (an
// odd head_dim) is compiled for C = 16 only, G the fewest lanes that reach (cuda_decode.cuh).
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

#include "kernels/decode/cuda_decode.cuh"
#include "kernels/decode/cuda_decode.h"
#include "kernels/decode/cuda_decode_host.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

// The kernel (decode_rows_kernel), the row split and the launch checks are in cuda_decode.cuh,
// shared with chapter 04's cuda/decode_int8; this version reads rows as stored (CachedRows).
template <class T, class Layout>
void decode_device(const DeviceDecode<T, float, Layout>& p, cudaStream_t stream) {
  constexpr int kVectorWidth = sizeof(T) == 4 ? 4 : 8;  // 16-byte loads
  const CachedRows<T, Layout> rows{{p.cache}};
  launch_decode_rows<CachedRows<T, Layout>, kVectorWidth>(rows, p.q, p.out, p.shape, p.max_length, stream,
                                                          "cuda/decode");
}

template void decode_device<float>(const DeviceDecode<float>&, cudaStream_t);
template void decode_device<__half>(const DeviceDecode<__half>&, cudaStream_t);
template void decode_device<float, PagedLayout>(const DeviceDecode<float, float, PagedLayout>&, cudaStream_t);
template void decode_device<__half, PagedLayout>(const DeviceDecode<__half, float, PagedLayout>&, cudaStream_t);

namespace {

template <class T>
void decode_host(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  const DecodeShape shape = decode_shape(q, cache);
  check_decode_output(out, shape);
  const DeviceKvCache device_cache(cache);
  decode_on_host_tensors(q, out, "cuda/decode", [&](const float* q_device, float* out_device) {
    device_cache.with_rows<T>(0, [&](const auto& rows) {
      using Layout = std::decay_t<decltype(rows.layout)>;
      decode_device(DeviceDecode<T, float, Layout>{q_device, rows, out_device, shape, int(cache.max_length())}, nullptr);
    });
  });
}

}  // namespace

void decode_cuda(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  if (cache.dtype() == KvDtype::fp16) {
    decode_host<__half>(q, cache, out);
  } else {
    decode_host<float>(q, cache, out);  // rows<float>() refuses any other format
  }
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
