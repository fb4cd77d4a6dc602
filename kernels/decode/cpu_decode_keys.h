#pragma once
// The 4-keys-at-a-time SIMD steps shared by the CPU decode kernels (cpu/decode_simd for fp32
// and fp16 caches, cpu/decode_int8_simd for the INT8 cache): loading kLanes cached elements as
// floats, prefetching the next rows, the K pass (4 dot products, 4 independent FMA chains, one
// shared horizontal reduction) and the V pass (4 p·v products per accumulator load/store) —
// and attend_keys(), the whole two-pass work of a GQA group over a range of keys, which
// cpu/decode_simd and cpu/decode_int8_simd run over all keys (decode_groups()), chapter 05's
// cpu/decode_split over one split and chapter 06's cpu/prefill_with_cache over each piece of a
// chunk's keys. A quantized cache's scales enter through a Scales policy (Unscaled for fp32 and
// fp16; QuantizedScales, below, for INT8 and FP8 E4M3). See cpu_decode_simd.cpp for why each
// step is shaped this way and what it measured.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/half.h"
#include "common/tensor.h"
#include "kernels/primitives/cpu_simd.h"
#include "kernels/decode/decode.h"
#include "kernels/kv/fp8_e4m3.h"
#include "kernels/kv/kv_layout.h"

namespace inferlab::decode_keys {

using simd::kLanes;
using simd::Vec;

constexpr int64_t kKeys = 4;  // keys per step of both passes (independent chains)

// kLanes cached elements at @p p as floats: a plain load, or one conversion of 16 (AVX-512)
// or 8 (F16C) halves — 32 or 16 bytes of cache become one float vector.
inline Vec load_floats(const float* p) { return simd::load(p); }
inline Vec load_floats(const uint16_t* p) {
#if defined(__AVX512F__)
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
  float f[kLanes];
  for (int i = 0; i < kLanes; ++i) f[i] = half_bits_to_float(p[i]);
  return simd::load(f);
#endif
}

// kLanes int8 at @p p widened to floats.
inline Vec load_floats(const int8_t* p) {
#if defined(__AVX512F__)
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#elif defined(__AVX2__) && defined(__FMA__)
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#else
  float f[kLanes];
  for (int i = 0; i < kLanes; ++i) f[i] = float(p[i]);
  return simd::load(f);
#endif
}

// The value of every FP8 E4M3 code (fp8_e4m3_to_float(), NaN for the NaN codes): the 1 KiB
// table the CPU decodes FP8 rows with, one gather per vector. A table rather than bit tricks: the
// subnormal codes would go through float subnormals (flushed to 0 under DAZ) and the NaN codes
// need a blend; looked up, every code is its value exactly, whatever the FP environment.
inline const std::array<float, 256> kFp8E4M3Values = [] {
  std::array<float, 256> values{};
  for (int code = 0; code < 256; ++code) values[size_t(code)] = fp8_e4m3_to_float(uint8_t(code));
  return values;
}();

// kLanes FP8 E4M3 codes at @p p (uint8_t: how KvRows holds FP8) decoded to floats: the codes
// widened to 32-bit indices, then one gather from kFp8E4M3Values.
inline Vec load_floats(const uint8_t* p) {
#if defined(__AVX512F__)
  return _mm512_i32gather_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
                             kFp8E4M3Values.data(), 4);
#elif defined(__AVX2__) && defined(__FMA__)
  return _mm256_i32gather_ps(kFp8E4M3Values.data(),
                             _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), 4);
#else
  float f[kLanes];
  for (int i = 0; i < kLanes; ++i) f[i] = kFp8E4M3Values[p[i]];
  return simd::load(f);
#endif
}

// One cached element as a float (the scalar tail of a row that is not whole vectors).
inline float element_to_float(float x) {
  return x;
}
inline float element_to_float(uint16_t bits) {
  return half_bits_to_float(bits);
}
inline float element_to_float(int8_t x) {
  return float(x);
}
inline float element_to_float(uint8_t fp8_code) {
  return kFp8E4M3Values[fp8_code];
}

// Asks for the lines of @p bytes bytes at @p p (contiguous rows) to be brought into the caches.
// On x86-64 each request is an asm volatile prefetcht0, which the optimiser must keep: g++ 12
// silently deleted a loop of __builtin_prefetch calls once it was inlined through an
// always_inline caller (the INT8 passes lost every prefetch and slowed down markedly; checked
// with objdump).
inline void prefetch(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
#pragma GCC unroll 8
  for (int64_t i = 0; i < bytes; i += 64) {
#if defined(__x86_64__)
    asm volatile("prefetcht0 %0" : : "m"(c[i]));
#else
    __builtin_prefetch(c + i, 0, 3);
#endif
  }
}

// The four horizontal sums of a0 … a3 at once, into out[0 … 3]: add the halves of all four
// registers together and finish with two rounds of pairwise adds (hadd) that mix the four, so
// the 4 keys share one short reduction instead of paying four.
inline void reduce_add4(Vec a0, Vec a1, Vec a2, Vec a3, float* out) {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#if defined(__AVX512F__)
  // 16 → 8 lanes: low half + high half (shuffle_f32x4 moves the upper 256 bits down).
  const auto half = [](__m512 x) {
    return _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_castps512_ps256(_mm512_shuffle_f32x4(x, x, 0xEE)));
  };
  const __m256 b0 = half(a0), b1 = half(a1), b2 = half(a2), b3 = half(a3);
#else
  const __m256 b0 = a0, b1 = a1, b2 = a2, b3 = a3;
#endif
  // hadd(b0, b1) = [b0 pairs, b1 pairs] per 128-bit half; a second hadd gives each 128-bit half
  // the partial sums (s0, s1, s2, s3); the two halves added make the four sums.
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(b0, b1), _mm256_hadd_ps(b2, b3));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
#else
  out[0] = simd::reduce_add(a0);
  out[1] = simd::reduce_add(a1);
  out[2] = simd::reduce_add(a2);
  out[3] = simd::reduce_add(a3);
#endif
}

// Pass 1 for kKeys keys: scores[i] = q · row_i for i < kKeys, over d_pad elements (whole
// vectors). Four accumulators, one per key: four independent FMA chains instead of one.
// d_pad (here and in accumulate_keys) is an int64_t or a compile-time std::integral_constant
// (attend_keys' common head dims), with which the compiler unrolls the whole row. Both are
// always inlined: called out of line (g++ chose to), the call per 4 keys cost the int8 K pass a
// large share of its speed.
template <class T, class Dim>
[[gnu::always_inline]] inline void dot_keys(const float* q, const T* const row[kKeys], Dim d_pad, float* scores) {
  Vec acc0 = simd::broadcast(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (int64_t c = 0; c < d_pad; c += kLanes) {
    const Vec qc = simd::load(q + c);
    acc0 = simd::fma(qc, load_floats(row[0] + c), acc0);
    acc1 = simd::fma(qc, load_floats(row[1] + c), acc1);
    acc2 = simd::fma(qc, load_floats(row[2] + c), acc2);
    acc3 = simd::fma(qc, load_floats(row[3] + c), acc3);
  }
  reduce_add4(acc0, acc1, acc2, acc3, scores);
}

// Pass 2 for kKeys rows: a[c] += Σ_i p[i] · row_i[c] over d_pad elements (whole vectors), one
// load and store of each accumulator vector per kKeys rows.
template <class T, class Dim>
[[gnu::always_inline]] inline void accumulate_keys(const float p[kKeys], const T* const row[kKeys], Dim d_pad, float* a) {
  const Vec p0 = simd::broadcast(p[0]), p1 = simd::broadcast(p[1]), p2 = simd::broadcast(p[2]),
            p3 = simd::broadcast(p[3]);
  for (int64_t c = 0; c < d_pad; c += kLanes) {
    Vec x = simd::load(a + c);
    x = simd::fma(p0, load_floats(row[0] + c), x);
    x = simd::fma(p1, load_floats(row[1] + c), x);
    x = simd::fma(p2, load_floats(row[2] + c), x);
    x = simd::fma(p3, load_floats(row[3] + c), x);
    simd::store(a + c, x);
  }
}

// How far ahead the passes prefetch, in keys, for rows of T. fp32/fp16: the next block (1 KiB
// of fp16 rows, 2 KiB of fp32); prefetching further ahead was slower (the early lines probably
// crowd L1 and compete with the hardware prefetcher, already streaming into L2). int8: 16 rows,
// 2 KiB at head_dim 128 — the bytes the fp32 rows are prefetched ahead; nearer and farther
// distances, and other hints (t1, t2, nta), were slower. Chapter 04's lesson (§4) has the
// side-by-side figures. FP8 rows (one byte too) take int8's distance, not measured apart.
template <class T>
constexpr int64_t kPrefetchKeys = sizeof(T) == 1 ? 4 * kKeys : kKeys;

// How far ahead, in bytes of rows, attend_keys() asks for the next runs (a paged cache's next
// blocks, which the hardware prefetcher cannot find): 8 KiB — 2 blocks of 16 fp16 rows, 4 of 16
// INT8 rows at head_dim 128.
constexpr int64_t kRunPrefetchBytes = 8192;

// Copies cached row @p src (d elements) to @p dst as floats, zero-padded to d_pad (a multiple
// of kLanes), for rows that are not whole vectors (odd head_dim) or are reused by a GQA group.
template <class T>
void row_to_floats(const T* src, int64_t d, int64_t d_pad, float* dst) {
  int64_t c = 0;
  for (; c + kLanes <= d; c += kLanes) simd::store(dst + c, load_floats(src + c));
  for (; c < d; ++c) dst[c] = element_to_float(src[c]);
  std::fill(dst + d, dst + d_pad, 0.0f);
}

// The kKeys rows j … j+kKeys−1 of the rows at @p X (@p row_len elements apart), each clamped to
// at most @p last when kClamp (the partial last step repeats the last row; its results are
// dropped): pointers into the cache (kInPlace: whole vectors, row_len = d_pad) or to the rows
// converted into the float @p tile (rows d_pad apart).
template <bool kInPlace, bool kClamp, class T, class Dim>
[[gnu::always_inline]] inline auto step_rows(const T* X, Dim row_len, int64_t j, int64_t last, int64_t d_pad,
                                             float* tile) {
  std::array<std::conditional_t<kInPlace, const T*, const float*>, kKeys> rows;
  for (int64_t i = 0; i < kKeys; ++i) {
    const T* src = X + (kClamp ? std::min(j + i, last) : j + i) * row_len;
    if constexpr (kInPlace) {
      rows[size_t(i)] = src;
    } else {
      row_to_floats(src, int64_t(row_len), d_pad, tile + i * d_pad);
      rows[size_t(i)] = tile + i * d_pad;
    }
  }
  return rows;
}

// The two streaming loops below are kept lean on purpose: an INT8 row is 128 bytes of cache but
// 24 vector instructions, so at the INT8 rate every extra instruction per step shrinks how far
// ahead of its loads the core runs. Each of these cost measurably when timed side by side (the
// figures are in chapter 04's lesson, §4): a run-time prefetch distance, a run-time group size,
// a run-time row length, the prefetch branch laid out after the loop body instead of before it
// (which g++ 12 picks unless told the branch is usually taken), a call to dot_keys() instead of
// inlining it, clamping every row index of every step. So whole steps are not clamped; the last,
// partial step is.

// Pass 1 over keys [begin, end) of the rows at @p K (@p row_len elements apart; in place or
// through @p tile as for step_rows): scores[r·stride + j − begin] = q_r · k_j for the @p group
// queries at @p q (rows @p dim = d_pad floats apart), kKeys keys per step, prefetching kAhead
// keys ahead. Row length, dim and group are int64_t or compile-time std::integral_constant
// (attend_keys dispatches the common cases).
template <bool kInPlace, int64_t kAhead, class T, class Dim, class Group>
[[gnu::always_inline]] inline void stream_keys(const T* K, Dim row_len, int64_t begin, int64_t end, const float* q,
                                               Group group, Dim dim, float* tile, float* scores, int64_t stride) {
  const int64_t whole_end = begin + (end - begin) / kKeys * kKeys;
  for (int64_t j = begin; j < whole_end; j += kKeys) {
    const T* row = K + j * row_len;
    if (__builtin_expect(j + kAhead + kKeys <= end, 1))
      prefetch(row + kAhead * row_len, kKeys * row_len * int64_t(sizeof(T)));
    const auto rows = step_rows<kInPlace, false>(K, row_len, j, end - 1, dim, tile);
    for (int64_t r = 0; r < group; ++r) dot_keys(q + r * dim, rows.data(), dim, scores + r * stride + (j - begin));
  }
  if (whole_end < end) {
    const auto rows = step_rows<kInPlace, true>(K, row_len, whole_end, end - 1, dim, tile);
    for (int64_t r = 0; r < group; ++r) {
      float block[kKeys];
      dot_keys(q + r * dim, rows.data(), dim, block);
      for (int64_t i = 0; i < end - whole_end; ++i) scores[r * stride + (whole_end - begin) + i] = block[i];
    }
  }
}

// Pass 2 over rows [begin, end) of the rows at @p V (as stream_keys): acc[r·dim + c] +=
// Σ_j p[r·stride + j − begin] · v_j[c], kKeys rows per step (one load and store of each
// accumulator vector per step), prefetching kAhead rows ahead; the last, partial step weighs
// its repeated rows 0.
template <bool kInPlace, int64_t kAhead, class T, class Dim, class Group>
[[gnu::always_inline]] inline void stream_values(const T* V, Dim row_len, int64_t begin, int64_t end, const float* p,
                                                 Group group, Dim dim, float* tile, int64_t stride, float* acc) {
  const int64_t whole_end = begin + (end - begin) / kKeys * kKeys;
  for (int64_t j = begin; j < whole_end; j += kKeys) {
    const T* row = V + j * row_len;
    if (__builtin_expect(j + kAhead + kKeys <= end, 1))
      prefetch(row + kAhead * row_len, kKeys * row_len * int64_t(sizeof(T)));
    const auto rows = step_rows<kInPlace, false>(V, row_len, j, end - 1, dim, tile);
    for (int64_t r = 0; r < group; ++r) accumulate_keys(p + r * stride + (j - begin), rows.data(), dim, acc + r * dim);
  }
  if (whole_end < end) {
    const auto rows = step_rows<kInPlace, true>(V, row_len, whole_end, end - 1, dim, tile);
    for (int64_t r = 0; r < group; ++r) {
      float block[kKeys] = {};
      for (int64_t i = 0; i < end - whole_end; ++i) block[i] = p[r * stride + (whole_end - begin) + i];
      accumulate_keys(block, rows.data(), dim, acc + r * dim);
    }
  }
}

/// One thread's scratch for attend_keys().
struct GroupScratch {
  /// Room for a group of @p group queries, head_dim padded to @p d_pad, over at most
  /// @p max_keys keys.
  GroupScratch(int64_t group, int64_t d_pad, int64_t max_keys)
      : score_stride(simd::round_up(max_keys, kLanes)),
        q_group(group * d_pad),
        scores(group * score_stride),
        tile(kKeys * d_pad) {}
  int64_t score_stride;         ///< floats per score row: room for softmax_numerator's whole vectors
  simd::AlignedFloats q_group;  ///< the group's queries, scaled by 1/√d, padded
  simd::AlignedFloats scores;   ///< scores, then softmax numerators
  simd::AlignedFloats tile;     ///< kKeys rows as floats (when not read in place)
};

/// How attend_keys() folds a quantized cache's scales out of its inner loops (the hooks of
/// cuda_decode.cuh's Rows, on the CPU). Rows are named by their index in the layer (the
/// layout's row(), which is also the index of a per-token scale). Unscaled, for fp32 and fp16
/// caches, changes nothing; INT8 and FP8 caches pass their QuantizedScales (below). The score
/// and probability hooks work on whole runs of a pass (vectorised), never one key at a time
/// inside the streaming loops.
struct Unscaled {
  /// The factor of query element c (per-channel K scales fold in here): 1.
  float query_factor(int64_t) const { return 1.0f; }
  /// Scales the scores s[0 … n) of the keys in rows row0 … row0+n−1 from their dot products
  /// (per-token K scales): as they are.
  void scale_scores(int64_t, float*, int64_t) const {}
  /// Turns the probabilities p[0 … n) of value rows row0 … row0+n−1 into their weights (V
  /// scales): as they are.
  void weight_probabilities(int64_t, float*, int64_t) const {}
};

// A stored scale as a float: fp32 as is, fp16 bits converted (F16C where available).
inline float scale_at(const float* scales, int64_t i) {
  return scales[i];
}
inline float scale_at(const uint16_t* scales, int64_t i) {
#if defined(__F16C__)
  return _cvtsh_ss(scales[i]);
#else
  return half_bits_to_float(scales[i]);
#endif
}

// x[i] *= scales[i] for i < n: kLanes at a time (fp16 scales converted 16 or 8 per instruction
// by load_floats), the tail one by one — the same single product per element either way, so
// where a run starts or ends changes no bit.
template <class S>
void multiply_by_scales(float* x, const S* scales, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::store(x + i, simd::mul(simd::load(x + i), load_floats(scales + i)));
  for (; i < n; ++i) x[i] *= scale_at(scales, i);
}

/// The scales of one (sequence, KV head) of an INT8 or FP8 E4M3 cache, stored as S (float, or
/// fp16 bits for INT8 with fp16 scales), as attend_keys() folds them — a key's score and a
/// value's weight are its code's, times its scale:
///   per-token K (INT8 per_token, FP8): s_j = k_scale_j · (q · k̂_j), one multiply per score over
///                 the run of scores after the K pass (scale_scores);
///   per-channel K (INT8 per_channel): q'_c = q_c · k_scale_c, folded into the query once
///                 (query_factor);
///   V:            acc += (p_j · v_scale_j) · v̂_j, folded into the probabilities after their sum
///                 is taken, before the V pass (weight_probabilities).
/// Per-token scales are indexed by row (kv_layout.h), per-channel ones by channel.
template <class S>
struct QuantizedScales {
  const S* k_scales = nullptr;    ///< K's scales of the layer (per token, by row)
  const S* k_channels = nullptr;  ///< K's per-channel scales of this (sequence, KV head), or null
  const S* v_scales = nullptr;    ///< V's scales of the layer, by row
  /// The per-channel K scale of channel @p c (1 for per-token K scales).
  float query_factor(int64_t c) const { return k_channels ? scale_at(k_channels, c) : 1.0f; }
  /// Scores s[0 … n) of rows row0 … times their per-token K scales (per-channel: unchanged).
  void scale_scores(int64_t row0, float* s, int64_t n) const {
    if (!k_channels) multiply_by_scales(s, k_scales + row0, n);
  }
  /// Probabilities p[0 … n) of rows row0 … times their V scales.
  void weight_probabilities(int64_t row0, float* p, int64_t n) const { multiply_by_scales(p, v_scales + row0, n); }
};

/// The QuantizedScales of (sequence @p b, KV head @p g) in @p rows (an INT8 or FP8 layer).
template <class T, class S, class Layout>
QuantizedScales<S> quantized_scales(const KvRows<T, S, Layout>& rows, int64_t b, int64_t g) {
  const S* channels = rows.per_channel ? rows.k_scales + rows.layout.head(b, g) * rows.head_dim : nullptr;
  return {rows.k_scales, channels, rows.v_scales};
}

// The decode work of one (sequence b, KV head g) — or of one split of its keys (chapter 05's
// split-KV decode): the @p group query rows at @p q_rows (consecutive rows of d floats) attend
// keys [begin, end) of (b, g) in @p rows (end > begin), read where the layout puts them: run
// by run (kv_layout.h — one run for the contiguous layout, one per block for a paged one).
// Writes, per query row r, the unnormalised output acc[r·d_pad + c] = Σ_j exp(s_j − m_r)·v_j[c]
// (c < d_pad, padding 0), the max m_r = max[r] of its scores s_j = q·k_j/√d and the sum
// sum[r] = Σ_j exp(s_j − m_r): out = acc / sum for the whole range, or a partial result that
// the split-KV reduce rescales by exp(m_r − m). Reads each K and V row once for the whole group
// (two streaming passes, kKeys rows per step, prefetching the next step's rows). @p scales folds
// a quantized cache's scales into the query, the scores and the probabilities (Unscaled: none).
template <class T, class S, class Layout, class Scales = Unscaled>
void attend_keys(const float* q_rows, int64_t group, const KvRows<T, S, Layout>& rows, int64_t b, int64_t g,
                 int64_t begin, int64_t end, GroupScratch& scratch, float* acc, float* max, float* sum,
                 const Scales& scales = {}) {
  const int64_t d = rows.head_dim;
  const int64_t d_pad = simd::round_up(d, kLanes), n_keys = end - begin;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Rows are read in place when they are whole vectors — fp16 and FP8 rows only when each
  // serves one query row (MHA decode): several rows (a GQA group, a prefill tile) convert an fp16
  // or FP8 row once into a float tile and reuse it (an FP8 vector costs a gather). fp32 and int8
  // rows are always read in place. Either way a row's elements become the same floats.
  constexpr bool kConvertOnce = std::is_same_v<T, uint16_t> || std::is_same_v<T, uint8_t>;
  const bool in_place = d == d_pad && (!kConvertOnce || group == 1);
  constexpr int64_t ahead = kPrefetchKeys<T>;
  float* scores = scratch.scores.data();
  const int64_t stride = scratch.score_stride;

  for (int64_t r = 0; r < group; ++r) {
    float* dst = scratch.q_group.data() + r * d_pad;
    for (int64_t c = 0; c < d; ++c) dst[c] = q_rows[r * d + c] * scale * scales.query_factor(c);
    std::fill(dst + d, dst + d_pad, 0.0f);
  }

  // Calls @p pass(first row, tokens, offset of the first token from begin) for each run of
  // consecutive rows that keys [begin, end) occupy. The streaming loops prefetch only inside a
  // run, and the hardware prefetcher follows a stream, not a jump: a paged layout's next runs
  // (blocks) are elsewhere in memory. So before each run, the runs that start within
  // kRunPrefetchBytes of rows after it are asked for, each block once (a sliding window over
  // @p rows_of, K or V). The contiguous layout, one run, never gets there.
  const auto for_each_run = [&](const T* rows_of, const auto& pass) {
    constexpr int64_t kRowBytes = int64_t(sizeof(T));
    const int64_t window = std::max<int64_t>(1, kRunPrefetchBytes / (d * kRowBytes));  // tokens
    int64_t asked = begin;  // tokens below this were asked for (or are the first run)
    for (int64_t j = begin; j < end;) {
      const KvRun run = rows.layout.run(b, g, j);
      const int64_t n = std::min(run.length, end - j);
      if (asked < j + n) asked = j + n;
      while (asked < end && asked < j + n + window) {
        const KvRun next = rows.layout.run(b, g, asked);
        const int64_t m = std::min({next.length, end - asked, j + n + window - asked});
        prefetch(rows_of + next.row * d, m * d * kRowBytes);
        asked += m;
      }
      pass(run.row, n, j - begin);
      j += n;
    }
  };

  // Runs both passes with the row source, row length and group size that fit: in place with
  // the length as a compile-time constant for head dims 64 and 128 (the whole row and its
  // prefetch unroll), in place with a run-time length for other whole-vector rows, through the
  // float tile otherwise; a compile-time group of 1 for MHA. See stream_keys() for what each
  // measured.
  const auto passes = [&](auto in_place_tag, auto dim, auto group_size) {
    constexpr bool kInPlace = decltype(in_place_tag)::value;
    using Dim = decltype(dim);
    const Dim row_len = [&] {  // elements per cached row: d (= d_pad when read in place)
      if constexpr (kInPlace) {
        return dim;
      } else {
        return d;
      }
    }();
    float* tile = scratch.tile.data();
    // Pass 1, run by run: dot products, then the scores from them (per-token K scales).
    for_each_run(rows.k, [&](int64_t row, int64_t n, int64_t at) {
      stream_keys<kInPlace, ahead>(rows.k + row * d, row_len, 0, n, scratch.q_group.data(), group_size, dim, tile,
                                   scores + at, stride);
      for (int64_t r = 0; r < group; ++r) scales.scale_scores(row, scores + r * stride + at, n);
    });

    // Softmax numerators (exp(s − max), vectorised; the max and the sum are kept per head).
    for (int64_t r = 0; r < group; ++r)
      sum[r] = simd::softmax_numerator(scores + r * stride, n_keys, n_keys, -std::numeric_limits<float>::infinity(),
                                       &max[r]);

    // Pass 2, run by run: the V rows' weights (V scales), then Σ p·v.
    std::fill(acc, acc + group * d_pad, 0.0f);
    for_each_run(rows.v, [&](int64_t row, int64_t n, int64_t at) {
      for (int64_t r = 0; r < group; ++r) scales.weight_probabilities(row, scores + r * stride + at, n);
      stream_values<kInPlace, ahead>(rows.v + row * d, row_len, 0, n, scores + at, group_size, dim, tile, stride, acc);
    });
  };
  const auto with_group = [&](auto in_place_tag, auto dim) {
    if (group == 1) {
      passes(in_place_tag, dim, std::integral_constant<int64_t, 1>{});
    } else {
      passes(in_place_tag, dim, group);
    }
  };
  if (!in_place) {
    with_group(std::false_type{}, d_pad);
  } else if (d == 128) {
    with_group(std::true_type{}, std::integral_constant<int64_t, 128>{});
  } else if (d == 64) {
    with_group(std::true_type{}, std::integral_constant<int64_t, 64>{});
  } else {
    with_group(std::true_type{}, d_pad);
  }
}

// One whole decode step over the layer @p rows: OpenMP over (sequence, KV head) items, dynamic
// schedule (a ragged batch's items differ in cost); each runs attend_keys() over the sequence's
// lengths[b] keys with the Scales that @p scales_of(b, g) returns, then out = acc / sum for the
// group's query heads. @p s is the checked shape (decode_shape()), @p max_length the longest
// length.
template <class T, class S, class Layout, class ScalesOf>
void decode_groups(const Tensor<float>& q, const DecodeShape& s, const KvRows<T, S, Layout>& rows, int64_t max_length,
                   const ScalesOf& scales_of, Tensor<float>& out) {
  const int64_t d = s.head_dim, group = s.group_size();
  const int64_t d_pad = simd::round_up(d, kLanes);

#pragma omp parallel
  {
    GroupScratch scratch(group, d_pad, max_length);
    simd::AlignedFloats acc(group * d_pad);  // Σ p·v per query head
    std::vector<float> row_max(static_cast<size_t>(group)), row_sum(static_cast<size_t>(group));

#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < s.batch * s.num_kv_heads; ++item) {
      const int64_t b = item / s.num_kv_heads, g = item % s.num_kv_heads;
      const int64_t h0 = g * group;  // query heads h0 .. h0+group-1 read KV head g
      attend_keys(q.data() + (b * s.num_heads + h0) * d, group, rows, b, g, 0, rows.lengths[b], scratch, acc.data(),
                  row_max.data(), row_sum.data(), scales_of(b, g));
      for (int64_t r = 0; r < group; ++r) {
        float* o_row = out.data() + (b * s.num_heads + h0 + r) * d;
        const float* a = acc.data() + r * d_pad;
        const float inv_sum = 1.0f / row_sum[size_t(r)];
        for (int64_t c = 0; c < d; ++c) o_row[c] = a[c] * inv_sum;
      }
    }
  }
}

}  // namespace inferlab::decode_keys
