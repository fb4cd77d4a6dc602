// cpu/decode_int8_simd — chapter 04: cpu/decode_simd over an INT8 KV cache.
// (Version ladder: cpu/decode → cpu/decode_simd (fp32/fp16 cache) → this: a quarter of the fp32
// bytes, half of the fp16 bytes per cached element, plus 4 bytes of scale per row.)
//
// Same structure as cpu_decode_simd.cpp: OpenMP over (sequence, KV head), the GQA group's
// query heads together so every int8 row is read once per step, 4 keys per step (4 independent
// FMA chains). Rows are widened in the loop: 16 (AVX-512) or 8 (AVX2) int8 → int32 → float per
// load. The scales never touch the inner loop:
//   per-token K:   s_j = k_scale_j · (q · k̂_int8_j) — one multiply per score;
//   per-channel K: q'_c = q_c · k_scale_c — folded into the query once per (sequence, head);
//   V:             acc += (p_j · v_scale_j) · v̂_int8_j — folded into the probability.
// Rows whose head_dim is not a whole number of vectors are widened into a float tile first.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention/cpu_simd.h"
#include "kernels/decode/decode_int8.h"

namespace inferlab {
namespace {

using simd::AlignedFloats;
using simd::kLanes;
using simd::round_up;
using simd::Vec;

constexpr int64_t kKeys = 4;

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
inline Vec load_floats(const float* p) { return simd::load(p); }

template <class T>
void dot_keys(const float* q, const T* const row[kKeys], int64_t d_pad, float* scores) {
  Vec acc0 = simd::broadcast(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (int64_t c = 0; c < d_pad; c += kLanes) {
    const Vec qc = simd::load(q + c);
    acc0 = simd::fma(qc, load_floats(row[0] + c), acc0);
    acc1 = simd::fma(qc, load_floats(row[1] + c), acc1);
    acc2 = simd::fma(qc, load_floats(row[2] + c), acc2);
    acc3 = simd::fma(qc, load_floats(row[3] + c), acc3);
  }
  scores[0] = simd::reduce_add(acc0);
  scores[1] = simd::reduce_add(acc1);
  scores[2] = simd::reduce_add(acc2);
  scores[3] = simd::reduce_add(acc3);
}

}  // namespace

void decode_int8_cpu_simd(const Tensor<float>& q, const Int8KvCache& cache, Tensor<float>& out) {
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
  const float* k_scales = cache.k_scales().data();
  const float* v_scales = cache.v_scales().data();

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
      const float* k_scale_row = k_scales + (per_channel ? cache.channel_scale_index(b, g, 0)
                                                         : cache.token_scale_index(b, g, 0));
      const float* v_scale_row = v_scales + cache.token_scale_index(b, g, 0);

      for (int64_t r = 0; r < group; ++r) {
        const float* q_row = q.data() + (b * s.num_heads + h0 + r) * d;
        float* dst = q_group.data() + r * d_pad;
        for (int64_t c = 0; c < d; ++c) dst[c] = q_row[c] * scale * (per_channel ? k_scale_row[c] : 1.0f);
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
            scores.data()[r * score_stride + j + i] = per_channel ? block[i] : block[i] * k_scale_row[j + i];
        }
      }
      for (int64_t r = 0; r < group; ++r)
        inv_sum[size_t(r)] = 1.0f / simd::softmax_numerator(scores.data() + r * score_stride, L, L);

      // Pass 2: V once; the row's scale rides on the probability.
      std::fill(acc.data(), acc.data() + group * d_pad, 0.0f);
      for (int64_t j = 0; j < L; j += kKeys) {
        const int8_t* raw[kKeys];
        const float* wide[kKeys];
        block_rows(V, j, raw, wide);
        const int64_t n = std::min(kKeys, L - j);
        for (int64_t r = 0; r < group; ++r) {
          const float* p_row = scores.data() + r * score_stride + j;
          const auto pv = [&](int64_t i) { return i < n ? p_row[i] * v_scale_row[j + i] : 0.0f; };
          const Vec p0 = simd::broadcast(pv(0)), p1 = simd::broadcast(pv(1)), p2 = simd::broadcast(pv(2)),
                    p3 = simd::broadcast(pv(3));
          float* a = acc.data() + r * d_pad;
          const auto fma4 = [&](const auto* const rows[kKeys]) {
            for (int64_t c = 0; c < d_pad; c += kLanes) {
              Vec x = simd::load(a + c);
              x = simd::fma(p0, load_floats(rows[0] + c), x);
              x = simd::fma(p1, load_floats(rows[1] + c), x);
              x = simd::fma(p2, load_floats(rows[2] + c), x);
              x = simd::fma(p3, load_floats(rows[3] + c), x);
              simd::store(a + c, x);
            }
          };
          if (in_place) {
            fma4(raw);
          } else {
            fma4(wide);
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

}  // namespace inferlab
