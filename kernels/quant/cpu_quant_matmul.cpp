// The quantized matmul on the CPU (quant_matmul.h): y = x · Wᵀ over Q8_0, Q4_0 or Q4_1 weights.
//
//   quantize each row of x once (Q8_0, or Q8_1 for Q4_1 weights), OpenMP over the rows
//   outputs in chunks of kChunk, one OpenMP work item each
//     rows in blocks of kRowBlock (their quantized blocks stay in cache while the chunk's weights pass)
//       4-output groups × 4-row tiles (prefill), then 8-output groups × each leftover row (decode)
//         per weight block: unpack the codes once for the tile, integer dot products with each row's
//         block, 8 block sums gathered into one vector (a hadd tree), then acc = fma(d_w·d_x, Σ, acc)
//         for the 8 (row, output) pairs side by side
//
// One output's arithmetic is fixed by quant_matmul.h's contract, so every tile shape and every
// kernel here gives the same bits (scalar == avx2 == vnni, and a row's bits do not depend on the
// batch): the integer sums are exact whatever instruction computes them, and the float operations
// are the same fma chain over the blocks in order — a vector holds 8 (row, output) pairs, never
// parts of one sum.
//
// Versions (medians on this lab's 2-core AVX-512 VM, shared, 2 threads; tests/08-real-model's log
// prints the current GEMV figures):
//   scalar      the reference: one output at a time, integer loops
//   per-pair    (the first SIMD version) one hsum per (row, output, block) and the fma chain in
//               scalar code: Q8_0 576 → 1536 GEMV 48 µs, Q4_1 64 × 576 → 1536 2.9 ms
//   tiles       8 pairs' sums reduced together, the chain vectorized over the pairs:
//               27 µs (1.8×) and 1.4 ms (2.1×), bit-identical to per-pair
//   prefetch    this file: a decode tile asks for the weight rows two tiles ahead (Prefetch):
//               one core read 5.2 GB/s of Q4_1 layers before, 8.3 GB/s after (its plain streaming
//               read: 10.7 GB/s); 257 tokens of SmolLM2 on 1 thread 5.0–5.6 s → 3.5–3.6 s (1.5×,
//               old and new binaries alternated, same tokens)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/ceil_div.h"
#include "common/check.h"
#include "common/half.h"
#include "kernels/primitives/cpu_simd.h"  // <immintrin.h>, with GCC 12's header warnings silenced
#include "kernels/quant/block_quant.h"
#include "kernels/quant/quant_matmul.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define INFERLAB_QUANT_AVX2 1
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define INFERLAB_QUANT_VNNI 1
#endif
#endif

namespace inferlab::quant {
namespace {

constexpr int64_t kChunk = 32;     // outputs per OpenMP work item (a multiple of both tiles' 4 and 8)
constexpr int64_t kRowBlock = 64;  // rows per block: 64 quantized rows of 1536 values = 102 KiB
constexpr int kHalf = int(kBlockValues / 2);

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// How a kernel reads one weight block of each format: its size, its scale (and minimum) as fp16
// bits, code j as an integer (scalar) and the 32 codes as bytes in value order (SIMD: signed int8
// for Q8_0 and Q4_0, unsigned 0–15 for Q4_1).
struct WeightQ8_0 {
  static constexpr int64_t kBytes = 34;
  static constexpr bool kSigned = true, kMin = false;
  static uint16_t d(const uint8_t* b) { return load_u16(b); }
  static uint16_t m(const uint8_t*) { return 0; }
  static int code(const uint8_t* b, int j) { return int8_t(b[2 + j]); }
#if INFERLAB_QUANT_AVX2
  static __m256i codes(const uint8_t* b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
  }
#endif
};

#if INFERLAB_QUANT_AVX2
// The 16 bytes of a Q4 block as 32 codes 0–15 in value order: the low nibbles (values 0–15) in the
// vector's first 16 bytes, the high nibbles (values 16–31) in its last 16.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
  return _mm256_and_si256(both, _mm256_set1_epi8(15));
}
#endif

inline int nibble(const uint8_t* qs, int j) {
  return j < kHalf ? qs[j] & 15 : qs[j - kHalf] >> 4;
}

struct WeightQ4_0 {
  static constexpr int64_t kBytes = 18;
  static constexpr bool kSigned = true, kMin = false;
  static uint16_t d(const uint8_t* b) { return load_u16(b); }
  static uint16_t m(const uint8_t*) { return 0; }
  static int code(const uint8_t* b, int j) { return nibble(b + 2, j) - 8; }
#if INFERLAB_QUANT_AVX2
  static __m256i codes(const uint8_t* b) {
    return _mm256_sub_epi8(nibbles(b + 2), _mm256_set1_epi8(8));
  }
#endif
};

struct WeightQ4_1 {
  static constexpr int64_t kBytes = 20;
  static constexpr bool kSigned = false, kMin = true;
  static uint16_t d(const uint8_t* b) { return load_u16(b); }
  static uint16_t m(const uint8_t* b) { return load_u16(b + 2); }
  static int code(const uint8_t* b, int j) { return nibble(b + 4, j); }
#if INFERLAB_QUANT_AVX2
  static __m256i codes(const uint8_t* b) {
    return nibbles(b + 4);
  }
#endif
};

// s of an activation block: Q8_1 has one; Q8_0 activations meet only weights without a minimum.
inline uint16_t act_s(const BlockQ8_0&) {
  return 0;
}
inline uint16_t act_s(const BlockQ8_1& x) {
  return x.s;
}

// ---- scalar: the contract's arithmetic written plainly, one output at a time ----

template <class W, class X>
float dot_scalar(const uint8_t* w_row, const X* x_row, int64_t blocks) {
  float acc = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* wb = w_row + b * W::kBytes;
    const X& xb = x_row[b];
    // The codes first, into an int8 array: GCC 12.2 at -O3 -march=native (AVX512-VNNI) compiles
    // the fused loop Σ int8_t(uint8 byte)·int8 into vpdpbusd, which takes the bytes as unsigned —
    // wrong sums for every negative Q8_0 code (a 6-line reproducer gave 40656 for −4400). Over two
    // int8 arrays it vectorizes correctly.
    int8_t codes[kBlockValues];
    for (int j = 0; j < kBlockValues; ++j) codes[j] = int8_t(W::code(wb, j));
    int32_t sum = 0;
    for (int j = 0; j < kBlockValues; ++j) sum += int32_t(codes[j]) * int32_t(xb.qs[j]);
    const float dd = half_bits_to_float(W::d(wb)) * half_bits_to_float(xb.d);  // exact: fp16 × fp16
    acc = std::fma(dd, float(sum), acc);
    if constexpr (W::kMin) acc = std::fma(half_bits_to_float(W::m(wb)), half_bits_to_float(act_s(xb)), acc);
  }
  return acc;
}

template <class W, class X>
void run_scalar(const X* act, int64_t rows, const BlockMatrix& w, float* y, bool parallel) {
  const int64_t blocks = w.in / kBlockValues, row_bytes = blocks * W::kBytes, out = w.out;
  const int64_t chunks = ceil_div(out, kChunk);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = c * kChunk; o < std::min(out, (c + 1) * kChunk); ++o)
        y[r * out + o] = dot_scalar<W>(w.bytes.data() + o * row_bytes, act + r * blocks, blocks);
}

#if INFERLAB_QUANT_AVX2

// The int32 lanes of one block's product: lane i holds Σ of the products of bytes 4i … 4i+3.
// Both instructions take one unsigned operand, so signed weights use the sign trick (|w| as u8
// times x with w's sign): |w| ≤ 128 and |x| ≤ 127, so maddubs' int16 pairs (≤ 32512) never saturate.
struct DotAvx2 {
  template <bool kSigned>
  static __m256i dot(__m256i w, __m256i x) {
    const __m256i ones = _mm256_set1_epi16(1);
    if constexpr (kSigned)
      return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)), ones);
    else
      return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones);
  }
};

#if INFERLAB_QUANT_VNNI
inline __m256i dpbusd(__m256i u8, __m256i s8) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u8, s8);
#else
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u8, s8);
#endif
}
struct DotVnni {
  template <bool kSigned>
  static __m256i dot(__m256i w, __m256i x) {
    if constexpr (kSigned)
      return dpbusd(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    else
      return dpbusd(w, x);
  }
};
#endif

// Lane k = the sum of the 8 lanes of p[k]: two rounds of hadd within each 128-bit half, then the
// halves added across.
inline __m256i reduce8(const __m256i p[8]) {
  const __m256i ab = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i cd = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

// The outputs' factor of a vector of pairs, from @p kCount fp16 values at @p h: the 8 of them (one
// row × 8 outputs), or the 4 twice (two rows × 4 outputs).
template <int kCount>
inline __m256 output_factor(const uint16_t* h) {
  if constexpr (kCount == 8) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
  } else {
    const __m128 four = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(h)));
    return _mm256_set_m128(four, four);
  }
}

// The rows' factor: with 8 outputs a vector is one row (its value broadcast), with 4 it is two rows
// (each over its half).
template <int O>
inline __m256 row_factor(uint16_t first, uint16_t second) {
  if constexpr (O == 8) return _mm256_set1_ps(_cvtsh_ss(first));
  return _mm256_set_m128(_mm_set1_ps(_cvtsh_ss(second)), _mm_set1_ps(_cvtsh_ss(first)));
}

// out[r·O + o] = row r of x · row o of W for an R × O tile: @p w_rows the O weight rows, @p x_rows
// the R quantized activation rows. Lane k of vector g is the pair (g·8/O + k / O, k % O).
// The bytes a tile asks the memory system for ahead of time: the next tile's weight rows. A tile's
// 8 rows are 8 short streams (a row of 576 Q4_1 values is 360 bytes: 6 cache lines), too short for
// the hardware prefetchers to lock onto; spread over the block loop, these requests hide the
// memory's latency. They go to L2 (_MM_HINT_T1): into L1 they held the line-fill buffers that the
// tile's own loads wait for (T0 was 15% slower).
struct Prefetch {
  const uint8_t* begin = nullptr;  ///< the first byte to fetch
  int64_t lines = 0;               ///< 64-byte lines from there
};

template <class W, class X, class Dot, int R, int O>
void tile_simd(const uint8_t* const* w_rows, const X* const* x_rows, int64_t blocks, float* out,
               Prefetch ahead = {}) {
  static_assert(O == 4 || O == 8, "a vector holds 8 pairs: 1 row × 8 outputs or 2 rows × 4");
  constexpr int kRowsPerVec = 8 / O, kVecs = R / kRowsPerVec;
  static_assert(R % kRowsPerVec == 0, "whole vectors of pairs");
  __m256 acc[kVecs];
  for (int g = 0; g < kVecs; ++g) acc[g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t line = b * ahead.lines / blocks; line < (b + 1) * ahead.lines / blocks; ++line)
      _mm_prefetch(reinterpret_cast<const char*>(ahead.begin + line * 64), _MM_HINT_T1);
    __m256i wq[O];
    alignas(16) uint16_t wd[8] = {}, wm[8] = {};
    for (int o = 0; o < O; ++o) {
      const uint8_t* wb = w_rows[o] + b * W::kBytes;
      wq[o] = W::codes(wb);
      wd[o] = W::d(wb);
      if constexpr (W::kMin) wm[o] = W::m(wb);
    }
    const __m256 dw = output_factor<O>(wd);
    for (int g = 0; g < kVecs; ++g) {
      __m256i sums[8];
      for (int rr = 0; rr < kRowsPerVec; ++rr) {
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x_rows[g * kRowsPerVec + rr][b].qs));
        for (int o = 0; o < O; ++o) sums[rr * O + o] = Dot::template dot<W::kSigned>(wq[o], xq);
      }
      const X& x0 = x_rows[g * kRowsPerVec][b];
      const X& x1 = x_rows[g * kRowsPerVec + kRowsPerVec - 1][b];
      const __m256 dd = _mm256_mul_ps(dw, row_factor<O>(x0.d, x1.d));  // exact: fp16 × fp16
      acc[g] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(reduce8(sums)), acc[g]);
      if constexpr (W::kMin)
        acc[g] = _mm256_fmadd_ps(output_factor<O>(wm), row_factor<O>(act_s(x0), act_s(x1)), acc[g]);
    }
  }
  for (int g = 0; g < kVecs; ++g) _mm256_storeu_ps(out + g * 8, acc[g]);
}

template <class W, class X, class Dot>
void run_simd(const X* act, int64_t rows, const BlockMatrix& w, float* y, bool parallel) {
  const int64_t blocks = w.in / kBlockValues, row_bytes = blocks * W::kBytes, out = w.out;
  const int64_t chunks = ceil_div(out, kChunk);
  const uint8_t* base = w.bytes.data();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t o_begin = c * kChunk, o_end = std::min(out, o_begin + kChunk);
    // Weight rows o … o + n − 1; past the chunk's end its last row again (computed, never stored).
    auto weight_rows = [&](int64_t o, int n, const uint8_t** rows_out) {
      for (int k = 0; k < n; ++k) rows_out[k] = base + std::min(o + k, o_end - 1) * row_bytes;
    };
    for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
      const int64_t r_end = std::min(rows, r0 + kRowBlock), r_tiles_end = r0 + (r_end - r0) / 4 * 4;
      // Prefill: 4 rows × 4 outputs, each weight block unpacked once for the 4 rows.
      for (int64_t o = o_begin; o < o_end; o += 4) {
        const uint8_t* wr[4];
        weight_rows(o, 4, wr);
        const int64_t n = std::min<int64_t>(4, o_end - o);
        for (int64_t r = r0; r < r_tiles_end; r += 4) {
          const X* xr[4] = {act + r * blocks, act + (r + 1) * blocks, act + (r + 2) * blocks, act + (r + 3) * blocks};
          float t[16];
          tile_simd<W, X, Dot, 4, 4>(wr, xr, blocks, t);
          for (int k = 0; k < 4; ++k) std::copy_n(t + k * 4, n, y + (r + k) * out + o);
        }
      }
      // Decode, and a block's leftover rows: 1 row × 8 outputs.
      for (int64_t r = r_tiles_end; r < r_end; ++r)
        for (int64_t o = o_begin; o < o_end; o += 8) {
          const uint8_t* wr[8];
          weight_rows(o, 8, wr);
          const X* xr[1] = {act + r * blocks};
          // The 8 rows two tiles ahead (in the next chunk near this chunk's end), within the matrix:
          // one tile ahead left the first loads of each tile waiting; four was no better than two.
          const int64_t next = std::min(o + 16, out), next_end = std::min(o + 24, out);
          const Prefetch ahead{base + next * row_bytes, ((next_end - next) * row_bytes + 63) / 64};
          float t[8];
          tile_simd<W, X, Dot, 1, 8>(wr, xr, blocks, t, ahead);
          std::copy_n(t, std::min<int64_t>(8, o_end - o), y + r * out + o);
        }
    }
  }
}

#endif  // INFERLAB_QUANT_AVX2

void quantize_into(std::span<const float> x, std::span<BlockQ8_0> y) {
  quantize_row_q8_0(x, y);
}
void quantize_into(std::span<const float> x, std::span<BlockQ8_1> y) {
  quantize_row_q8_1(x, y);
}

template <class W, class X>
void run(const Tensor<float>& x, const BlockMatrix& w, Tensor<float>& y, QuantKernel kernel) {
  const int64_t rows = x.dim(0), in = w.in, blocks = in / kBlockValues;
  // Each activation row quantized once per call, into a buffer kept between calls (no allocation
  // per decode step). Its pointer is taken here: inside the parallel regions `act` would name each
  // worker thread's own (empty) buffer.
  thread_local std::vector<X> act;
  act.resize(size_t(rows * blocks));
  X* const a = act.data();
#pragma omp parallel for schedule(static) if (rows * in >= (int64_t{1} << 16))
  for (int64_t r = 0; r < rows; ++r)
    quantize_into(std::span(x.data() + r * in, size_t(in)), std::span(a + r * blocks, size_t(blocks)));
  // Threads only when there is work for them (as linear_cpu): waking them costs microseconds.
  const bool parallel = rows * w.out * in >= (int64_t{1} << 18);
  switch (kernel) {
#if INFERLAB_QUANT_AVX2
    case QuantKernel::avx2:
      return run_simd<W, X, DotAvx2>(a, rows, w, y.data(), parallel);
#if INFERLAB_QUANT_VNNI
    case QuantKernel::vnni:
      return run_simd<W, X, DotVnni>(a, rows, w, y.data(), parallel);
#endif
#endif
    default:
      return run_scalar<W, X>(a, rows, w, y.data(), parallel);
  }
}

}  // namespace

std::string_view to_string(QuantKernel kernel) {
  switch (kernel) {
    case QuantKernel::scalar:
      return "scalar";
    case QuantKernel::avx2:
      return "avx2";
    case QuantKernel::vnni:
      return "vnni";
  }
  return "?";
}

bool is_available(QuantKernel kernel) {
  switch (kernel) {
    case QuantKernel::scalar:
      return true;
    case QuantKernel::avx2:
#if INFERLAB_QUANT_AVX2
      return true;
#else
      return false;
#endif
    case QuantKernel::vnni:
#if INFERLAB_QUANT_VNNI
      return true;
#else
      return false;
#endif
  }
  return false;
}

QuantKernel best_quant_kernel() {
  if (is_available(QuantKernel::vnni)) return QuantKernel::vnni;
  if (is_available(QuantKernel::avx2)) return QuantKernel::avx2;
  return QuantKernel::scalar;
}

std::vector<QuantKernel> available_quant_kernels() {
  std::vector<QuantKernel> kernels;
  for (const QuantKernel k : {QuantKernel::scalar, QuantKernel::avx2, QuantKernel::vnni})
    if (is_available(k)) kernels.push_back(k);
  return kernels;
}

void quant_matmul_cpu(const Tensor<float>& x, const BlockMatrix& w, Tensor<float>& y, QuantKernel kernel) {
  require(w.type == GgmlType::q8_0 || w.type == GgmlType::q4_0 || w.type == GgmlType::q4_1, "w.type", to_string(w.type),
          "must be Q8_0, Q4_0 or Q4_1 (the weight formats with a quantized matmul)");
  require(w.in > 0 && w.in % kBlockValues == 0, "w.in", w.in, "must be a positive multiple of 32 (whole blocks)");
  require(w.out >= 0, "w.out", w.out, "must be >= 0");
  const int64_t want = w.out * row_bytes(w.type, w.in);
  require(int64_t(w.bytes.size()) == want, "w.bytes.size()", w.bytes.size(),
          "must be out · row_bytes(" + std::string(to_string(w.type)) + ", in) = " + std::to_string(want));
  check_rank(x, 2, "x");
  require(x.dim(1) == w.in, "x.shape[1]", x.dim(1),
          "must equal the weights' input size w.in = " + std::to_string(w.in));
  check_shape(y, {x.dim(0), w.out}, "y");
  require(is_available(kernel), "kernel", to_string(kernel), "is not available in this build (see is_available())");
  if (x.dim(0) == 0 || w.out == 0) return;
  switch (w.type) {
    case GgmlType::q8_0:
      return run<WeightQ8_0, BlockQ8_0>(x, w, y, kernel);
    case GgmlType::q4_0:
      return run<WeightQ4_0, BlockQ8_0>(x, w, y, kernel);
    default:
      return run<WeightQ4_1, BlockQ8_1>(x, w, y, kernel);
  }
}

Cost quant_matmul_cost(int64_t rows, GgmlType type, int64_t out, int64_t in) {
  return {2.0 * double(rows) * double(out) * double(in),
          double(out) * double(row_bytes(type, in)) + 4.0 * (double(rows) * double(in) + double(rows) * double(out))};
}

}  // namespace inferlab::quant
