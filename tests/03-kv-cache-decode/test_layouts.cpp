// A layout is a mapping, not a kernel: chapter 03's CPU decode passes (cpu_decode_keys.h) run
// unchanged over the paged layout of kv_layout.h — rows scattered over a pool of blocks in
// shuffled order — and give the float64 oracle of the same tokens held contiguously. Block sizes
// 1, 2, 7 and 16 cut the 4-key steps of the passes at every offset; GQA and a ragged batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "common/compare.h"
#include "kernels/decode/cpu_decode_keys.h"
#include "kernels/decode/decode.h"
#include "kernels/kv/kv_layout.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

// The rows of @p cache's K and V (elements of T) copied into a pool of blocks under @p layout,
// whose block table the caller filled; returns {K pool, V pool}.
template <class T>
std::pair<std::vector<T>, std::vector<T>> paged_copy(const KvCache& cache, std::span<const T> k, std::span<const T> v,
                                                     const PagedLayout& layout, int64_t num_blocks) {
  const KvCacheShape& s = cache.shape();
  std::vector<T> k_pool(size_t(num_blocks * s.num_kv_heads * layout.block_size * s.head_dim));
  std::vector<T> v_pool(k_pool.size());
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t g = 0; g < s.num_kv_heads; ++g)
      for (int64_t t = 0; t < cache.length(b); ++t) {
        const int64_t from = cache.layout().row(b, g, t) * s.head_dim, to = layout.row(b, g, t) * s.head_dim;
        std::copy_n(k.data() + from, s.head_dim, k_pool.data() + to);
        std::copy_n(v.data() + from, s.head_dim, v_pool.data() + to);
      }
  return {std::move(k_pool), std::move(v_pool)};
}

template <class T>
void expect_paged_equals_oracle(KvDtype dtype, std::span<const T> (KvCache::*k_view)() const,
                                std::span<const T> (KvCache::*v_view)() const) {
  testing::SeededRng rng;
  const std::vector<int64_t> lengths{37, 1, 64, 18};
  const int64_t B = int64_t(lengths.size()), G = 2, H = 8, d = 80, max_len = 64;
  const Tensor<float> k = rng.normal_tensor({B, G, max_len, d}), v = rng.normal_tensor({B, G, max_len, d});
  const KvCache cache = make_kv_cache(k, v, lengths, dtype);
  const Tensor<float> q = rng.normal_tensor({B, H, d});
  const Tensor<double> expected = decode_reference(q, cache);

  for (const int64_t block_size : {int64_t(1), int64_t(2), int64_t(7), int64_t(16)}) {
    // Every sequence's blocks, drawn from a shuffled pool: no two logical neighbours adjacent
    // unless the shuffle says so, and the pool larger than what the batch uses.
    const int64_t per_seq = (max_len + block_size - 1) / block_size, num_blocks = B * per_seq + 3;
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937_64(rng.seed()));
    std::vector<int32_t> table(ids.begin(), ids.begin() + B * per_seq);
    const PagedLayout layout{table.data(), per_seq, block_size, G};
    const auto [k_pool, v_pool] = paged_copy<T>(cache, (cache.*k_view)(), (cache.*v_view)(), layout, num_blocks);

    KvRows<T, float, PagedLayout> rows;
    rows.k = k_pool.data();
    rows.v = v_pool.data();
    rows.lengths = cache.lengths().data();
    rows.layout = layout;
    rows.head_dim = d;
    Tensor<float> out(q.shape());
    out.poison();
    const auto unscaled = [](int64_t, int64_t) { return decode_keys::Unscaled{}; };
    decode_keys::decode_groups(q, decode_shape(q, cache), rows, cache.max_length(), unscaled, out);
    const Comparison c = compare_to_oracle(out, expected, tolerance_for(precision_of(dtype)));
    EXPECT_TRUE(c.ok) << to_string(dtype) << ", block size " << block_size << ": " << c.report();
  }
}

TEST(KvLayouts, CpuDecodePassesRunOverAPagedPoolUnchangedFp32) {
  expect_paged_equals_oracle<float>(KvDtype::fp32, &KvCache::k_fp32, &KvCache::v_fp32);
}

TEST(KvLayouts, CpuDecodePassesRunOverAPagedPoolUnchangedFp16) {
  expect_paged_equals_oracle<uint16_t>(KvDtype::fp16, &KvCache::k_fp16, &KvCache::v_fp16);
}

// The paged mapping itself: rows inside one block are consecutive, a run ends at its block's
// end, and the block table decides where each block lives.
TEST(KvLayouts, PagedRowsAndRuns) {
  const std::vector<int32_t> table{5, 2, 7, 0, 1, 3};  // 2 sequences × 3 blocks
  const PagedLayout layout{table.data(), 3, 4, 2};
  EXPECT_EQ(layout.row(0, 0, 0), (5 * 2 + 0) * 4);
  EXPECT_EQ(layout.row(0, 1, 6), (2 * 2 + 1) * 4 + 2);
  EXPECT_EQ(layout.row(1, 0, 9), (3 * 2 + 0) * 4 + 1);
  EXPECT_EQ(layout.run(0, 1, 6).length, 2);
  EXPECT_EQ(layout.run(1, 0, 8).length, 4);
  EXPECT_EQ(layout.run(1, 0, 8).row, layout.row(1, 0, 8));
}

}  // namespace
}  // namespace inferlab
