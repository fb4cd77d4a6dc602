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
// cpu_decode_keys.h, over int8 rows); the scales are cpu_decode_keys.h's QuantizedScales (shared
// with chapter 06's cpu/prefill_with_cache over INT8 and FP8 caches).
#include "common/half.h"
#include "kernels/decode/cpu_decode_keys.h"
#include "kernels/decode/decode.h"

namespace inferlab {
namespace {

using namespace decode_keys;

// The kernel for scales stored as S: see the file comment.
template <class S>
void decode_int8(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  cache.with_rows<int8_t, S>(0, [&](const auto& rows) {
    const auto scales_of = [&](int64_t b, int64_t g) { return quantized_scales(rows, b, g); };
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
