// cpu/decode_simd — chapter 03: decode attention that streams the KV cache once.
// (Version ladder: see cpu_decode.cpp.)
//
// Decode is memory-bound (AI ≈ 1 FLOP/byte in fp16): the time is the time to read K and V.
// So the one rule of this version is *read every cached byte once per step*:
//   - OpenMP over (sequence, KV head) work items, not over query heads: the group_size query
//     heads that share a KV head (GQA) are processed together, so each K row and each V row is
//     loaded once and used group_size times while it is in L1;
//   - pass 1 streams K: for key j, load the row once (converting fp16 with F16C), dot it with
//     each of the group's queries (pre-scaled by 1/√d) → scores[h][j];
//   - softmax numerators in place with the vector exp of cpu_simd.h (max subtracted);
//   - pass 2 streams V: acc[h] += p[h][j] · v_j, then out[h] = acc[h] / Σ_j p[h][j].
// Each thread's scratch (scores: group_size·L floats, 4·L bytes per head, and acc) stays in
// its caches; DRAM sees K and V once, plus q and out.
//
// Only slots below lengths[b] are read: the poisoned tail (NaN) never reaches a score.
// Work items have different costs in a ragged batch: dynamic schedule.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/half.h"
#include "kernels/attention/cpu_simd.h"
#include "kernels/decode/decode.h"

namespace inferlab {
namespace {

using simd::AlignedFloats;
using simd::kLanes;
using simd::round_up;
using simd::Vec;

// Copies cached row @p src (d elements) to @p dst as floats, zero-padded to d_pad (a multiple
// of kLanes), so the dot products and FMAs can run over whole vectors.
inline void row_to_floats(const float* src, int64_t d, int64_t d_pad, float* dst) {
  std::memcpy(dst, src, size_t(d) * sizeof(float));
  std::fill(dst + d, dst + d_pad, 0.0f);
}

inline void row_to_floats(const uint16_t* src, int64_t d, int64_t d_pad, float* dst) {
  int64_t c = 0;
#if defined(__AVX512F__)
  for (; c + 16 <= d; c += 16)
    _mm512_storeu_ps(dst + c, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + c))));
#elif defined(__F16C__)
  for (; c + 8 <= d; c += 8)
    _mm256_storeu_ps(dst + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c))));
#endif
  for (; c < d; ++c) dst[c] = half_bits_to_float(src[c]);
  std::fill(dst + d, dst + d_pad, 0.0f);
}

inline float dot(const float* a, const float* b, int64_t d_pad) {
  // Two accumulators: consecutive FMAs into one register would wait on each other's latency.
  Vec acc0 = simd::broadcast(0.0f), acc1 = simd::broadcast(0.0f);
  int64_t c = 0;
  for (; c + 2 * kLanes <= d_pad; c += 2 * kLanes) {
    acc0 = simd::fma(simd::load(a + c), simd::load(b + c), acc0);
    acc1 = simd::fma(simd::load(a + c + kLanes), simd::load(b + c + kLanes), acc1);
  }
  if (c < d_pad) acc0 = simd::fma(simd::load(a + c), simd::load(b + c), acc0);
  return simd::reduce_add(simd::add(acc0, acc1));
}

template <class T>
void decode_simd(const Tensor<float>& q, const KvCache& cache, const T* k, const T* v, Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  const KvCacheShape& layout = cache.shape();
  const int64_t d = s.head_dim, group = s.group_size();
  const int64_t d_pad = round_up(d, kLanes);
  const int64_t score_stride = round_up(cache.max_length(), kLanes);  // room for softmax_numerator
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

#pragma omp parallel
  {
    AlignedFloats q_group(group * d_pad);        // the group's queries, scaled by 1/√d, padded
    AlignedFloats scores(group * score_stride);  // scores, then softmax numerators
    AlignedFloats acc(group * d_pad);            // Σ p·v per query head
    AlignedFloats row(d_pad);                    // the current K or V row as floats
    std::vector<float> inv_sum(static_cast<size_t>(group));

#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < s.batch * s.num_kv_heads; ++item) {
      const int64_t b = item / s.num_kv_heads, g = item % s.num_kv_heads;
      const int64_t L = cache.length(b);
      const int64_t h0 = g * group;  // query heads h0 .. h0+group-1 read KV head g
      const T* K = k + layout.offset(b, g, 0);
      const T* V = v + layout.offset(b, g, 0);

      for (int64_t r = 0; r < group; ++r) {
        const float* q_row = q.data() + (b * s.num_heads + h0 + r) * d;
        float* dst = q_group.data() + r * d_pad;
        for (int64_t c = 0; c < d; ++c) dst[c] = q_row[c] * scale;
        std::fill(dst + d, dst + d_pad, 0.0f);
      }

      // Pass 1: stream K once; each row serves the whole group.
      for (int64_t j = 0; j < L; ++j) {
        const float* k_row;
        if constexpr (std::is_same_v<T, float>) {
          if (d == d_pad) {
            k_row = K + j * d;  // already whole vectors: read in place
          } else {
            row_to_floats(K + j * d, d, d_pad, row.data());
            k_row = row.data();
          }
        } else {
          row_to_floats(K + j * d, d, d_pad, row.data());
          k_row = row.data();
        }
        for (int64_t r = 0; r < group; ++r)
          scores.data()[r * score_stride + j] = dot(q_group.data() + r * d_pad, k_row, d_pad);
      }

      // Softmax numerators (exp(s − max), vectorised), 1/Σ kept per head.
      for (int64_t r = 0; r < group; ++r)
        inv_sum[size_t(r)] = 1.0f / simd::softmax_numerator(scores.data() + r * score_stride, L, L);

      // Pass 2: stream V once; acc[r] += p[r][j] · v_j.
      std::fill(acc.data(), acc.data() + group * d_pad, 0.0f);
      for (int64_t j = 0; j < L; ++j) {
        const float* v_row;
        if constexpr (std::is_same_v<T, float>) {
          if (d == d_pad) {
            v_row = V + j * d;
          } else {
            row_to_floats(V + j * d, d, d_pad, row.data());
            v_row = row.data();
          }
        } else {
          row_to_floats(V + j * d, d, d_pad, row.data());
          v_row = row.data();
        }
        for (int64_t r = 0; r < group; ++r) {
          const Vec p = simd::broadcast(scores.data()[r * score_stride + j]);
          float* a = acc.data() + r * d_pad;
          for (int64_t c = 0; c < d_pad; c += kLanes)
            simd::store(a + c, simd::fma(p, simd::load(v_row + c), simd::load(a + c)));
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

void decode_cpu_simd(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  if (cache.dtype() == KvDtype::fp16) {
    decode_simd(q, cache, cache.k_fp16(), cache.v_fp16(), out);
  } else {
    decode_simd(q, cache, cache.k_fp32(), cache.v_fp32(), out);
  }
}

}  // namespace inferlab
