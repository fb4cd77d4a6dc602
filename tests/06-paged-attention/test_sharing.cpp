// Chapter 06 end to end: the block manager's bookkeeping (runtime/paged) over the sequences'
// own tables (sequence_tables.h), applied to a paged KV cache as the model runner applies a step
// plan (copy, poison the fresh blocks, map the table), then decoded by the real decode versions.
//  - Copy-on-write: fork a sequence, append different tokens to parent and child; both decode
//    exactly as if each had a private cache, the shared full blocks were never copied, and the
//    one shared partial block was copied once.
//  - Prefix cache: a second prompt sharing its first k full blocks takes them (allocating only
//    the rest, computing only the rest) and decodes exactly as without caching.
// A token's K and V are a function of its whole prefix (as in a model), drawn from a generator
// seeded by the prefix, so identical prefixes have identical K/V — what makes a cached block valid.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <vector>

#include "common/compare.h"
#include "common/rng.h"
#include "kernels/registry.h"
#include "runtime/paged/block_manager.h"
#include "tests/06-paged-attention/sequence_tables.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using paged::BlockManager;
using paged::BlockStatus;
using Tables = testing::SequenceTables<BlockManager>;

// What the model runner does with a step plan's block operations (LlamaModel::forward): the
// copy first, then the fresh blocks poisoned, then @p seq's table mapped into cache row @p seq.
void apply(KvCache& cache, const Tables& manager, int64_t seq, const std::vector<int32_t>& fresh,
           const std::optional<paged::BlockCopy>& copy = std::nullopt) {
  if (copy) cache.copy_block(copy->from, copy->to);
  for (const int32_t block : fresh)
    if (!copy || block != copy->to) cache.poison_block(block);
  cache.set_block_table(seq, manager.table(seq));
}

constexpr int64_t kKvHeads = 2, kHeads = 4, kDim = 16, kBlock = 4, kMaxLen = 48;

// K and V rows [1, kKvHeads, kDim] (one token, as store_slots wants it) of the last token of
// @p prefix: a function of the whole prefix.
std::pair<Tensor<float>, Tensor<float>> kv_of(const std::vector<int32_t>& prefix, uint64_t salt) {
  uint64_t h = salt;
  for (const int32_t t : prefix) h = (h ^ uint64_t(uint32_t(t))) * 1099511628211ull;
  Rng rng(h);
  return {rng.normal_tensor({1, kKvHeads, kDim}), rng.normal_tensor({1, kKvHeads, kDim})};
}

// The tokens' K and V as prefill() wants them: [kKvHeads, n, kDim].
std::pair<Tensor<float>, Tensor<float>> kv_of_all(const std::vector<int32_t>& tokens, uint64_t salt) {
  const int64_t n = int64_t(tokens.size());
  Tensor<float> k({kKvHeads, n, kDim}), v({kKvHeads, n, kDim});
  for (int64_t t = 0; t < n; ++t) {
    const auto [kt, vt] = kv_of({tokens.begin(), tokens.begin() + t + 1}, salt);
    for (int64_t g = 0; g < kKvHeads; ++g)
      for (int64_t c = 0; c < kDim; ++c) {
        k[(g * n + t) * kDim + c] = kt[g * kDim + c];
        v[(g * n + t) * kDim + c] = vt[g * kDim + c];
      }
  }
  return {k, v};
}

// A private contiguous one-sequence cache holding @p tokens.
KvCache private_cache(const std::vector<int32_t>& tokens, KvFormat format, uint64_t salt) {
  KvCache cache({1, kKvHeads, kMaxLen, kDim}, format);
  const auto [k, v] = kv_of_all(tokens, salt);
  cache.prefill(0, k, v);
  return cache;
}

// Writes the K/V of tokens [from, tokens.size()) of cache row @p row at their slots.
void write_tokens(KvCache& cache, int64_t row, const std::vector<int32_t>& tokens, int64_t from, uint64_t salt) {
  for (int64_t t = from; t < int64_t(tokens.size()); ++t) {
    const auto [k, v] = kv_of({tokens.begin(), tokens.begin() + t + 1}, salt);
    const std::vector<int64_t> slot{cache.slot(row, t)};
    cache.store_slots(k, v, slot, 0);
  }
}

// Row @p row of a decode of @p cache by @p version equals the decode of @p alone (one sequence).
void expect_decodes_like(const DecodeVersion& version, const KvCache& cache, int64_t row, const KvCache& alone,
                         Rng& rng) {
  const int64_t B = cache.shape().batch;
  const Tensor<float> q = rng.normal_tensor({B, kHeads, kDim});
  Tensor<float> out(q.shape()), out_alone({1, kHeads, kDim});
  out.poison();
  out_alone.poison();
  version.run(q, cache, out);
  Tensor<float> q_alone({1, kHeads, kDim});
  std::copy_n(q.data() + row * kHeads * kDim, kHeads * kDim, q_alone.data());
  version.run(q_alone, alone, out_alone);
  // The same values in the same order of keys: the oracle of the private cache bounds both.
  const Tensor<double> want = decode_reference(q_alone, alone);
  Tensor<float> mine({1, kHeads, kDim});
  std::copy_n(out.data() + row * kHeads * kDim, kHeads * kDim, mine.data());
  const Comparison c = compare_to_oracle(mine, want, tolerance_for(version.precision));
  EXPECT_TRUE(c.ok) << version.name << " (" << to_string(version.input) << "), sequence " << row << ":\n" << c.report();
  const Comparison same = compare_to_oracle(out_alone, want, tolerance_for(version.precision));
  EXPECT_TRUE(same.ok) << "the private cache itself: " << same.report();
}

std::vector<KvFormat> formats() {
  return {KvFormat::fp32(), KvFormat::fp16(), KvFormat::int8(), KvFormat::fp8()};
}

TEST(Sharing, ForkThenCopyOnWriteDecodesAsPrivateCaches) {
  testing::SeededRng rng;
  for (const KvFormat& format : formats()) {
    const uint64_t salt = rng.seed();
    Tables manager(BlockManager(24, kBlock));
    KvCache cache({2, kKvHeads, kMaxLen, kDim}, format, KvPaging{kBlock, 24});
    std::vector<int32_t> parent;
    for (int i = 0; i < 10; ++i) parent.push_back(int32_t(rng.integer(0, 99)));  // 2 full blocks + 2 tokens

    const paged::PromptAllocation prompt = manager.allocate_prompt(0, parent);
    ASSERT_EQ(prompt.status, BlockStatus::ok);
    apply(cache, manager, 0, prompt.new_blocks);
    const auto [k, v] = kv_of_all(parent, salt);
    cache.prefill(0, k, v);
    manager.mark_computed(0, 10);
    manager.fork(0, 1);
    cache.set_block_table(1, manager.table(1));
    cache.set_lengths({10, 10});
    const std::vector<int32_t> shared = manager.table(0);

    std::vector<int32_t> child = parent;
    int copies = 0;
    for (int step = 0; step < 7; ++step)
      for (const int64_t seq : {0, 1}) {
        std::vector<int32_t>& tokens = seq == 0 ? parent : child;
        tokens.push_back(int32_t(100 + 2 * step + seq));  // parent and child diverge
        const paged::SlotAllocation slot = manager.append_slot(seq, tokens.back());
        ASSERT_EQ(slot.status, BlockStatus::ok);
        copies += slot.copy.has_value();
        apply(cache, manager, seq, slot.new_block ? std::vector<int32_t>{*slot.new_block} : std::vector<int32_t>{},
              slot.copy);
        const auto [kt, vt] = kv_of(tokens, salt);
        const std::vector<int64_t> where{slot.slot};
        cache.store_slots(kt, vt, where, 0);
        EXPECT_EQ(where[0], cache.slot(seq, int64_t(tokens.size()) - 1)) << "the manager's slot is the table's";
        manager.check_invariants();
      }
    cache.set_lengths({int64_t(parent.size()), int64_t(child.size())});
    EXPECT_EQ(copies, 1) << "exactly the shared, partly filled block is copied once";
    EXPECT_EQ(manager.table(0)[0], shared[0]);
    EXPECT_EQ(manager.table(1)[0], shared[0]) << "a shared full block was copied";
    EXPECT_EQ(manager.table(1)[1], shared[1]) << "a shared full block was copied";
    for (const DecodeVersion& version : decode_versions()) {
      if (version.backend != Backend::cpu || version.input != format.dtype) continue;
      expect_decodes_like(version, cache, 0, private_cache(parent, format, salt), rng);
      expect_decodes_like(version, cache, 1, private_cache(child, format, salt), rng);
    }
  }
}

TEST(Sharing, APromptWithCachedFullBlocksComputesOnlyTheRest) {
  testing::SeededRng rng;
  for (const KvFormat& format : formats()) {
    const uint64_t salt = rng.seed();
    Tables manager(BlockManager(20, kBlock));
    KvCache cache({2, kKvHeads, kMaxLen, kDim}, format, KvPaging{kBlock, 20});
    std::vector<int32_t> first;
    for (int i = 0; i < 14; ++i) first.push_back(int32_t(rng.integer(0, 99)));  // 3 full blocks + 2
    const paged::PromptAllocation a = manager.allocate_prompt(0, first);
    apply(cache, manager, 0, a.new_blocks);
    const auto [k, v] = kv_of_all(first, salt);
    cache.prefill(0, k, v);
    manager.mark_computed(0, 14);

    std::vector<int32_t> second(first.begin(), first.begin() + 12);  // the 3 full blocks
    for (int i = 0; i < 5; ++i) second.push_back(int32_t(200 + i));
    const int64_t free_before = manager.num_free_blocks();
    const paged::PromptAllocation b = manager.allocate_prompt(1, second);
    ASSERT_EQ(b.status, BlockStatus::ok);
    EXPECT_EQ(b.cached_tokens, 12);
    EXPECT_EQ(int64_t(b.new_blocks.size()), 2) << "17 tokens = 5 blocks, 3 of them cached";
    EXPECT_EQ(free_before - manager.num_free_blocks(), 2);
    apply(cache, manager, 1, b.new_blocks);
    write_tokens(cache, 1, second, b.cached_tokens, salt);  // compute only the uncached tokens
    cache.set_lengths({14, 17});
    manager.mark_computed(1, 17);
    manager.check_invariants();
    for (int i = 0; i < 3; ++i) EXPECT_EQ(manager.table(1)[size_t(i)], manager.table(0)[size_t(i)]);
    for (const DecodeVersion& version : decode_versions()) {
      if (version.backend != Backend::cpu || version.input != format.dtype) continue;
      expect_decodes_like(version, cache, 1, private_cache(second, format, salt), rng);
      expect_decodes_like(version, cache, 0, private_cache(first, format, salt), rng);
    }
  }
}

}  // namespace
}  // namespace inferlab
