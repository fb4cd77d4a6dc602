// Wrong chapter-06 block managers, run through the very checks the real BlockManager passes
// (tests/06-paged-attention/block_manager_check.h): each mistake must be rejected, and the same
// code without the mistake must pass. The fixture is a sketch of the lesson's manager on the real
// BlockPool (the real manager stays as it is), over the caller's block tables (both sit under
// testing::SequenceTables), with one switch per mistake:
//   - a free whose reverse loop stops at index 1: the first block's reference leaks;
//   - no copy-on-write: an append writes into a partly filled block that its fork still reads;
//   - mark_computed hashing the partial last block (⌈n / block_size⌉ blocks instead of ⌊·⌋).
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <span>
#include <vector>

#include "runtime/paged/block_pool.h"
#include "runtime/paged/prefix_hash.h"
#include "tests/06-paged-attention/block_manager_check.h"
#include "tests/06-paged-attention/random_operations.h"
#include "tests/06-paged-attention/sequence_tables.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using paged::BlockStatus;

enum class Mistake { none, leak_on_free, no_copy_on_write, hash_partial_block };

// BlockManager's table interface and rules in brief; `mistake` breaks one of them. Like the real
// manager it keeps only the pool: the tables are the caller's (testing::SequenceTables).
class SketchManager {
 public:
  SketchManager(int64_t num_blocks, int64_t block_size, Mistake mistake)
      : pool_(num_blocks, block_size), mistake_(mistake) {}

  paged::PromptAllocation allocate(paged::BlockTable& table, std::span<const int32_t> prompt) {
    const auto hashes = paged::prefix_block_hashes(prompt, block_size());
    const auto num_blocks = (int64_t(prompt.size()) + block_size() - 1) / block_size();
    std::vector<int32_t> hits;
    int64_t taken = 0;
    for (int64_t i = 0; i < (int64_t(prompt.size()) - 1) / block_size(); ++i) {
      const auto block = pool_.cached_block(hashes[size_t(i)]);
      if (!block) break;
      hits.push_back(*block);
      taken += pool_.refcount(*block) == 0;
    }
    paged::PromptAllocation result;
    if (taken + num_blocks - int64_t(hits.size()) > pool_.num_free()) {
      result.status = BlockStatus::out_of_blocks;
      return result;
    }
    for (size_t i = 0; i < hits.size(); ++i) table.blocks.push_back(*pool_.lookup(hashes[i]));
    while (int64_t(table.blocks.size()) < num_blocks) {
      table.blocks.push_back(*pool_.allocate());
      result.new_blocks.push_back(table.blocks.back());
    }
    table.hashes = hashes_of(prompt);
    table.num_tokens = int64_t(prompt.size());
    table.num_registered = int64_t(hits.size());
    result.cached_tokens = table.num_registered * block_size();
    return result;
  }

  paged::SlotAllocation append_slot(paged::BlockTable& table, std::span<const int32_t> tokens) {
    paged::SlotAllocation result;
    const int64_t offset = table.num_tokens % block_size();
    const bool shared = offset != 0 && pool_.refcount(table.blocks.back()) > 1;
    if (offset == 0 || (shared && mistake_ != Mistake::no_copy_on_write)) {
      const auto block = pool_.allocate();
      if (!block) {
        result.status = BlockStatus::out_of_blocks;
        return result;
      }
      if (offset == 0) {
        table.blocks.push_back(*block);
      } else {
        pool_.release(table.blocks.back());
        result.copy = paged::BlockCopy{table.blocks.back(), *block};
        table.blocks.back() = *block;
      }
      result.new_block = block;
    }
    result.slot = int64_t{table.blocks.back()} * block_size() + offset;
    ++table.num_tokens;
    table.hashes = hashes_of(tokens);
    return result;
  }

  void mark_computed(paged::BlockTable& table, int64_t num_tokens) {
    const int64_t blocks = mistake_ == Mistake::hash_partial_block ? (num_tokens + block_size() - 1) / block_size()
                                                                   : num_tokens / block_size();
    for (int64_t i = table.num_registered; i < std::min(blocks, int64_t(table.hashes.size())); ++i)
      pool_.register_hash(table.blocks[size_t(i)], table.hashes[size_t(i)]);
    table.num_registered = std::max(table.num_registered, blocks);
  }

  paged::BlockTable fork(const paged::BlockTable& parent) {
    for (const int32_t block : parent.blocks) pool_.retain(block);
    return parent;
  }

  void free(paged::BlockTable& table) {
    const size_t last = mistake_ == Mistake::leak_on_free ? 1 : 0;  // `i > 0`: block 0 is never released
    for (size_t i = table.blocks.size(); i-- > last;) pool_.release(table.blocks[i]);
    table = paged::BlockTable{};
  }

  int64_t num_free_blocks() const { return pool_.num_free(); }
  int64_t block_size() const { return pool_.block_size(); }

  // The chained hashes of the full blocks of @p tokens — and, with hash_partial_block, of the
  // partial last block too (the mistake: a hash over ⌈n / block_size⌉ blocks).
  std::vector<uint64_t> hashes_of(std::span<const int32_t> tokens) const {
    std::vector<uint64_t> hashes = paged::prefix_block_hashes(tokens, block_size());
    const size_t tail = tokens.size() % size_t(block_size());
    if (mistake_ == Mistake::hash_partial_block && tail != 0)
      hashes.push_back(paged::block_hash(hashes.empty() ? paged::kFirstBlockParent : hashes.back(), tokens.last(tail)));
    return hashes;
  }
  const paged::BlockPool& pool() const { return pool_; }
  // The pool's rules; the checks add the rest.
  void check_invariants(std::span<const paged::SequenceBlocks>) const { pool_.check_invariants(); }

 private:
  paged::BlockPool pool_;
  Mistake mistake_;
};

using Sketch = testing::SequenceTables<SketchManager>;

auto make_with(Mistake mistake) {
  return [mistake](int64_t num_blocks, int64_t block_size) {
    return Sketch(SketchManager(num_blocks, block_size, mistake));
  };
}

::testing::AssertionResult random_run(Mistake mistake) {
  testing::SeededRng rng;
  return testing::random_operations_match_model(make_with(mistake), testing::PropertyConfig{16, 4, 20000}, rng);
}

TEST(WrongCh06, SketchWithoutMistakesPasses) {
  EXPECT_TRUE(testing::copy_on_write_keeps_forks_apart(make_with(Mistake::none)));
  EXPECT_TRUE(testing::free_returns_every_block(make_with(Mistake::none)));
  EXPECT_TRUE(testing::only_full_blocks_are_hashed(make_with(Mistake::none)));
  EXPECT_TRUE(random_run(Mistake::none));
}

TEST(WrongCh06, AFreeThatLeaksAReferenceIsRejected) {
  const auto result = testing::free_returns_every_block(make_with(Mistake::leak_on_free));
  ASSERT_FALSE(result);
  std::cout << result.message() << "\n";
  const auto random = random_run(Mistake::leak_on_free);
  ASSERT_FALSE(random);
  std::cout << random.message() << "\n";
}

TEST(WrongCh06, AppendWithoutCopyOnWriteIsRejected) {
  const auto result = testing::copy_on_write_keeps_forks_apart(make_with(Mistake::no_copy_on_write));
  ASSERT_FALSE(result);
  std::cout << result.message() << "\n";
  const auto random = random_run(Mistake::no_copy_on_write);
  ASSERT_FALSE(random);
  std::cout << random.message() << "\n";
}

TEST(WrongCh06, AHashOverAPartialBlockIsRejected) {
  const auto result = testing::only_full_blocks_are_hashed(make_with(Mistake::hash_partial_block));
  ASSERT_FALSE(result);
  std::cout << result.message() << "\n";
  const auto random = random_run(Mistake::hash_partial_block);
  ASSERT_FALSE(random);
  std::cout << random.message() << "\n";
}

}  // namespace
}  // namespace inferlab
