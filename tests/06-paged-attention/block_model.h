#pragma once
/// @file block_model.h
/// The reference model that chapter 06's property test (random_operations.h) runs beside a block
/// manager: the lesson's rules written plainly, sharing none of the real code's data structures.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/06-paged-attention/block_manager_check.h"

namespace inferlab::testing {

/// The reference model of a block manager: the lesson's rules on plain data, none of the real
/// data structures. A cached block is found by its literal token prefix (no hash); its blocks
/// have their own ids, and the model learns which physical id the manager gave each one, then
/// insists that it stays the same: a prefix hit must return that very block, and an eviction the
/// least recently released one.
class BlockModel {
 public:
  /// The block of a model id: who holds it, the prefix it is cached under, its physical id.
  struct Block {
    int32_t refcount = 0;                        ///< block tables holding it
    std::optional<std::vector<int32_t>> prefix;  ///< the cached tokens [0, end of this block)
    int32_t physical = -1;                       ///< the manager's id, once learned
    int64_t released_at = 0;                     ///< when it became evictable (LRU order)
  };
  /// A sequence of the model.
  struct Sequence {
    std::vector<int32_t> tokens;  ///< prompt and appended tokens
    std::vector<int> table;       ///< model block ids
    int64_t registered = 0;       ///< leading full blocks already offered to the cache
    int64_t computed = 0;         ///< tokens whose K/V the caller has written
  };

  /// A model pool of @p num_blocks blocks of @p block_size tokens, caching computed full blocks
  /// when @p prefix_caching.
  BlockModel(int64_t num_blocks, int64_t block_size, bool prefix_caching)
      : num_blocks_(num_blocks), block_size_(block_size), prefix_caching_(prefix_caching),
        owner_(size_t(num_blocks), -1) {}

  /// Blocks that can still be allocated: those no table holds.
  int64_t num_free() const { return num_blocks_ - live_; }
  /// The sequences.
  const std::map<int64_t, Sequence>& sequences() const { return sequences_; }
  /// A sequence.
  Sequence& sequence(int64_t seq) { return sequences_.at(seq); }
  /// A block.
  const Block& block(int id) const { return blocks_[size_t(id)]; }
  /// The model block on physical block @p physical (held or evictable), or −1.
  int owner(int32_t physical) const { return owner_[size_t(physical)]; }
  /// Blocks evicted so far.
  int64_t evictions() const { return evictions_; }

  /// The cached blocks for @p prompt's leading full blocks, capped so the last token is computed.
  /// Sets @p capped when the cap removed a hit.
  std::vector<int> prompt_hits(const std::vector<int32_t>& prompt, bool& capped) const {
    std::vector<int> hits;
    const auto max_hits = (int64_t(prompt.size()) - 1) / block_size_;
    capped = false;
    if (!prefix_caching_) return hits;
    for (int64_t i = 0; i < int64_t(prompt.size()) / block_size_; ++i) {
      const auto found = cache_.find(std::vector<int32_t>(prompt.begin(), prompt.begin() + (i + 1) * block_size_));
      if (found == cache_.end()) break;
      if (i == max_hits) {
        capped = true;
        break;
      }
      hits.push_back(found->second);
    }
    return hits;
  }
  /// Blocks a prompt with @p hits takes from num_free(): the fresh ones and the revived hits.
  int64_t blocks_taken(const std::vector<int32_t>& prompt, const std::vector<int>& hits) const {
    int64_t taken = (int64_t(prompt.size()) + block_size_ - 1) / block_size_ - int64_t(hits.size());
    for (const int id : hits) taken += blocks_[size_t(id)].refcount == 0;
    return taken;
  }

  /// A new sequence over @p hits and fresh blocks.
  void add_prompt(int64_t seq, const std::vector<int32_t>& prompt, const std::vector<int>& hits) {
    Sequence s{prompt, {}, int64_t(hits.size()), int64_t(hits.size()) * block_size_};
    for (const int id : hits) {
      take(id);
      s.table.push_back(id);
    }
    while (int64_t(s.table.size()) * block_size_ < int64_t(prompt.size())) s.table.push_back(allocate());
    sequences_[seq] = s;
  }
  /// A fresh block (from the free blocks, else by evicting the least recently released cached
  /// one), or −1 when none is left.
  int allocate() {
    int32_t physical = -1;
    if (num_free() == int64_t(evictable_.size())) {  // no plain free block left
      if (evictable_.empty()) return -1;
      const int victim = evictable_.begin()->second;
      evictable_.erase(evictable_.begin());
      cache_.erase(*blocks_[size_t(victim)].prefix);
      physical = blocks_[size_t(victim)].physical;
      blocks_[size_t(victim)] = Block{};
      ++evictions_;
    }
    blocks_.push_back(Block{1, std::nullopt, physical, 0});
    if (physical >= 0) owner_[size_t(physical)] = int(blocks_.size()) - 1;
    ++live_;
    return int(blocks_.size()) - 1;
  }
  /// One more holder (fork, prefix hit); a hit on an evictable block revives it.
  void take(int id) {
    Block& b = blocks_[size_t(id)];
    if (b.refcount++ == 0) {
      evictable_.erase({b.released_at, id});
      ++live_;
    }
  }
  /// One holder fewer; at 0 a cached block becomes evictable, any other free.
  void release(int id) {
    Block& b = blocks_[size_t(id)];
    if (--b.refcount > 0) return;
    --live_;
    if (b.prefix) {
      b.released_at = clock_++;
      evictable_.insert({b.released_at, id});
    } else {
      owner_[size_t(b.physical)] = -1;
    }
  }
  /// The caller computed the first @p num_tokens tokens: offer each new full block to the cache
  /// (a prefix cached already keeps its block).
  void compute(int64_t seq, int64_t num_tokens) {
    Sequence& s = sequences_.at(seq);
    s.computed = std::max(s.computed, num_tokens);
    if (!prefix_caching_) return;
    for (int64_t i = s.registered; i < num_tokens / block_size_; ++i) {
      Block& b = blocks_[size_t(s.table[size_t(i)])];
      std::vector<int32_t> prefix(s.tokens.begin(), s.tokens.begin() + (i + 1) * block_size_);
      if (b.prefix || cache_.contains(prefix)) continue;
      cache_[prefix] = s.table[size_t(i)];
      b.prefix = std::move(prefix);
    }
    s.registered = std::max(s.registered, num_tokens / block_size_);
  }
  /// @p child shares @p parent's blocks.
  void fork(int64_t parent, int64_t child) {
    sequences_[child] = sequences_.at(parent);
    for (const int id : sequences_[child].table) ++blocks_[size_t(id)].refcount;
  }
  /// Releases @p seq's blocks, last to first.
  void free(int64_t seq) {
    const auto table = sequences_.at(seq).table;
    for (auto id = table.rbegin(); id != table.rend(); ++id) release(*id);
    sequences_.erase(seq);
  }

  /// Learns (or checks) that model block @p id is physical block @p physical.
  ::testing::AssertionResult bind(int id, int32_t physical) {
    Block& b = blocks_[size_t(id)];
    if (b.physical == physical) return ::testing::AssertionSuccess();
    if (b.physical >= 0)
      return check_failed("the manager used block " + std::to_string(physical) + " where the model expects block " +
                          std::to_string(b.physical) + (b.refcount == 1 && !b.prefix ? " (the LRU eviction victim)" : ""));
    if (physical < 0 || physical >= num_blocks_ || owner_[size_t(physical)] != -1)
      return check_failed("the manager handed out block " + std::to_string(physical) +
                          " as fresh, but the model says it is still held or cached");
    b.physical = physical;
    owner_[size_t(physical)] = id;
    return ::testing::AssertionSuccess();
  }

 private:
  int64_t num_blocks_, block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  std::map<int64_t, Sequence> sequences_;
  std::map<std::vector<int32_t>, int> cache_;
  std::set<std::pair<int64_t, int>> evictable_;  // (released_at, id): LRU first
  std::vector<int> owner_;                       // physical → model id, −1 when free
  int64_t live_ = 0, clock_ = 0, evictions_ = 0;
};

}  // namespace inferlab::testing
