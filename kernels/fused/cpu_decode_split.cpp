// cpu/decode_split — chapter 05: split-KV decode (flash-decoding) on the CPU.
// (The algorithm, the reduce and the choice of S: split_kv.h.)
//
// cpu/decode_simd (chapter 03) runs one OpenMP item per (sequence, KV head): at batch 1 with one
// KV head (MQA, or a GQA layer's slice on one device) there is one item, so one core streams the
// whole cache while the others wait. This version makes batch · num_kv_heads · S items: item
// (b, g, s) runs the very same two SIMD passes (attend_keys() of cpu_decode_keys.h: K streamed
// once for the whole GQA group, softmax numerators, V streamed once) over keys
// split_range(lengths[b], S, s), and writes the group's partial outputs, maxima and sums; then
// reduce_splits() combines the S partials of every (sequence, query head) exactly.
//
// Cost: the FLOPs and cache bytes of decode (decode_step_cost) plus S·(d + 2) floats per query
// head written and read back by the reduce — < 0.1% of the K and V bytes at 32K tokens, S = 8.
// Why: at batch 1 with one KV head, cpu/decode_simd (chapter 03: one item per (sequence, KV
// head)) keeps one core busy and leaves the other core's share of the memory bandwidth unused;
// S splits make S items per head, and the reduce costs next to nothing. The measured speed-up is
// in chapter 05's lesson (bench_ch05).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/ceil_div.h"
#include "kernels/primitives/cpu_simd.h"
#include "kernels/decode/cpu_decode_keys.h"
#include "kernels/fused/split_kv.h"

namespace inferlab {
namespace {

using namespace decode_keys;

template <class T, class Layout>
void decode_split(const Tensor<float>& q, const KvCache& cache, const DecodeShape& s, const KvRows<T, float, Layout>& rows,
                  Tensor<float>& out, int64_t num_splits) {
  const int64_t d = s.head_dim, group = s.group_size(), d_pad = simd::round_up(d, kLanes);
  const int64_t longest_split = ceil_div(cache.max_length(), num_splits);
  SplitPartials partials(s, num_splits);

#pragma omp parallel
  {
    GroupScratch scratch(group, d_pad, longest_split);
    simd::AlignedFloats acc(group * d_pad);
    std::vector<float> row_max(static_cast<size_t>(group)), row_sum(static_cast<size_t>(group));

#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < s.batch * s.num_kv_heads * num_splits; ++item) {
      const int64_t split = item % num_splits, bg = item / num_splits;
      const int64_t b = bg / s.num_kv_heads, g = bg % s.num_kv_heads;
      const int64_t h0 = g * group;  // query heads h0 .. h0+group-1 read KV head g
      const SplitRange keys = split_range(cache.length(b), num_splits, split);
      if (keys.end > keys.begin) {
        attend_keys(q.data() + (b * s.num_heads + h0) * d, group, rows, b, g, keys.begin, keys.end, scratch,
                    acc.data(), row_max.data(), row_sum.data());
      } else {  // an empty split (S > length): weight 0 in the reduce
        std::fill(acc.data(), acc.data() + group * d_pad, 0.0f);
        std::fill(row_max.begin(), row_max.end(), -INFINITY);
        std::fill(row_sum.begin(), row_sum.end(), 0.0f);
      }
      for (int64_t r = 0; r < group; ++r) {
        const int64_t i = partials.index(b * s.num_heads + h0 + r, split);
        std::copy_n(acc.data() + r * d_pad, d, partials.acc.data() + i * d);
        partials.max[size_t(i)] = row_max[size_t(r)];
        partials.sum[size_t(i)] = row_sum[size_t(r)];
      }
    }
  }
  reduce_splits(partials, out);
}

template <class T>
void decode_split(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out, int64_t num_splits) {
  require(num_splits >= 1, "num_splits", num_splits, "must be ≥ 1 (1 = one split per sequence)");
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  cache.with_rows<T>(0, [&](const auto& rows) { decode_split(q, cache, s, rows, out, num_splits); });
}

}  // namespace

void decode_cpu_split(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out, int64_t num_splits) {
  if (cache.dtype() == KvDtype::fp16) {
    decode_split<uint16_t>(q, cache, out, num_splits);
  } else {
    decode_split<float>(q, cache, out, num_splits);  // rows<float>() refuses any other format
  }
}

void decode_cpu_split(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  decode_cpu_split(q, cache, out, choose_num_splits(s.batch * s.num_kv_heads, cache.max_length(), cpu_split_policy()));
}

}  // namespace inferlab
