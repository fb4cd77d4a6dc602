// cpu/decode_int8_simd — chapter 04: cpu/decode_simd over an INT8 KV cache.
// (Version ladder: cpu/decode → cpu/decode_simd (fp32/fp16 cache) → this: a quarter of the fp32
// bytes, half of the fp16 bytes per cached element, plus 4 (fp32) or 2 (fp16) bytes of scale
// per row.)
//
// Same structure as cpu_decode_simd.cpp: OpenMP over (sequence, KV head), the GQA group's
// query heads together so every int8 row is read once per step, 4 keys per step (4 independent
// FMA chains). Rows are widened in the loop: 16 (AVX-512) or 8 (AVX2) int8 → int32 → float per
// load. The scales never touch the inner loop:
//   per-token K:   s_j = k_scale_j · (q · k̂_int8_j) — one multiply per score, vectorised over
//                  the row of scores after the K pass;
//   per-channel K: q'_c = q_c · k_scale_c — folded into the query once per (sequence, head);
//   V:             acc += (p_j · v_scale_j) · v̂_int8_j — folded into the probabilities (after
//                  their sum is taken), vectorised, before the V pass.
// Both passes prefetch 16 rows ahead (as cpu/decode_simd does, further: an int8 row is a quarter
// of an fp32 one). fp16 scales are converted a vector at a time (F16C). Rows whose head_dim is not a
// whole number of vectors are widened into a float tile first.
//
// The two passes are cpu/decode_simd's own (attend_keys() and decode_groups() in
// cpu_decode_keys.h, over int8 rows); this file adds the scales, as Int8Scales below.
#include "common/half.h"
#include "kernels/decode/cpu_decode_keys.h"
#include "kernels/decode/decode.h"

namespace inferlab {
namespace {

using namespace decode_keys;

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
// by load_floats), the tail one by one.
template <class S>
void multiply_by_scales(float* x, const S* scales, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::store(x + i, simd::mul(simd::load(x + i), load_floats(scales + i)));
  for (; i < n; ++i) x[i] *= scale_at(scales, i);
}

// The scales of one (sequence, KV head), stored as S (float or fp16 bits), as attend_keys()
// folds them: per-channel K into the query, per-token K into the scores, V into the
// probabilities (whole runs, vectorised, between the two streaming passes). Per-token scales
// are indexed by row (kv_layout.h), per-channel ones by channel.
template <class S>
struct Int8Scales {
  const S* k_scales = nullptr;  // K's scales of the layer (per token, by row)
  const S* k_channels = nullptr;  // K's per-channel scales of this (sequence, KV head), or null
  const S* v_scales = nullptr;  // V's scales of the layer, by row
  float query_factor(int64_t c) const { return k_channels ? scale_at(k_channels, c) : 1.0f; }
  void scale_scores(int64_t row0, float* s, int64_t n) const {
    if (!k_channels) multiply_by_scales(s, k_scales + row0, n);
  }
  void weight_probabilities(int64_t row0, float* p, int64_t n) const { multiply_by_scales(p, v_scales + row0, n); }
};

// The kernel for scales stored as S: see the file comment.
template <class S>
void decode_int8(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  cache.with_rows<int8_t, S>(0, [&](const auto& rows) {
    const auto scales_of = [&](int64_t b, int64_t g) {
      const S* channels = rows.per_channel ? rows.k_scales + rows.layout.head(b, g) * rows.head_dim : nullptr;
      return Int8Scales<S>{rows.k_scales, channels, rows.v_scales};
    };
    decode_groups(q, s, rows, cache.max_length(), scales_of, out);
  });
}

}  // namespace

void decode_int8_cpu_simd(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  if (cache.format().scale_dtype == ScaleDtype::fp16) {
    decode_int8<uint16_t>(q, cache, out);
  } else {
    decode_int8<float>(q, cache, out);  // rows<int8_t>() refuses any format but INT8
  }
}

}  // namespace inferlab
