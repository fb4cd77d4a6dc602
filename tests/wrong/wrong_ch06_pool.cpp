// Wrong chapter-06 block managers, run through the very checks the real BlockManager passes
// (tests/06-paged-attention/block_manager_check.h): each mistake must be rejected, and the same
// code without the mistake must pass. The fixture is a sketch of the lesson's manager on the real
// BlockPool (the real manager stays as it is), with one switch per mistake:
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
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using paged::BlockStatus;

enum class Mistake { none, leak_on_free, no_copy_on_write, hash_partial_block };

// BlockManager's interface and rules in brief; `mistake` breaks one of them.
class SketchManager {
 public:
  SketchManager(int64_t num_blocks, int64_t block_size, Mistake mistake)
      : pool_(num_blocks, block_size), mistake_(mistake) {}

  paged::PromptAllocation allocate_prompt(int64_t seq, std::span<const int32_t> prompt) {
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
    Sequence& s = sequences_[seq];
    s.tokens.assign(prompt.begin(), prompt.end());
    for (size_t i = 0; i < hits.size(); ++i) s.table.push_back(*pool_.lookup(hashes[i]));
    while (int64_t(s.table.size()) < num_blocks) {
      s.table.push_back(*pool_.allocate());
      result.new_blocks.push_back(s.table.back());
    }
    s.registered = int64_t(hits.size());
    result.cached_tokens = s.registered * block_size();
    return result;
  }

  paged::SlotAllocation append_slot(int64_t seq, int32_t token) {
    Sequence& s = sequences_.at(seq);
    paged::SlotAllocation result;
    const int64_t offset = int64_t(s.tokens.size()) % block_size();
    const bool shared = offset != 0 && pool_.refcount(s.table.back()) > 1;
    if (offset == 0 || (shared && mistake_ != Mistake::no_copy_on_write)) {
      const auto block = pool_.allocate();
      if (!block) {
        result.status = BlockStatus::out_of_blocks;
        return result;
      }
      if (offset == 0) {
        s.table.push_back(*block);
      } else {
        pool_.release(s.table.back());
        result.copy = paged::BlockCopy{s.table.back(), *block};
        s.table.back() = *block;
      }
      result.new_block = block;
    }
    result.slot = int64_t{s.table.back()} * block_size() + offset;
    s.tokens.push_back(token);
    return result;
  }

  void mark_computed(int64_t seq, int64_t num_tokens) {
    Sequence& s = sequences_.at(seq);
    const int64_t blocks = mistake_ == Mistake::hash_partial_block ? (num_tokens + block_size() - 1) / block_size()
                                                                   : num_tokens / block_size();
    uint64_t parent = paged::kFirstBlockParent;
    for (int64_t i = 0; i < blocks; ++i) {
      const auto first = s.tokens.begin() + i * block_size();
      parent = paged::block_hash(parent, std::span<const int32_t>(first, first + std::min(block_size(), num_tokens - i * block_size())));
      if (i >= s.registered) pool_.register_hash(s.table[size_t(i)], parent);
    }
    s.registered = std::max(s.registered, blocks);
  }

  void fork(int64_t parent, int64_t child) {
    for (const int32_t block : sequences_.at(parent).table) pool_.retain(block);
    sequences_[child] = sequences_.at(parent);
  }

  void free(int64_t seq) {
    const auto& table = sequences_.at(seq).table;
    const size_t last = mistake_ == Mistake::leak_on_free ? 1 : 0;  // `i > 0`: block 0 is never released
    for (size_t i = table.size(); i-- > last;) pool_.release(table[i]);
    sequences_.erase(seq);
  }

  bool has(int64_t seq) const { return sequences_.contains(seq); }
  const std::vector<int32_t>& table(int64_t seq) const { return sequences_.at(seq).table; }
  const std::vector<int32_t>& tokens(int64_t seq) const { return sequences_.at(seq).tokens; }
  int64_t num_tokens(int64_t seq) const { return int64_t(sequences_.at(seq).tokens.size()); }
  std::vector<int64_t> sequences() const {
    std::vector<int64_t> ids;
    for (const auto& entry : sequences_) ids.push_back(entry.first);
    return ids;
  }
  int64_t num_free_blocks() const { return pool_.num_free(); }
  int64_t block_size() const { return pool_.block_size(); }
  const paged::BlockPool& pool() const { return pool_; }
  void check_invariants() const { pool_.check_invariants(); }  // the pool's rules; the checks add the rest

 private:
  struct Sequence {
    std::vector<int32_t> tokens, table;
    int64_t registered = 0;
  };
  paged::BlockPool pool_;
  Mistake mistake_;
  std::map<int64_t, Sequence> sequences_;
};

auto make_with(Mistake mistake) {
  return [mistake](int64_t num_blocks, int64_t block_size) { return SketchManager(num_blocks, block_size, mistake); };
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
