// cpu/decode_int8_simd — chapter 04: cpu/decode_simd over an INT8 KV cache.
// (Version ladder: cpu/decode → cpu/decode_simd (fp32/fp16 cache) → this: a quarter of the fp32
// bytes, half of the fp16 bytes per cached element, plus 4 (fp32) or 2 (fp16) bytes of scale
// per row.)
//
// Same structure as cpu_decode_simd.cpp: OpenMP over (sequence, KV head), the GQA group's
// query heads together so every int8 row is read once per step, 4 keys per step (4 independent
// FMA chains). Rows are widened in the loop: 16 (AVX-512) or 8 (AVX2) int8 → int32 → float per
// load. The scales never touch the inner loop:
//   per-token K:   s_j = k_scale_j · (q · k̂_int8_j) — one multiply per score;
//   per-channel K: q'_c = q_c · k_scale_c — folded into the query once per (sequence, head);
//   V:             acc += (p_j · v_scale_j) · v̂_int8_j — folded into the probability.
// Both passes prefetch the rows kInt8PrefetchKeys ahead (as cpu/decode_simd does, further: an
// int8 row is a quarter of an fp32 one). fp16 scales are converted one per row (F16C).
// Rows whose head_dim is not a whole number of vectors are widened into a float tile first.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/half.h"
#include "kernels/attention/cpu_simd.h"
#include "kernels/decode/cpu_decode_keys.h"
#include "kernels/decode/decode_int8.h"

namespace inferlab {
namespace {

using simd::AlignedFloats;
using simd::kLanes;
using simd::round_up;
using simd::Vec;
using namespace decode_keys;

// How far ahead the passes prefetch, in keys: 16 int8 rows, 2 KiB at head_dim 128 — the bytes
// cpu/decode_simd's fp32 rows are prefetched ahead. Measured at L = 32768 × batch 4 (264 MiB)
// on the shared 2-core VM, CPU time per call (the wall clock was too noisy to rank them): no
// prefetch 21.3–21.6 ms, 4 keys 19.6, 8 keys 18.9, 16 keys 15.8–20.1, 32 keys 24.5.
constexpr int64_t kInt8PrefetchKeys = 4 * kKeys;

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

// The kernel for scales stored as S (float or fp16 bits): see the file comment.
template <class S>
void decode_int8(const Tensor<float>& q, const Int8KvCache& cache, const S* k_scales, const S* v_scales,
                 Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  const KvCacheShape& layout = cache.shape();
  const int64_t d = s.head_dim, group = s.group_size();
  const int64_t d_pad = round_up(d, kLanes);
  const int64_t score_stride = round_up(cache.max_length(), kLanes);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const bool in_place = d == d_pad;
  const bool per_channel = cache.key_scaling() == KeyScaling::per_channel;
  const int8_t* k = cache.k_int8().data();
  const int8_t* v = cache.v_int8().data();

#pragma omp parallel
  {
    AlignedFloats q_group(group * d_pad);
    AlignedFloats scores(group * score_stride);
    AlignedFloats acc(group * d_pad);
    AlignedFloats tile(kKeys * d_pad);
    std::vector<float> inv_sum(static_cast<size_t>(group));

#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < s.batch * s.num_kv_heads; ++item) {
      const int64_t b = item / s.num_kv_heads, g = item % s.num_kv_heads;
      const int64_t L = cache.length(b);
      const int64_t h0 = g * group;
      const int8_t* K = k + layout.offset(b, g, 0);
      const int8_t* V = v + layout.offset(b, g, 0);
      const S* k_scale_row =
          k_scales + (per_channel ? cache.channel_scale_index(b, g, 0) : cache.token_scale_index(b, g, 0));
      const S* v_scale_row = v_scales + cache.token_scale_index(b, g, 0);

      for (int64_t r = 0; r < group; ++r) {
        const float* q_row = q.data() + (b * s.num_heads + h0 + r) * d;
        float* dst = q_group.data() + r * d_pad;
        for (int64_t c = 0; c < d; ++c) dst[c] = q_row[c] * scale * (per_channel ? scale_at(k_scale_row, c) : 1.0f);
        std::fill(dst + d, dst + d_pad, 0.0f);
      }

      // Rows j … j+3 in place (int8) or widened into the tile; past the end the last row repeats.
      const auto block_rows = [&](const int8_t* X, int64_t j, const int8_t* raw[kKeys], const float* wide[kKeys]) {
        for (int64_t i = 0; i < kKeys; ++i) {
          const int8_t* src = X + std::min(j + i, L - 1) * d;
          if (in_place) {
            raw[i] = src;
          } else {
            float* t = tile.data() + i * d_pad;
            for (int64_t c = 0; c < d; ++c) t[c] = float(src[c]);
            std::fill(t + d, t + d_pad, 0.0f);
            wide[i] = t;
          }
        }
      };

      // Pass 1: K once.
      for (int64_t j = 0; j < L; j += kKeys) {
        if (j + kInt8PrefetchKeys < L)
          prefetch(K + (j + kInt8PrefetchKeys) * d, std::min(kKeys, L - j - kInt8PrefetchKeys) * d);
        const int8_t* raw[kKeys];
        const float* wide[kKeys];
        block_rows(K, j, raw, wide);
        const int64_t n = std::min(kKeys, L - j);
        for (int64_t r = 0; r < group; ++r) {
          float block[kKeys];
          if (in_place) {
            dot_keys(q_group.data() + r * d_pad, raw, d_pad, block);
          } else {
            dot_keys(q_group.data() + r * d_pad, wide, d_pad, block);
          }
          for (int64_t i = 0; i < n; ++i)
            scores.data()[r * score_stride + j + i] = per_channel ? block[i] : block[i] * scale_at(k_scale_row, j + i);
        }
      }
      for (int64_t r = 0; r < group; ++r)
        inv_sum[size_t(r)] = 1.0f / simd::softmax_numerator(scores.data() + r * score_stride, L, L);

      // Pass 2: V once; the row's scale rides on the probability.
      std::fill(acc.data(), acc.data() + group * d_pad, 0.0f);
      for (int64_t j = 0; j < L; j += kKeys) {
        if (j + kInt8PrefetchKeys < L)
          prefetch(V + (j + kInt8PrefetchKeys) * d, std::min(kKeys, L - j - kInt8PrefetchKeys) * d);
        const int8_t* raw[kKeys];
        const float* wide[kKeys];
        block_rows(V, j, raw, wide);
        const int64_t n = std::min(kKeys, L - j);
        for (int64_t r = 0; r < group; ++r) {
          const float* p_row = scores.data() + r * score_stride + j;
          float p[kKeys];
          for (int64_t i = 0; i < kKeys; ++i) p[i] = i < n ? p_row[i] * scale_at(v_scale_row, j + i) : 0.0f;
          float* a = acc.data() + r * d_pad;
          if (in_place) {
            accumulate_keys(p, raw, d_pad, a);
          } else {
            accumulate_keys(p, wide, d_pad, a);
          }
        }
      }
      for (int64_t r = 0; r < group; ++r) {
        float* o_row = out.data() + (b * s.num_heads + h0 + r) * d;
        const float* a = acc.data() + r * d_pad;
        for (int64_t c = 0; c < d; ++c) o_row[c] = a[c] * inv_sum[size_t(r)];
      }
    }
  }
}

}  // namespace

void decode_int8_cpu_simd(const Tensor<float>& q, const Int8KvCache& cache, Tensor<float>& out) {
  if (cache.scale_dtype() == ScaleDtype::fp16) {
    decode_int8(q, cache, cache.k_scales_fp16().data(), cache.v_scales_fp16().data(), out);
  } else {
    decode_int8(q, cache, cache.k_scales().data(), cache.v_scales().data(), out);
  }
}

}  // namespace inferlab
