// Chapter 07: prefill with a cache (kernels/paged/prefill_with_cache.h, cpu/prefill_with_cache) is
// batch-invariant — a query token's output depends only on its position and the cached values,
// bit for bit (the comment at the top of kernels/paged/cpu_prefill_with_cache.cpp says why).
//
// A ragged batch of sequences (lengths 1, 63, 64, 65, 130, 200 — on and across the kernel's
// 64-key pieces — and a random one) with random fp32 K, V and queries is computed by three
// schedules of successive calls, each call writing its chunks' K and V at their slots first and
// setting the lengths, as the model does:
//   (a) every sequence's whole length as one chunk, in one call;
//   (b) random chunk sizes, random sequences left out of a call (chunk_lengths 0);
//   (c) one token at a time (decode steps);
// on a contiguous cache and on paged ones with scattered blocks (block sizes 1, 7, 16). Every
// query's output must be bit-identical across all schedules and layouts, and equal the float64
// oracle (prefill_with_cache_reference) within the fp32 tolerance (checked on (a): the others
// are the same bits). GQA groups of 4, 1 and 2; head_dim 64, 80 and stories260K's 8. The same
// for the quantized caches the model can run on (INT8 with per-token K scales, fp32 and fp16
// scales; FP8 E4M3): the writes quantize each token's rows on their own, so every schedule
// stores the same codes and scales, and the attention over them must give the same bits; the
// oracle is then the float64 attention over the dequantized rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "common/compare.h"
#include "kernels/kv/kv_cache.h"
#include "kernels/kv/kv_factories.h"
#include "kernels/paged/prefill_with_cache.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using testing::SeededRng;

// Every token's K, V and query, drawn once: a token's values do not depend on the schedule.
struct Problem {
  std::vector<int64_t> lengths;
  int64_t heads, kv_heads, head_dim, max_len;
  Tensor<float> k, v;  // [batch, max_len, kv_heads, head_dim]
  Tensor<float> q;     // [batch, max_len, heads, head_dim]
};

Problem make_problem(SeededRng& rng, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  Problem p;
  p.lengths = {1, 63, 64, 65, 130, 200, rng.integer(1, 260)};
  p.heads = heads, p.kv_heads = kv_heads, p.head_dim = head_dim;
  p.max_len = *std::max_element(p.lengths.begin(), p.lengths.end());
  const int64_t B = int64_t(p.lengths.size());
  p.k = rng.normal_tensor({B, p.max_len, kv_heads, head_dim});
  p.v = rng.normal_tensor({B, p.max_len, kv_heads, head_dim});
  p.q = rng.normal_tensor({B, p.max_len, heads, head_dim});
  return p;
}

// A schedule: per call, the chunk length of every sequence.
using Schedule = std::vector<std::vector<int64_t>>;

Schedule whole(const Problem& p) { return {p.lengths}; }

Schedule one_at_a_time(const Problem& p) {
  Schedule s;
  for (int64_t t = 0; t < p.max_len; ++t) {
    std::vector<int64_t> call(p.lengths.size());
    for (size_t b = 0; b < call.size(); ++b) call[b] = t < p.lengths[b] ? 1 : 0;
    s.push_back(call);
  }
  return s;
}

// Random chunks: each call, each unfinished sequence sits out with probability 1/3, otherwise
// brings 1 token (a decode), a short chunk or a long one (crossing tiles of 16 and pieces of 64).
Schedule random_chunks(const Problem& p, Rng& rng) {
  std::vector<int64_t> done(p.lengths.size(), 0);
  Schedule s;
  while (done != p.lengths) {
    std::vector<int64_t> call(p.lengths.size(), 0);
    for (size_t b = 0; b < call.size(); ++b) {
      const int64_t left = p.lengths[b] - done[b];
      if (left == 0 || rng.integer(0, 2) == 0) continue;
      const int64_t kind = rng.integer(0, 2);
      const int64_t most = kind == 0 ? 1 : kind == 1 ? 17 : 90;
      call[b] = std::min(left, rng.integer(1, most));
    }
    if (std::all_of(call.begin(), call.end(), [](int64_t n) { return n == 0; })) continue;
    for (size_t b = 0; b < call.size(); ++b) done[b] += call[b];
    s.push_back(call);
  }
  return s;
}

// The outputs of every query token, [batch, max_len, heads, head_dim] (NaN where no token is),
// computed by @p schedule on a cache of @p block_size (0: contiguous; paged blocks scattered by
// @p seed); with @p check_oracle every call is also compared with the float64 oracle.
Tensor<float> run(const Problem& p, const KvFormat& format, const Schedule& schedule, int64_t block_size, uint64_t seed,
                  bool check_oracle, const std::string& what) {
  const int64_t B = int64_t(p.lengths.size()), H = p.heads, G = p.kv_heads, d = p.head_dim;
  const KvCacheShape shape{B, G, p.max_len, d, 1};
  KvCache cache = block_size == 0 ? KvCache(shape, format) : to_paged(KvCache(shape, format), block_size, seed);
  Tensor<float> all({B, p.max_len, H, d});
  all.poison();
  std::vector<int64_t> lengths(size_t(B), 0);
  for (size_t call = 0; call < schedule.size(); ++call) {
    const std::vector<int64_t>& chunks = schedule[call];
    const int64_t T = std::accumulate(chunks.begin(), chunks.end(), int64_t{0});
    Tensor<float> k({T, G, d}), v({T, G, d}), q({T, H, d}), out({T, H, d});
    std::vector<int64_t> slots;
    int64_t t = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t pos = lengths[size_t(b)]; pos < lengths[size_t(b)] + chunks[size_t(b)]; ++pos, ++t) {
        std::copy_n(p.k.data() + (b * p.max_len + pos) * G * d, G * d, k.data() + t * G * d);
        std::copy_n(p.v.data() + (b * p.max_len + pos) * G * d, G * d, v.data() + t * G * d);
        std::copy_n(p.q.data() + (b * p.max_len + pos) * H * d, H * d, q.data() + t * H * d);
      }
    for (int64_t b = 0; b < B; ++b) lengths[size_t(b)] += chunks[size_t(b)];
    cache.set_lengths(lengths);  // poisons only past the new lengths: the cached tokens stay
    for (int64_t b = 0; b < B; ++b)
      for (int64_t pos = lengths[size_t(b)] - chunks[size_t(b)]; pos < lengths[size_t(b)]; ++pos)
        slots.push_back(cache.slot(b, pos));
    cache.store_slots(k, v, slots, 0);
    out.poison();
    prefill_with_cache_cpu(q, chunks, cache, 0, out);
    if (check_oracle) {
      const Comparison c = compare_to_oracle(out, prefill_with_cache_reference(q, chunks, cache),  // key(), value():
                                             tolerance_for(format.precision()));                    // dequantized
      EXPECT_TRUE(c.ok) << what << ", call " << call << ":\n" << c.report();
    }
    t = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t pos = lengths[size_t(b)] - chunks[size_t(b)]; pos < lengths[size_t(b)]; ++pos, ++t)
        std::copy_n(out.data() + t * H * d, H * d, all.data() + (b * p.max_len + pos) * H * d);
  }
  EXPECT_EQ(lengths, p.lengths) << what << ": the schedule does not cover every token";
  return all;
}

// Success when every query token's output is the same bits in @p got as in @p want.
::testing::AssertionResult same_outputs(const Problem& p, const Tensor<float>& got, const Tensor<float>& want) {
  const int64_t row = p.heads * p.head_dim;
  int64_t differing = 0;
  std::string first;
  for (size_t b = 0; b < p.lengths.size(); ++b)
    for (int64_t pos = 0; pos < p.lengths[b]; ++pos) {
      const int64_t at = (int64_t(b) * p.max_len + pos) * row;
      if (std::memcmp(got.data() + at, want.data() + at, size_t(row) * sizeof(float)) == 0) continue;
      if (differing++ > 0) continue;
      for (int64_t i = 0; i < row; ++i)
        if (std::bit_cast<uint32_t>(got[at + i]) != std::bit_cast<uint32_t>(want[at + i])) {
          std::ostringstream s;
          s.precision(9);
          s << "sequence " << b << " (length " << p.lengths[b] << "), position " << pos << ", head "
            << i / p.head_dim << ", element " << i % p.head_dim << ": " << got[at + i] << " vs " << want[at + i];
          first = s.str();
          break;
        }
    }
  if (differing == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differing << " query tokens differ in some bit; first: " << first;
}

// Every schedule on every layout gives each query the bits of the whole-length call on the
// contiguous cache, which equals the float64 oracle; the cache in @p format.
void expect_invariant(int64_t heads, int64_t kv_heads, int64_t head_dim, const KvFormat& format = KvFormat::fp32()) {
  SeededRng rng;
  const std::string config = format.name() + ", heads " + std::to_string(heads) + "/" + std::to_string(kv_heads) +
                             ", head_dim " + std::to_string(head_dim);
  const Problem p = make_problem(rng, heads, kv_heads, head_dim);
  const Schedule chunked = random_chunks(p, rng);
  const Tensor<float> base = run(p, format, whole(p), 0, rng.seed(), true, config + ", contiguous, whole");
  for (const int64_t block_size : {0, 1, 7, 16}) {
    const std::string layout =
        config + ", " + (block_size == 0 ? std::string("contiguous") : "paged block " + std::to_string(block_size));
    if (block_size > 0) {
      EXPECT_TRUE(same_outputs(p, run(p, format, whole(p), block_size, rng.seed() + 1, false, layout), base))
          << layout << ", whole lengths vs contiguous";
    }
    EXPECT_TRUE(same_outputs(p, run(p, format, chunked, block_size, rng.seed() + 2, false, layout), base))
        << layout << ", random chunks (" << chunked.size() << " calls) vs whole lengths on the contiguous cache";
    EXPECT_TRUE(same_outputs(p, run(p, format, one_at_a_time(p), block_size, rng.seed() + 3, false, layout), base))
        << layout << ", one token at a time vs whole lengths on the contiguous cache";
  }
}

TEST(PrefillWithCacheInvariance, GroupsOf4HeadDim64) { expect_invariant(8, 2, 64); }
TEST(PrefillWithCacheInvariance, NoGroupsHeadDim80) { expect_invariant(6, 6, 80); }
TEST(PrefillWithCacheInvariance, Stories260KShapeGroupsOf2HeadDim8) { expect_invariant(8, 4, 8); }
TEST(PrefillWithCacheInvariance, Int8GroupsOf4HeadDim64) { expect_invariant(8, 2, 64, KvFormat::int8()); }
TEST(PrefillWithCacheInvariance, Int8Fp16ScalesNoGroupsHeadDim80) {
  expect_invariant(6, 6, 80, KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16));
}
TEST(PrefillWithCacheInvariance, Fp8GroupsOf2HeadDim8) { expect_invariant(8, 4, 8, KvFormat::fp8()); }
TEST(PrefillWithCacheInvariance, Fp8GroupsOf4HeadDim64) { expect_invariant(8, 2, 64, KvFormat::fp8()); }

}  // namespace
}  // namespace inferlab
