// cpu/decode_simd — chapter 03: decode attention that streams the KV cache once.
// (Version ladder: see cpu_decode.cpp.)
//
// Decode is memory-bound (AI ≈ 1 FLOP/byte in fp16): the time is the time to read K and V.
// So the one rule of this version is *read every cached byte once per step*:
//   - OpenMP over (sequence, KV head) work items, not over query heads: the group_size query
//     heads that share a KV head (GQA) are processed together, so each K row and each V row is
//     loaded once and used group_size times while it is in L1;
//   - pass 1 streams K: dot each key with each of the group's queries (pre-scaled by 1/√d)
//     → scores[h][j];
//   - softmax numerators in place with the vector exp of cpu_simd.h (max subtracted);
//   - pass 2 streams V: acc[h] += p[h][j] · v_j, then out[h] = acc[h] / Σ_j p[h][j].
// Each thread's scratch (scores: group_size·L floats, 4·L bytes per head, and acc) stays in
// its caches; DRAM sees K and V once, plus q and out.
//
// Making the stream fast. One key at a time (row converted to a float copy, one dot and its
// horizontal sum, acc loaded and stored per key) the fp16 cache streamed at 16–17 GB/s, ~62% of
// the read bandwidth measured alongside (26–27 GB/s) on chapter 03's 2-core AVX-512 VM; with the
// three tricks below it streams at 23.6–24.1 GB/s (~89%), a step 1.4× faster, and the fp32 cache
// went from 22–23 to 27 GB/s (decode_8xllc_* points: L = 32768, a 3.75 GiB cache):
//   - kKeys = 4 keys per step: pass 1 runs 4 independent dot-product chains and finishes their
//     4 horizontal sums together (reduce_add4), pass 2 adds 4 p·v products to an accumulator per load/store of it, so neither
//     pass waits on one chain's latency (an FMA, a horizontal sum, a store-to-load forward);
//   - fp16 rows are converted 16 (AVX-512) or 8 (F16C) halves at a time *inside* the dot and
//     FMA loops (load_floats), not copied to a float row first;
//   - software prefetch one block ahead: each loop iteration asks for the lines of the next
//     kKeys rows, so they are on their way into L1 while this block is computed.
//
// Only slots below lengths[b] are read: the poisoned tail (NaN) never reaches a score.
// Work items have different costs in a ragged batch: dynamic schedule.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "common/half.h"
#include "kernels/attention/cpu_simd.h"
#include "kernels/decode/cpu_decode_keys.h"
#include "kernels/decode/decode.h"

namespace inferlab {
namespace {

using simd::AlignedFloats;
using simd::kLanes;
using simd::round_up;
using simd::Vec;
using namespace decode_keys;

// How far ahead the passes prefetch: the next block (1 KiB of fp16 rows, 2 KiB of fp32). Measured
// on the 8× LLC point: 4 keys ahead was best; 8, 16, 32 were 5–40% slower (the early lines
// probably crowd L1 and compete with the hardware prefetcher, already streaming ahead into L2).
constexpr int64_t kPrefetchKeys = kKeys;

// Copies cached row @p src (d elements) to @p dst as floats, zero-padded to d_pad (a multiple
// of kLanes), for rows that are not whole vectors (odd head_dim) or are reused by a GQA group.
template <class T>
void row_to_floats(const T* src, int64_t d, int64_t d_pad, float* dst) {
  int64_t c = 0;
  for (; c + kLanes <= d; c += kLanes) simd::store(dst + c, load_floats(src + c));
  for (; c < d; ++c) dst[c] = std::is_same_v<T, float> ? float(src[c]) : half_bits_to_float(uint16_t(src[c]));
  std::fill(dst + d, dst + d_pad, 0.0f);
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
  // Rows are read in place when they are whole vectors — and, for fp16, when each row serves
  // one query head only (MHA): a GQA group converts a row once into a float tile and reuses it.
  const bool in_place = d == d_pad && (std::is_same_v<T, float> || group == 1);
  const int64_t row_bytes = d * int64_t(sizeof(T));

#pragma omp parallel
  {
    AlignedFloats q_group(group * d_pad);        // the group's queries, scaled by 1/√d, padded
    AlignedFloats scores(group * score_stride);  // scores, then softmax numerators
    AlignedFloats acc(group * d_pad);            // Σ p·v per query head
    AlignedFloats tile(kKeys * d_pad);           // kKeys rows as floats (when not in place)
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

      // The kKeys rows j … j+kKeys−1 of @p X, in place or as floats in the tile. Past the last
      // key the last row is repeated (never one of the poisoned slots); its results are dropped.
      const auto block_rows = [&](const T* X, int64_t j, const T* in_cache[kKeys], const float* as_floats[kKeys]) {
        for (int64_t i = 0; i < kKeys; ++i) {
          const T* src = X + std::min(j + i, L - 1) * d;
          if (in_place) {
            in_cache[i] = src;
          } else {
            row_to_floats(src, d, d_pad, tile.data() + i * d_pad);
            as_floats[i] = tile.data() + i * d_pad;
          }
        }
      };

      // Pass 1: stream K once, kKeys keys at a time; each row serves the whole group.
      for (int64_t j = 0; j < L; j += kKeys) {
        if (j + kPrefetchKeys < L)
          prefetch(K + (j + kPrefetchKeys) * d, std::min(kKeys, L - j - kPrefetchKeys) * row_bytes);
        const T* in_cache[kKeys];
        const float* as_floats[kKeys];
        block_rows(K, j, in_cache, as_floats);
        const int64_t n = std::min(kKeys, L - j);
        for (int64_t r = 0; r < group; ++r) {
          float block[kKeys];
          if (in_place) {
            dot_keys(q_group.data() + r * d_pad, in_cache, d_pad, block);
          } else {
            dot_keys(q_group.data() + r * d_pad, as_floats, d_pad, block);
          }
          std::copy(block, block + n, scores.data() + r * score_stride + j);
        }
      }

      // Softmax numerators (exp(s − max), vectorised), 1/Σ kept per head.
      for (int64_t r = 0; r < group; ++r)
        inv_sum[size_t(r)] = 1.0f / simd::softmax_numerator(scores.data() + r * score_stride, L, L);

      // Pass 2: stream V once, kKeys rows at a time: acc[r] += Σ_i p[r][j+i] · v_{j+i}, one
      // load and store of each accumulator vector per kKeys rows (a padded key has p = 0).
      std::fill(acc.data(), acc.data() + group * d_pad, 0.0f);
      for (int64_t j = 0; j < L; j += kKeys) {
        if (j + kPrefetchKeys < L)
          prefetch(V + (j + kPrefetchKeys) * d, std::min(kKeys, L - j - kPrefetchKeys) * row_bytes);
        const T* in_cache[kKeys];
        const float* as_floats[kKeys];
        block_rows(V, j, in_cache, as_floats);
        const int64_t n = std::min(kKeys, L - j);
        for (int64_t r = 0; r < group; ++r) {
          const float* p_row = scores.data() + r * score_stride + j;
          const float p[kKeys] = {p_row[0], n > 1 ? p_row[1] : 0.0f, n > 2 ? p_row[2] : 0.0f, n > 3 ? p_row[3] : 0.0f};
          float* a = acc.data() + r * d_pad;
          if (in_place) {
            accumulate_keys(p, in_cache, d_pad, a);
          } else {
            accumulate_keys(p, as_floats, d_pad, a);
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

void decode_cpu_simd(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  if (cache.dtype() == KvDtype::fp16) {
    decode_simd(q, cache, cache.k_fp16(), cache.v_fp16(), out);
  } else {
    decode_simd(q, cache, cache.k_fp32(), cache.v_fp32(), out);
  }
}

}  // namespace inferlab
