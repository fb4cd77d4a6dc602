// Wrong chapter-06 paged decodes, run through the very check that every real decode version
// passes on a paged cache (tests/support/decode_check.h with DecodeCase::block_size: generation
// replayed step by step against the chapter-02 causal prefill, blocks scattered, rows past each
// length poisoned). Each fixture is a plain decode loop that finds a key's row itself, with one
// mistake in the block-table lookup: it must be rejected, and the same loop without the mistake
// must pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/registry.h"
#include "tests/support/decode_check.h"

namespace inferlab {
namespace {

enum class Lookup {
  correct,        // block_table[b][t / block_size], offset t % block_size
  off_by_one,     // block_table[b][t / block_size + 1] (clamped to the table): the next block's rows
  offset_ignored  // the right block, but always its first row: the in-block offset forgotten
};

// The row of token t of (b, g) as @p lookup computes it.
int64_t row_of(Lookup lookup, const PagedLayout& layout, int64_t b, int64_t g, int64_t t) {
  int64_t entry = t / layout.block_size;
  if (lookup == Lookup::off_by_one) entry = std::min(entry + 1, layout.max_blocks_per_seq - 1);
  const int64_t block = layout.block_table[b * layout.max_blocks_per_seq + entry];
  const int64_t offset = lookup == Lookup::offset_ignored ? 0 : t % layout.block_size;
  return (block * layout.num_kv_heads + g) * layout.block_size + offset;
}

DecodeFn paged_decode(Lookup lookup) {
  return [lookup](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    const DecodeShape s = decode_shape(q, cache);
    const KvRows<float, float, PagedLayout> rows = cache.rows<float, float, PagedLayout>();
    const int64_t d = s.head_dim;
    std::vector<float> p;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.num_heads; ++h) {
        const int64_t g = h / s.group_size(), L = cache.length(b);
        const float* qh = q.data() + (b * s.num_heads + h) * d;
        p.assign(size_t(L), 0.0f);
        float max = -INFINITY, sum = 0.0f;
        for (int64_t t = 0; t < L; ++t) {
          const float* k = rows.k + row_of(lookup, rows.layout, b, g, t) * d;
          for (int64_t c = 0; c < d; ++c) p[size_t(t)] += qh[c] * k[c];
          p[size_t(t)] /= std::sqrt(float(d));
          max = std::max(max, p[size_t(t)]);
        }
        for (float& x : p) sum += (x = std::exp(x - max));
        float* o = out.data() + (b * s.num_heads + h) * d;
        std::fill(o, o + d, 0.0f);
        for (int64_t t = 0; t < L; ++t) {
          const float* v = rows.v + row_of(lookup, rows.layout, b, g, t) * d;
          for (int64_t c = 0; c < d; ++c) o[c] += p[size_t(t)] / sum * v[c];
        }
      }
  };
}

testing::DecodeCase paged_case(int64_t block_size) {
  testing::DecodeCase c{{19, 4, 33}, 3, 4, 2, 32};
  c.block_size = block_size;
  return c;
}

const KvAppendFn& cpu_append() {
  return kv_append_version_for(Backend::cpu, KvDtype::fp32).run;
}

TEST(WrongCh06Paged, LookupWithoutMistakesPasses) {
  for (const int64_t block_size : {1, 2, 7, 16})
    EXPECT_TRUE(testing::decode_steps_match_prefill(paged_decode(Lookup::correct), KvDtype::fp32, cpu_append(),
                                                    paged_case(block_size)));
}

TEST(WrongCh06Paged, BlockTableOffByOneIsRejected) {
  for (const int64_t block_size : {1, 2, 7, 16})
    EXPECT_FALSE(testing::decode_steps_match_prefill(paged_decode(Lookup::off_by_one), KvDtype::fp32, cpu_append(),
                                                     paged_case(block_size)))
        << "block size " << block_size;
}

TEST(WrongCh06Paged, InBlockOffsetIgnoredIsRejected) {
  for (const int64_t block_size : {2, 7, 16})  // (block size 1 has no offset to forget)
    EXPECT_FALSE(testing::decode_steps_match_prefill(paged_decode(Lookup::offset_ignored), KvDtype::fp32, cpu_append(),
                                                     paged_case(block_size)))
        << "block size " << block_size;
}

}  // namespace
}  // namespace inferlab
