// cpu/decode — chapter 03: one decode step written the way the math reads.
//
// Version ladder (decode attention):
//   cpu/decode        this file: per (sequence, head) three loops — L scores, softmax, Σ p·V.
//   cpu/decode_simd   cpu_decode_simd.cpp: vectorised, OpenMP, the GQA group together so the
//                     cache is streamed once.
//   cuda/decode       cuda_decode.cu: one block per (sequence, head), warp-level dot products.
//   cuda/split_kv     chapter 05: the keys split over blocks (flash-decoding) + a reduce kernel.
//
// Cost per (sequence, head), L = lengths[b], d = head_dim: 4·L·d FLOPs; it reads L·d keys and
// L·d values — as many bytes as FLOPs/2 (fp16) or /4 (fp32): memory-bound.
#include <cmath>
#include <limits>
#include <vector>

#include "common/half.h"
#include "kernels/decode/decode.h"

namespace inferlab {
namespace {

template <class T>
float to_float(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return half_bits_to_float(x);
  }
}

// T = float (fp32 cache) or uint16_t (fp16 bits). The rows of one sequence's KV head are
// where the cache's layout puts them: K row of token j at rows.k + layout.row(b, g, j) · d
// (contiguous, or through the block table when paged: the same loops).
template <class T, class Layout>
void decode_naive(const Tensor<float>& q, const KvCache& cache, const DecodeShape& s, const KvRows<T, float, Layout>& rows,
                  Tensor<float>& out) {
  const int64_t d = s.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> scores(static_cast<size_t>(s.max_seq_len));

  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t L = cache.length(b);  // only these slots hold tokens; the rest is poison
    for (int64_t h = 0; h < s.num_heads; ++h) {
      const int64_t g = h / s.group_size();  // the KV head this query head reads (GQA)
      const float* q_row = q.data() + (b * s.num_heads + h) * d;
      float* o_row = out.data() + (b * s.num_heads + h) * d;

      // 1. s_j = q·k_j / √d, and the max for a stable softmax.
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < L; ++j) {
        const T* k_j = rows.k + rows.layout.row(b, g, j) * d;
        float dot = 0.0f;
        for (int64_t c = 0; c < d; ++c) dot += q_row[c] * to_float(k_j[c]);
        scores[size_t(j)] = dot * scale;
        max_score = std::max(max_score, scores[size_t(j)]);
      }
      // 2. p_j = exp(s_j − max) / Σ.
      float sum = 0.0f;
      for (int64_t j = 0; j < L; ++j) {
        scores[size_t(j)] = std::exp(scores[size_t(j)] - max_score);
        sum += scores[size_t(j)];
      }
      // 3. out = Σ_j p_j · v_j.
      for (int64_t c = 0; c < d; ++c) o_row[c] = 0.0f;
      for (int64_t j = 0; j < L; ++j) {
        const T* v_j = rows.v + rows.layout.row(b, g, j) * d;
        const float p = scores[size_t(j)] / sum;
        for (int64_t c = 0; c < d; ++c) o_row[c] += p * to_float(v_j[c]);
      }
    }
  }
}

template <class T>
void decode_naive(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  cache.with_rows<T>(0, [&](const auto& rows) { decode_naive(q, cache, s, rows, out); });
}

}  // namespace

void decode_cpu_naive(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  if (cache.dtype() == KvDtype::fp16) {
    decode_naive<uint16_t>(q, cache, out);
  } else {
    decode_naive<float>(q, cache, out);  // rows<float>() refuses any other format
  }
}

}  // namespace inferlab
