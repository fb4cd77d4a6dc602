// Chapter 06's host-side bookkeeping: the chained prefix hash, the block pool (free list,
// refcounts, prefix cache, LRU eviction) and the block manager (block tables, fork,
// copy-on-write, prefix-cache hits), each operation followed by check_invariants(); then a
// property test of random operations against a plain reference model (random_operations.h,
// block_model.h).
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/paged/block_manager.h"
#include "runtime/paged/block_pool.h"
#include "runtime/paged/prefix_hash.h"
#include "tests/06-paged-attention/block_manager_check.h"
#include "tests/06-paged-attention/random_operations.h"
#include "tests/06-paged-attention/sequence_tables.h"
#include "tests/support/seeded.h"

namespace inferlab::paged {

// Reaches into the pool and the manager to break one rule at a time: check_invariants() must
// name it. (Declared a friend by both classes; nothing else uses it.)
struct BlockPoolTestAccess {
  static std::vector<int32_t>& free_list(BlockPool& pool) { return pool.free_list_; }
  static std::vector<int32_t>& refcount(BlockPool& pool) { return pool.refcount_; }
  static std::unordered_map<uint64_t, int32_t>& block_of_hash(BlockPool& pool) { return pool.block_of_hash_; }
};
struct BlockManagerTestAccess {
  static BlockPool& pool(BlockManager& manager) { return manager.pool_; }
};

namespace {

using inferlab::testing::invariants_hold;
using Tables = testing::SequenceTables<BlockManager>;

// Expects @p call to throw E with a message containing @p needle.
template <class E, class Call>
void expect_throw_naming(Call&& call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one naming '" << needle << "'";
  } catch (const E& error) {
    EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
  }
}

std::vector<int32_t> iota_tokens(int32_t first, int32_t count) {
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < count; ++i) tokens.push_back(first + i);
  return tokens;
}

Tables make_manager(int64_t num_blocks, int64_t block_size) {
  return Tables(BlockManager(num_blocks, block_size));
}

// Everything a failed allocation must leave as it was.
struct Snapshot {
  std::vector<std::vector<int32_t>> tables, tokens;
  std::vector<int32_t> refcounts;
  std::vector<std::optional<uint64_t>> hashes;
  std::vector<int32_t> eviction_order;
  int64_t num_free, lookups, hits, evictions;
  bool operator==(const Snapshot&) const = default;
};

Snapshot snapshot(const Tables& manager) {
  Snapshot s{};
  for (const int64_t seq : manager.sequences()) {
    s.tables.push_back(manager.table(seq));
    s.tokens.push_back(manager.tokens(seq));
  }
  const BlockPool& pool = manager.pool();
  for (int32_t block = 0; block < pool.num_blocks(); ++block) {
    s.refcounts.push_back(pool.refcount(block));
    s.hashes.push_back(pool.hash_of(block));
  }
  s.eviction_order = pool.evictable_blocks();
  s.num_free = pool.num_free();
  s.lookups = pool.lookups();
  s.hits = pool.hits();
  s.evictions = pool.evictions();
  return s;
}

// Allocates @p prompt for @p seq and marks it all computed (as a finished prefill would).
PromptAllocation prefill(Tables& manager, int64_t seq, const std::vector<int32_t>& prompt) {
  PromptAllocation allocation = manager.allocate_prompt(seq, prompt);
  if (allocation.status == BlockStatus::ok) manager.mark_computed(seq, int64_t(prompt.size()));
  EXPECT_TRUE(invariants_hold(manager));
  return allocation;
}

// ---- the chained prefix hash ----

TEST(PrefixHash, HashesOnlyFullBlocksChainedFromTheDocumentedParent) {
  const std::vector<int32_t> tokens = iota_tokens(100, 11);
  for (int64_t length = 0; length <= 11; ++length)
    EXPECT_EQ(prefix_block_hashes(std::span(tokens).first(size_t(length)), 4).size(), size_t(length / 4)) << length;
  const auto hashes = prefix_block_hashes(tokens, 4);
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hashes[0], block_hash(kFirstBlockParent, std::span(tokens).first(4)));
  EXPECT_EQ(hashes[1], block_hash(hashes[0], std::span(tokens).subspan(4, 4)));
  EXPECT_EQ(prefix_block_hashes(std::span(tokens).first(8), 4), hashes);  // a prefix's hashes are a prefix
}

TEST(PrefixHash, ChainedHashDiffersWhenAnEarlierBlockDiffers) {
  std::vector<int32_t> first = iota_tokens(1, 8), second = first;
  second[0] = 99;  // block 1 differs; block 2 holds the same tokens in both
  const auto a = prefix_block_hashes(first, 4), b = prefix_block_hashes(second, 4);
  EXPECT_NE(a[0], b[0]);
  EXPECT_NE(a[1], b[1]) << "block 2 after a different block 1 must not hit the cache";
  EXPECT_EQ(block_hash(kFirstBlockParent, std::span(first).subspan(4)),
            block_hash(kFirstBlockParent, std::span(second).subspan(4)));  // unchained, they would
  EXPECT_NE(block_hash(7, std::vector<int32_t>{1, 2}), block_hash(7, std::vector<int32_t>{2, 1}));  // order counts
}

TEST(PrefixHash, RejectsABlockSizeBelowOne) {
  expect_throw_naming<std::invalid_argument>([] { prefix_block_hashes(std::vector<int32_t>{1}, 0); }, "block_size = 0");
}

// ---- the block pool ----

TEST(BlockPool, HandsOutLowestIdsFirstThenRunsOutAsATypedOutcome) {
  BlockPool pool(3, 16);
  EXPECT_EQ(pool.num_free(), 3);
  for (int32_t expected = 0; expected < 3; ++expected) {
    EXPECT_EQ(pool.allocate(), expected);
    EXPECT_EQ(pool.refcount(expected), 1);
    pool.check_invariants();
  }
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_EQ(pool.allocate(), std::nullopt);  // running out is an outcome, not an exception
  pool.check_invariants();
  pool.release(1);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.allocate(), 1);
  pool.check_invariants();
}

TEST(BlockPool, RetainAndReleaseCountHolders) {
  BlockPool pool(2, 4);
  const int32_t block = *pool.allocate();
  pool.retain(block);  // a fork
  EXPECT_EQ(pool.refcount(block), 2);
  pool.release(block);
  EXPECT_EQ(pool.refcount(block), 1);
  EXPECT_EQ(pool.num_free(), 1);
  pool.release(block);
  EXPECT_EQ(pool.num_free(), 2);
  pool.check_invariants();
}

TEST(BlockPool, DoubleFreeAndRetainOfAFreeBlockAreLogicErrorsNamingTheBlock) {
  BlockPool pool(4, 4);
  const int32_t block = *pool.allocate();
  pool.release(block);
  expect_throw_naming<std::logic_error>([&] { pool.release(block); }, "release of block 0");
  expect_throw_naming<std::logic_error>([&] { pool.release(3); }, "release of block 3, which nobody holds");
  expect_throw_naming<std::logic_error>([&] { pool.retain(2); }, "retain of block 2");
  pool.check_invariants();  // the refused calls changed nothing
}

TEST(BlockPool, BadSizesAndIdsAreInvalidArgumentsNamingThem) {
  expect_throw_naming<std::invalid_argument>([] { BlockPool(0, 4); }, "num_blocks = 0");
  expect_throw_naming<std::invalid_argument>([] { BlockPool(4, -1); }, "block_size = -1");
  expect_throw_naming<std::invalid_argument>([] { BlockPool(int64_t{1} << 31, 4); }, "num_blocks = 2147483648");
  BlockPool pool(4, 4);
  expect_throw_naming<std::invalid_argument>([&] { pool.release(4); }, "block = 4");
  expect_throw_naming<std::invalid_argument>([&] { pool.retain(-1); }, "block = -1");
  expect_throw_naming<std::invalid_argument>([&] { (void)pool.refcount(9); }, "block = 9");
}

TEST(BlockPool, AHashedBlockAtRefcountZeroIsEvictableNotFree) {
  BlockPool pool(2, 4);
  const int32_t block = *pool.allocate();
  EXPECT_TRUE(pool.register_hash(block, 42));
  pool.release(block);
  pool.check_invariants();
  EXPECT_TRUE(pool.is_evictable(block));
  EXPECT_EQ(pool.num_evictable(), 1);
  EXPECT_EQ(pool.num_free(), 2);  // evictable blocks can still be allocated
  EXPECT_EQ(pool.cached_block(42), block);
  EXPECT_EQ(pool.refcount(block), 0);  // cached_block() takes nothing

  EXPECT_EQ(pool.lookup(42), block);  // a hit revives it
  EXPECT_EQ(pool.refcount(block), 1);
  EXPECT_FALSE(pool.is_evictable(block));
  EXPECT_EQ(pool.lookup(7), std::nullopt);
  EXPECT_EQ(pool.hits(), 1);
  EXPECT_EQ(pool.lookups(), 2);
  pool.check_invariants();
}

TEST(BlockPool, AllocateTakesFreeBlocksFirstThenEvictsLeastRecentlyUsed) {
  BlockPool pool(4, 4);
  for (int32_t block = 0; block < 4; ++block) {
    ASSERT_EQ(pool.allocate(), block);
    if (block < 3) {
      ASSERT_TRUE(pool.register_hash(block, 100 + uint64_t(block)));
    }
  }
  for (const int32_t block : {1, 0, 3, 2}) pool.release(block);  // block 3 is unhashed: free
  pool.check_invariants();
  EXPECT_EQ(pool.evictable_blocks(), (std::vector<int32_t>{1, 0, 2}));
  EXPECT_EQ(pool.allocate(), 3);  // the free list first
  EXPECT_EQ(pool.evictions(), 0);
  EXPECT_EQ(pool.lookup(100), 0);  // a hit moves block 0 out of the LRU list …
  pool.release(0);                 // … and back in as the most recently used
  EXPECT_EQ(pool.evictable_blocks(), (std::vector<int32_t>{1, 2, 0}));
  for (const int32_t expected : {1, 2, 0}) {
    EXPECT_EQ(pool.allocate(), expected);
    EXPECT_EQ(pool.hash_of(expected), std::nullopt);  // evicted: its hash is dropped
    pool.check_invariants();
  }
  EXPECT_EQ(pool.evictions(), 3);
  EXPECT_EQ(pool.lookup(101), std::nullopt);
  EXPECT_EQ(pool.allocate(), std::nullopt);
}

TEST(BlockPool, RegisterHashKeepsTheFirstBlockOfAPrefix) {
  BlockPool pool(3, 4);
  const int32_t first = *pool.allocate(), twin = *pool.allocate();
  EXPECT_TRUE(pool.register_hash(first, 5));
  EXPECT_TRUE(pool.register_hash(first, 5));  // again under its own hash: a no-op
  EXPECT_FALSE(pool.register_hash(twin, 5));  // the same prefix computed twice: the twin stays unhashed
  EXPECT_EQ(pool.hash_of(twin), std::nullopt);
  expect_throw_naming<std::logic_error>([&] { pool.register_hash(first, 6); }, "already registered under 5");
  expect_throw_naming<std::logic_error>([&] { pool.register_hash(2, 6); },
                                        "register_hash on block 2, which nobody holds");
  pool.release(twin);
  EXPECT_FALSE(pool.is_evictable(twin));  // unhashed: straight back to the free list
  pool.check_invariants();
}

TEST(BlockPool, CheckInvariantsNamesEachBrokenRule) {
  using Access = BlockPoolTestAccess;
  {
    BlockPool pool(3, 4);
    const int32_t block = *pool.allocate();
    Access::free_list(pool).push_back(block);
    expect_throw_naming<std::logic_error>([&] { pool.check_invariants(); }, "block 0 is both free and referenced");
  }
  {
    BlockPool pool(3, 4);
    Access::free_list(pool).push_back(2);
    expect_throw_naming<std::logic_error>([&] { pool.check_invariants(); }, "block 2 appears twice in the free list");
  }
  {
    BlockPool pool(3, 4);
    const int32_t block = *pool.allocate();
    Access::refcount(pool)[size_t(block)] = 0;  // dropped without going back anywhere
    expect_throw_naming<std::logic_error>([&] { pool.check_invariants(); },
                                          "block 0 is lost: neither free, nor referenced, nor evictable");
  }
  {
    BlockPool pool(3, 4);
    const int32_t a = *pool.allocate(), b = *pool.allocate();
    pool.register_hash(a, 11);
    Access::block_of_hash(pool)[11] = b;
    expect_throw_naming<std::logic_error>([&] { pool.check_invariants(); },
                                          "block 0 says its hash is 11 but the hash map maps it to block 1");
  }
  {
    BlockPool pool(3, 4);
    const int32_t block = *pool.allocate();
    pool.register_hash(block, 11);
    pool.release(block);
    Access::refcount(pool)[size_t(block)] = 1;
    expect_throw_naming<std::logic_error>([&] { pool.check_invariants(); }, "block 0 is evictable with refcount 1");
  }
}

// ---- the block manager ----

TEST(BlockManager, AllocateForkAndFree) {
  Tables manager(BlockManager(8, 4));
  EXPECT_EQ(manager.blocks_needed(0), 0);
  EXPECT_EQ(manager.blocks_needed(9), 3);
  const PromptAllocation a = prefill(manager, 7, iota_tokens(1, 9));
  ASSERT_EQ(a.status, BlockStatus::ok);
  EXPECT_EQ(a.cached_tokens, 0);
  EXPECT_EQ(a.new_blocks, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(manager.table(7), a.new_blocks);
  EXPECT_EQ(manager.num_tokens(7), 9);
  EXPECT_EQ(manager.num_free_blocks(), 5);

  manager.fork(7, 8);
  EXPECT_TRUE(invariants_hold(manager));
  EXPECT_EQ(manager.table(8), manager.table(7));
  EXPECT_EQ(manager.tokens(8), manager.tokens(7));
  for (const int32_t block : manager.table(7)) EXPECT_EQ(manager.pool().refcount(block), 2);
  EXPECT_EQ(manager.num_free_blocks(), 5);  // a fork takes no block
  EXPECT_EQ(manager.sequences(), (std::vector<int64_t>{7, 8}));

  manager.free(7);
  EXPECT_TRUE(invariants_hold(manager));
  EXPECT_FALSE(manager.has(7));
  EXPECT_EQ(manager.num_free_blocks(), 5);  // the fork still holds every block
  manager.free(8);
  EXPECT_TRUE(invariants_hold(manager));
  EXPECT_EQ(manager.num_free_blocks(), 8);
}

TEST(BlockManager, UnknownOrDuplicateSequencesAndBadSizesAreInvalidArguments) {
  Tables manager(BlockManager(4, 4));
  prefill(manager, 5, {1, 2});
  expect_throw_naming<std::invalid_argument>([&] { manager.allocate_prompt(5, std::vector<int32_t>{1}); }, "seq = 5");
  expect_throw_naming<std::invalid_argument>([&] { manager.append_slot(6, 1); }, "seq = 6");
  expect_throw_naming<std::invalid_argument>([&] { manager.free(6); }, "seq = 6");
  expect_throw_naming<std::invalid_argument>([&] { (void)manager.table(6); }, "seq = 6");
  expect_throw_naming<std::invalid_argument>([&] { manager.fork(6, 7); }, "seq = 6");
  expect_throw_naming<std::invalid_argument>([&] { manager.fork(5, 5); }, "seq = 5");
  expect_throw_naming<std::invalid_argument>([&] { manager.allocate_prompt(9, std::vector<int32_t>{}); },
                                             "prompt.size() = 0");
  expect_throw_naming<std::invalid_argument>([&] { manager.mark_computed(5, 3); }, "num_tokens = 3");
  expect_throw_naming<std::invalid_argument>([&] { manager.mark_computed(5, -1); }, "num_tokens = -1");
  expect_throw_naming<std::invalid_argument>([] { BlockManager(4, 0); }, "block_size = 0");
  EXPECT_TRUE(invariants_hold(manager));
}

TEST(BlockManager, OutOfBlocksReturnsTheOutcomeAndChangesNothing) {
  Tables manager(BlockManager(5, 2));
  prefill(manager, 0, {1, 2, 3, 4, 5, 6});  // blocks 0, 1, 2, all full and cached
  manager.free(0);                          // evictable: 2, 1, 0 (tail first)
  prefill(manager, 1, {9, 9, 9});           // blocks 3, 4 from the free list
  ASSERT_EQ(manager.pool().evictable_blocks(), (std::vector<int32_t>{2, 1, 0}));

  // Two cached blocks would be revived, but the 3 fresh ones do not fit the last evictable one:
  // all or nothing — no hit taken, no LRU order changed, no counter moved.
  const Snapshot before = snapshot(manager);
  EXPECT_FALSE(manager.can_allocate(std::vector<int32_t>{1, 2, 3, 4, 0, 0, 0, 0, 0, 0}));
  const PromptAllocation refused = manager.allocate_prompt(2, std::vector<int32_t>{1, 2, 3, 4, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(refused.status, BlockStatus::out_of_blocks);
  EXPECT_TRUE(refused.new_blocks.empty());
  EXPECT_FALSE(manager.has(2));
  EXPECT_TRUE(snapshot(manager) == before);
  EXPECT_TRUE(invariants_hold(manager));

  // Fill the pool, then an append that needs a new block, and one that needs a copy.
  ASSERT_EQ(prefill(manager, 2, {7, 7, 7, 7, 7, 7}).status, BlockStatus::ok);  // takes the 3 evictable blocks
  EXPECT_EQ(manager.num_free_blocks(), 0);
  manager.fork(1, 3);  // shares the partial block 4
  const Snapshot full = snapshot(manager);
  EXPECT_FALSE(manager.can_append(2));
  EXPECT_EQ(manager.append_slot(2, 1).status, BlockStatus::out_of_blocks);  // last block full
  EXPECT_FALSE(manager.can_append(3));
  const SlotAllocation cow = manager.append_slot(3, 1);  // last block shared and partial
  EXPECT_EQ(cow.status, BlockStatus::out_of_blocks);
  EXPECT_EQ(cow.slot, -1);
  EXPECT_FALSE(cow.copy);
  EXPECT_TRUE(snapshot(manager) == full);
  EXPECT_TRUE(invariants_hold(manager));
}

TEST(BlockManager, AppendFillsTheLastBlockThenStartsANewOne) {
  Tables manager(BlockManager(4, 4));
  prefill(manager, 0, {1, 2, 3});
  const int32_t last = manager.table(0).back();
  const SlotAllocation in_place = manager.append_slot(0, 4);
  EXPECT_EQ(in_place.slot, int64_t{last} * 4 + 3);
  EXPECT_FALSE(in_place.new_block);
  EXPECT_FALSE(in_place.copy);
  EXPECT_TRUE(invariants_hold(manager));
  const SlotAllocation next = manager.append_slot(0, 5);
  ASSERT_TRUE(next.new_block);
  EXPECT_EQ(next.slot, int64_t{*next.new_block} * 4);
  EXPECT_EQ(manager.table(0).size(), 2u);
  EXPECT_TRUE(invariants_hold(manager));
}

TEST(BlockManager, CopyOnWriteKeepsForksApart) {
  EXPECT_TRUE(testing::copy_on_write_keeps_forks_apart(make_manager));
}

TEST(BlockManager, FreeReturnsEveryBlock) {
  EXPECT_TRUE(testing::free_returns_every_block(make_manager));
}

TEST(BlockManager, OnlyFullComputedBlocksAreHashed) {
  EXPECT_TRUE(testing::only_full_blocks_are_hashed(make_manager));
  // Nothing is hashed before it is computed; a chunk registers the full blocks it completes.
  Tables manager(BlockManager(8, 4));
  ASSERT_EQ(manager.allocate_prompt(0, iota_tokens(1, 10)).status, BlockStatus::ok);
  EXPECT_EQ(manager.pool().num_cached(), 0);
  for (const auto& [computed, cached] : std::vector<std::pair<int64_t, int64_t>>{{3, 0}, {5, 1}, {4, 1}, {10, 2}}) {
    manager.mark_computed(0, computed);
    EXPECT_EQ(manager.pool().num_cached(), cached) << computed;
    EXPECT_TRUE(invariants_hold(manager));
  }
}

TEST(BlockManager, APromptSharingKFullBlocksAllocatesOnlyTheRest) {
  Tables manager(BlockManager(16, 4));
  const std::vector<int32_t> document = iota_tokens(1, 14);  // 3 full blocks + 2
  const PromptAllocation first = prefill(manager, 0, document);
  for (int64_t k = 0; k <= 3; ++k) {
    std::vector<int32_t> prompt(document.begin(), document.begin() + k * 4);
    prompt.insert(prompt.end(), {50, 51, 52, 53, 54});  // diverges right after k blocks
    const PromptAllocation second = prefill(manager, 1 + k, prompt);
    ASSERT_EQ(second.status, BlockStatus::ok);
    EXPECT_EQ(second.cached_tokens, k * 4) << k;
    EXPECT_EQ(second.new_blocks.size(), size_t(2)) << k;  // ⌈(4k + 5) / 4⌉ − k
    for (int64_t i = 0; i < k; ++i) EXPECT_EQ(manager.table(1 + k)[size_t(i)], first.new_blocks[size_t(i)]);
    manager.free(1 + k);
    EXPECT_TRUE(invariants_hold(manager));
  }
  EXPECT_EQ(manager.pool().hits(), 0 + 1 + 2 + 3);
}

TEST(BlockManager, AWholePromptHitStillLeavesTheLastTokenToCompute) {
  // vLLM caps a hit at num_tokens − 1; nano-vllm issue 144: a hit on every block left nothing
  // to compute, and the first output token's logits come from the last prompt token.
  for (const int64_t block_size : {1, 2, 4}) {
    SCOPED_TRACE("block size " + std::to_string(block_size));
    Tables manager(BlockManager(32, block_size));
    const std::vector<int32_t> prompt = iota_tokens(1, 8);  // a whole number of blocks
    prefill(manager, 0, prompt);
    const PromptAllocation again = prefill(manager, 1, prompt);
    EXPECT_EQ(again.cached_tokens, 8 - block_size);  // the last block is recomputed
    EXPECT_EQ(again.new_blocks.size(), 1u);
    std::vector<int32_t> longer = prompt;
    longer.push_back(9);  // one token past the cached blocks: all 8 hit, the 9th is computed
    EXPECT_EQ(prefill(manager, 2, longer).cached_tokens, 8);
  }
  Tables single(BlockManager(4, 4));
  prefill(single, 0, {3});
  EXPECT_EQ(prefill(single, 1, {3}).cached_tokens, 0);
}

TEST(BlockManager, FreedBlocksServeLaterPromptsUntilTheFreeListRunsDryThenEvictLru) {
  Tables manager(BlockManager(6, 2));
  const std::vector<int32_t> document{1, 2, 3, 4, 5, 6};
  prefill(manager, 0, document);  // blocks 0, 1, 2
  manager.free(0);                // released tail first: evicted tail first
  EXPECT_EQ(manager.pool().evictable_blocks(), (std::vector<int32_t>{2, 1, 0}));
  EXPECT_EQ(manager.num_free_blocks(), 6);

  // A later request with the same start takes the cached blocks back (the free list still has 3).
  const PromptAllocation reuse = prefill(manager, 1, {1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(reuse.cached_tokens, 6);
  EXPECT_EQ(manager.table(1), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(manager.pool().evictions(), 0);
  manager.free(1);  // evictable: 2, 1, 0 (still the tail first); block 3 (partial, unhashed) free again
  EXPECT_TRUE(invariants_hold(manager));

  // Unrelated prompts: the free list (3, 4, 5) first, then evictions in LRU order 2, 1, 0.
  std::vector<int32_t> handed_out;
  for (int64_t seq = 10; seq < 16; ++seq) {
    const PromptAllocation other = prefill(manager, seq, {int32_t(100 + seq)});
    ASSERT_EQ(other.status, BlockStatus::ok);
    handed_out.push_back(other.new_blocks.at(0));
    if (seq == 13) {  // block 2 ({5, 6}) is gone, block 1 ({3, 4}) still cached
      EXPECT_EQ(prefill(manager, 20, {1, 2, 3, 4, 5, 6, 0}).status, BlockStatus::out_of_blocks);
      EXPECT_EQ(manager.pool().evictions(), 1);
    }
  }
  EXPECT_EQ(handed_out, (std::vector<int32_t>{3, 4, 5, 2, 1, 0}));
  EXPECT_EQ(manager.pool().evictions(), 3);
  EXPECT_EQ(manager.pool().num_cached(), 0);
}

TEST(BlockManager, EvictionTakesTheTailOfAFreedSequenceFirst) {
  Tables manager(BlockManager(6, 2));
  prefill(manager, 0, {1, 2, 3, 4, 5, 6});        // blocks 0, 1, 2
  manager.free(0);                                // evictable: 2, 1, 0
  prefill(manager, 1, {20, 21, 22, 23, 24, 25});  // blocks 3, 4, 5: the free list is dry
  prefill(manager, 2, {8});                       // evicts block 2, the tail {5, 6}
  EXPECT_EQ(manager.table(2), std::vector<int32_t>{2});
  manager.free(1);  // evictable: 1, 0, 5, 4, 3
  const PromptAllocation hit = prefill(manager, 3, {1, 2, 3, 4, 5});
  EXPECT_EQ(hit.cached_tokens, 4) << "the head {1, 2}, {3, 4} must outlive the tail";
  EXPECT_EQ(manager.table(3), (std::vector<int32_t>{0, 1, 5}));  // the fresh block evicts seq 1's tail
  EXPECT_EQ(manager.pool().evictable_blocks(), (std::vector<int32_t>{4, 3}));
}

TEST(BlockManager, PrefixCachingOffNeverSharesOrKeepsBlocks) {
  Tables manager(BlockManager(8, 2, false));
  prefill(manager, 0, {1, 2, 3, 4, 5});
  EXPECT_EQ(prefill(manager, 1, {1, 2, 3, 4, 5}).cached_tokens, 0);
  EXPECT_EQ(manager.pool().num_cached(), 0);
  manager.free(0);
  EXPECT_EQ(manager.pool().num_evictable(), 0);
  EXPECT_TRUE(invariants_hold(manager));
}

TEST(BlockManager, CheckInvariantsCatchesALeakAPartialHashAndAMissingReference) {
  {
    Tables manager(BlockManager(4, 4));
    prefill(manager, 0, {1, 2, 3, 4, 5});
    BlockManagerTestAccess::pool(manager.manager()).retain(manager.table(0)[0]);  // a reference nobody holds
    expect_throw_naming<std::logic_error>([&] { manager.check_invariants(); },
                                          "block 0 has refcount 2 but 1 block tables hold it (a leaked reference)");
  }
  {
    Tables manager(BlockManager(4, 4));
    prefill(manager, 0, {1, 2, 3, 4, 5});
    BlockManagerTestAccess::pool(manager.manager()).register_hash(manager.table(0)[1], 77);
    expect_throw_naming<std::logic_error>([&] { manager.check_invariants(); }, "only full blocks may be hashed");
  }
  {
    Tables manager(BlockManager(4, 4));
    prefill(manager, 0, {1, 2, 3, 4, 5});
    BlockManagerTestAccess::pool(manager.manager()).release(manager.table(0)[1]);
    expect_throw_naming<std::logic_error>([&] { manager.check_invariants(); }, "(a missing reference)");
  }
  // The tables live in the caller's sequences: a table that disagrees with its own sequence is
  // seen too (the manager keeps no copy to fall back on).
  {
    Tables manager(BlockManager(4, 4));
    prefill(manager, 0, {1, 2, 3, 4, 5});
    manager.table_state(0).num_tokens = 9;  // more slotted tokens than the sequence has
    expect_throw_naming<std::logic_error>([&] { manager.check_invariants(); },
                                          "sequence 0's table has 9 slotted tokens but the sequence has only 5");
  }
  {
    Tables manager(BlockManager(4, 4));
    prefill(manager, 0, {1, 2, 3, 4, 5});
    manager.table_state(0).num_tokens = 4;  // 4 tokens cannot fill 2 blocks
    expect_throw_naming<std::logic_error>([&] { manager.check_invariants(); }, "has 4 tokens in 2 blocks; it needs 1");
  }
  {
    Tables manager(BlockManager(4, 4));
    prefill(manager, 0, {1, 2, 3, 4, 5});
    manager.table_state(0).hashes[0] ^= 1;  // a hash that is not its tokens'
    expect_throw_naming<std::logic_error>([&] { manager.check_invariants(); },
                                          "sequence 0's block hashes are not the chained hashes of its tokens");
  }
}

TEST(BlockManager, TablesInTheWrongStateAreInvalidArguments) {
  BlockManager manager(4, 4);
  const std::vector<int32_t> prompt{1, 2, 3, 4, 5};
  paged::BlockTable table;
  ASSERT_EQ(manager.allocate(table, prompt).status, BlockStatus::ok);
  EXPECT_EQ(table.num_tokens, 5);
  EXPECT_EQ(manager.slot(table, 4), int64_t{table.blocks[1]} * 4);
  expect_throw_naming<std::invalid_argument>([&] { manager.allocate(table, prompt); }, "table.blocks.size() = 2");
  expect_throw_naming<std::invalid_argument>([&] { manager.append_slot(table, prompt); }, "tokens.size() = 5");
  expect_throw_naming<std::invalid_argument>([&] { (void)manager.slot(table, 5); }, "position = 5");
  expect_throw_naming<std::invalid_argument>([&] { manager.mark_computed(table, 6); }, "num_tokens = 6");
  paged::BlockTable empty;
  expect_throw_naming<std::invalid_argument>([&] { manager.allocate(empty, std::vector<int32_t>{}); },
                                             "prompt.size() = 0");
  manager.free(table);
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(manager.num_free_blocks(), 4);
  manager.check_invariants({});
}

// ---- the property test ----

TEST(BlockManager, RandomOperationsMatchTheReferenceModel) {
  testing::SeededRng rng;
  const auto start = std::chrono::steady_clock::now();
  testing::PropertyStats stats;
  int64_t total_ops = 0;
  for (const auto& [block_size, num_blocks] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 24}, {2, 16}, {3, 16}, {4, 12}, {4, 20}, {5, 10}}) {
    const testing::PropertyConfig config{num_blocks, block_size, 18000};
    ASSERT_TRUE(testing::random_operations_match_model(make_manager, config, rng, &stats));
    total_ops += config.num_ops;
  }
  testing::PropertyConfig no_cache{16, 4, 6000};
  no_cache.prefix_caching = false;
  ASSERT_TRUE(testing::random_operations_match_model(
      [](int64_t num_blocks, int64_t block_size) { return Tables(BlockManager(num_blocks, block_size, false)); },
      no_cache, rng, &stats));
  total_ops += no_cache.num_ops;

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << total_ops << " operations in " << seconds << " s: " << stats.prompts << " prompts (" << stats.prompt_hits
            << " with cache hits, " << stats.capped_hits << " capped), " << stats.out_of_blocks << " out of blocks, "
            << stats.copies << " copies, " << stats.evictions << " evictions, " << stats.forks << " forks, "
            << stats.frees << " frees, " << stats.partial_computes << " partial computes\n";
  EXPECT_GE(total_ops, 100000);
  // Every path was taken, many times.
  for (const int64_t count : {stats.prompt_hits, stats.capped_hits, stats.out_of_blocks, stats.copies, stats.evictions,
                              stats.forks, stats.partial_computes})
    EXPECT_GT(count, 100);
}

}  // namespace
}  // namespace inferlab::paged
