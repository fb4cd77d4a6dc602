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
// The per-(sequence, KV head) work — both passes over one GQA group — is attend_keys() in
// cpu_decode_keys.h, shared with chapter 05's split-KV decode (which runs it over each split);
// decode_groups() there runs it over every (sequence, KV head), for this version and for
// chapter 04's cpu/decode_int8_simd.
//
// Making the stream fast. One key at a time (each row converted to a float copy, one dot and its
// horizontal sum, the accumulator loaded and stored per key) the loop waited on latencies and
// streamed well below the read bandwidth; three changes brought it close to the read roof
// (chapter 03's lesson has the figures, bench_ch03's decode_8xllc_* points):
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
#include "kernels/decode/cpu_decode_keys.h"
#include "kernels/decode/decode.h"

namespace inferlab {
namespace {

using namespace decode_keys;

template <class T>
void decode_simd(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  const auto unscaled = [](int64_t, int64_t) { return Unscaled{}; };  // fp32/fp16 rows: no scales
  cache.with_rows<T>(0, [&](const auto& rows) { decode_groups(q, s, rows, cache.max_length(), unscaled, out); });
}

}  // namespace

void decode_cpu_simd(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  if (cache.dtype() == KvDtype::fp16) {
    decode_simd<uint16_t>(q, cache, out);
  } else {
    decode_simd<float>(q, cache, out);  // rows<float>() refuses any other format
  }
}

}  // namespace inferlab
