// cuda/decode_fp8 — chapter 04: one decode step over an FP8 E4M3 KV cache (kernels/kv/
// kv_cache.h), dequantized in the kernel. The same bytes as cuda/decode_int8 (1 per cached
// element, plus a scale per row); the difference is the format: 3 mantissa bits and an exponent,
// so each element keeps a relative precision instead of INT8's fixed step.
//
// The kernel is chapter 03's (decode_rows_kernel in cuda_decode.cuh: block per (query head,
// sequence), key groups of G lanes, block reductions, softmax in shared memory) with Fp8Rows
// below: 16 codes per 16-byte load (a uint4; 4 codes per 4-byte load when head_dim is a
// multiple of 4 only, else single bytes), converted to float, and the per-row scales folded out
// of the loops as cuda/decode_int8 does — s_j = Δk_j · (q' · k̂_j), acc += (p_j · Δv_j) · v̂_j.
//
// The conversion. nvcc: cuda_fp8.h's __nv_cvt_fp8x2_to_halfraw2 turns 2 codes into 2 halves —
// one cvt.rn.f16x2.e4m3x2 instruction on sm_89+ (Ada, Hopper; checked in the sm_90 PTX), the
// header's bit manipulation on sm_80 (no FP8 hardware; same values) — then __half22float2. Both
// exact: every E4M3 value is an fp16 value. The emulator (g++): fp8_e4m3_to_float() from
// fp8_e4m3.h, the software twin that the CPU tests check exhaustively against the format's
// definition and against cuda_fp8.h's host conversion. The decode tests compare the kernel with
// the float64 decode of the dequantized cache, so a conversion that differs fails there.
//
// Cost per block: 4·L·d FLOPs; reads L·d bytes of K and of V plus 8 bytes of scales per token.
// Keys j ≥ lengths[b] are never read (their codes and scales are NaN on the host: poisoned).
#include <cstdint>
#include <vector>

#include "kernels/decode/cuda_decode.cuh"
#include "kernels/decode/cuda_decode.h"
#include "kernels/decode/cuda_decode_host.cuh"
#include "kernels/kv/fp8_e4m3.h"
#if !INFERLAB_BACKEND_IS_SIM
#include <cuda_fp8.h>
#endif

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

// Two E4M3 codes (the low byte first) as two floats.
__device__ inline void fp8x2_to_float2(unsigned short pair, float& lo, float& hi) {
#if INFERLAB_BACKEND_IS_SIM
  lo = fp8_e4m3_to_float(static_cast<uint8_t>(pair & 0xffu));
  hi = fp8_e4m3_to_float(static_cast<uint8_t>(pair >> 8));
#else
  const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
  lo = f.x;
  hi = f.y;
#endif
}

}  // namespace

// The row loads of cuda_decode.cuh (RowLoads<uint8_t>) for FP8: W E4M3 codes starting at @p p
// (aligned to W bytes) as floats — one 16-byte load for 16, one 4-byte load for 4, else byte by
// byte.
template <int W>
__device__ void load_row_vector(const uint8_t* p, float (&x)[W]) {
  if constexpr (W == 16 || W == 4) {
    unsigned words[W / 4];
    if constexpr (W == 16) {
      const uint4 bits = *reinterpret_cast<const uint4*>(p);
      words[0] = bits.x, words[1] = bits.y, words[2] = bits.z, words[3] = bits.w;
    } else {
      words[0] = *reinterpret_cast<const unsigned*>(p);
    }
    for (int i = 0; i < W / 4; ++i) {  // each 32-bit word holds four codes, the lowest byte first
      fp8x2_to_float2(static_cast<unsigned short>(words[i] & 0xffffu), x[4 * i], x[4 * i + 1]);
      fp8x2_to_float2(static_cast<unsigned short>(words[i] >> 16), x[4 * i + 2], x[4 * i + 3]);
    }
  } else {
    for (int w = 0; w < W; ++w) {
      float unused;
      fp8x2_to_float2(p[w], x[w], unused);
    }
  }
}

namespace {

// The Rows of decode_rows_kernel for an FP8 cache: E4M3 codes, one fp32 scale per row (at the
// row's index, kv_layout.h).
template <class Layout>
struct Fp8Rows : RowLoads<uint8_t, float, Layout> {
  __device__ float query_factor(int, int, int) const { return 1.0f; }
  __device__ float score(size_t row, float dot) const { return dot * this->cache.k_scales[row]; }  // once per key
  __device__ float value_weight(size_t row, float p) const { return p * this->cache.v_scales[row]; }
};

}  // namespace

void decode_fp8_cuda(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  const DeviceKvCache device_cache(cache);
  const int max_length = int(cache.max_length());
  device_cache.with_rows<uint8_t>(0, [&](const auto& cache_rows) {  // refuses any format but FP8
    using Rows = Fp8Rows<std::decay_t<decltype(cache_rows.layout)>>;
    const Rows rows{{cache_rows}};
    decode_on_host_tensors(q, out, "cuda/decode_fp8", [&](const float* q_device, float* out_device) {
      if (s.head_dim % 16 == 0) {  // 16 codes = one 16-byte load
        launch_decode_rows<Rows, 16>(rows, q_device, out_device, s, max_length, nullptr, "cuda/decode_fp8");
      } else {  // 4-byte loads where the row is a whole number of them, else single bytes
        launch_decode_rows<Rows, 4>(rows, q_device, out_device, s, max_length, nullptr, "cuda/decode_fp8");
      }
    });
  });
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
