#include "runtime/paged/block_pool.h"

#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include "common/check.h"

namespace inferlab::paged {
namespace {

[[noreturn]] void broken(const std::string& message) { throw std::logic_error("BlockPool: " + message); }

std::string block_name(int32_t block) { return "block " + std::to_string(block); }

}  // namespace

BlockPool::BlockPool(int64_t num_blocks, int64_t block_size) : block_size_(block_size) {
  require_positive("num_blocks", num_blocks);
  require_positive("block_size", block_size);
  // Ids are int32 (the block table's type, as in vLLM); one past the last id must fit too.
  require(num_blocks <= std::numeric_limits<int32_t>::max(), "num_blocks", num_blocks, "must fit an int32 block id");
  const auto count = static_cast<size_t>(num_blocks);
  refcount_.assign(count, 0);
  lru_prev_.assign(count, -1);
  lru_next_.assign(count, -1);
  in_lru_.assign(count, false);
  hash_of_block_.resize(count);
  // Pushed in reverse so that a fresh pool hands out 0, 1, 2, … (readable tables in the lesson).
  free_list_.reserve(count);
  for (int64_t block = num_blocks - 1; block >= 0; --block) free_list_.push_back(static_cast<int32_t>(block));
}

void BlockPool::require_block(int32_t block) const {
  require(block >= 0 && block < num_blocks(), "block", block,
          "must be a block id in [0, " + std::to_string(num_blocks()) + ")");
}

void BlockPool::lru_push_back(int32_t block) {
  lru_prev_[size_t(block)] = lru_tail_;
  lru_next_[size_t(block)] = -1;
  (lru_tail_ >= 0 ? lru_next_[size_t(lru_tail_)] : lru_head_) = block;
  lru_tail_ = block;
  in_lru_[size_t(block)] = true;
  ++lru_size_;
}

void BlockPool::lru_remove(int32_t block) {
  const int32_t prev = lru_prev_[size_t(block)], next = lru_next_[size_t(block)];
  (prev >= 0 ? lru_next_[size_t(prev)] : lru_head_) = next;
  (next >= 0 ? lru_prev_[size_t(next)] : lru_tail_) = prev;
  lru_prev_[size_t(block)] = lru_next_[size_t(block)] = -1;
  in_lru_[size_t(block)] = false;
  --lru_size_;
}

std::vector<int32_t> BlockPool::evictable_blocks() const {
  std::vector<int32_t> order;
  order.reserve(size_t(lru_size_));
  for (int32_t block = lru_head_; block >= 0 && int64_t(order.size()) < lru_size_; block = lru_next_[size_t(block)])
    order.push_back(block);
  return order;
}

std::optional<int32_t> BlockPool::allocate() {
  int32_t block = -1;
  if (!free_list_.empty()) {
    block = free_list_.back();
    free_list_.pop_back();
  } else if (lru_head_ >= 0) {
    // Evict: the cached KV of the least recently used block is given up, so its hash goes too
    // (a later lookup must miss rather than find someone else's rows).
    block = lru_head_;
    lru_remove(block);
    block_of_hash_.erase(*hash_of_block_[size_t(block)]);
    hash_of_block_[size_t(block)].reset();
    ++evictions_;
  } else {
    return std::nullopt;
  }
  refcount_[size_t(block)] = 1;
  return block;
}

void BlockPool::retain(int32_t block) {
  require_block(block);
  if (refcount_[size_t(block)] == 0)
    broken("retain of " + block_name(block) + ", which nobody holds (" +
           (in_lru_[size_t(block)] ? "evictable: take it with lookup()" : "free: take it with allocate()") + ")");
  ++refcount_[size_t(block)];
}

void BlockPool::release(int32_t block) {
  require_block(block);
  int32_t& count = refcount_[size_t(block)];
  if (count == 0) broken("release of " + block_name(block) + ", which nobody holds (a double free)");
  if (--count > 0) return;
  if (hash_of_block_[size_t(block)]) {
    lru_push_back(block);  // kept for the prefix cache, as the most recently used evictable block
  } else {
    free_list_.push_back(block);
  }
}

bool BlockPool::register_hash(int32_t block, uint64_t hash) {
  require_block(block);
  if (refcount_[size_t(block)] == 0) broken("register_hash on " + block_name(block) + ", which nobody holds");
  if (const auto& current = hash_of_block_[size_t(block)]) {
    if (*current == hash) return true;
    std::ostringstream message;
    message << "register_hash(" << hash << ") on " << block_name(block) << ", already registered under " << *current
            << " (a full block's content never changes)";
    broken(message.str());
  }
  if (block_of_hash_.contains(hash)) return false;  // the same prefix already has its block
  block_of_hash_.emplace(hash, block);
  hash_of_block_[size_t(block)] = hash;
  return true;
}

std::optional<int32_t> BlockPool::lookup(uint64_t hash) {
  ++lookups_;
  const auto found = block_of_hash_.find(hash);
  if (found == block_of_hash_.end()) return std::nullopt;
  const int32_t block = found->second;
  if (in_lru_[size_t(block)]) lru_remove(block);  // revived: no longer a candidate for eviction
  ++refcount_[size_t(block)];
  ++hits_;
  return block;
}

std::optional<int32_t> BlockPool::cached_block(uint64_t hash) const {
  const auto found = block_of_hash_.find(hash);
  if (found == block_of_hash_.end()) return std::nullopt;
  return found->second;
}

std::optional<uint64_t> BlockPool::hash_of(int32_t block) const {
  require_block(block);
  return hash_of_block_[size_t(block)];
}

int32_t BlockPool::refcount(int32_t block) const {
  require_block(block);
  return refcount_[size_t(block)];
}

bool BlockPool::is_evictable(int32_t block) const {
  require_block(block);
  return in_lru_[size_t(block)];
}

void BlockPool::check_invariants() const {
  const auto count = static_cast<size_t>(num_blocks());
  std::vector<int> times_free(count, 0), times_evictable(count, 0);
  for (const int32_t block : free_list_) {
    if (block < 0 || size_t(block) >= count) broken("the free list holds " + block_name(block) + ", out of range");
    if (++times_free[size_t(block)] > 1) broken(block_name(block) + " appears twice in the free list");
  }
  // Walk the LRU list from its head, checking the back links; a block seen twice is a cycle.
  int64_t walked = 0;
  for (int32_t block = lru_head_, prev = -1; block >= 0; prev = block, block = lru_next_[size_t(block)]) {
    if (size_t(block) >= count) broken("the LRU list holds " + block_name(block) + ", out of range");
    if (++times_evictable[size_t(block)] > 1) broken(block_name(block) + " appears twice in the LRU (evictable) list");
    if (lru_prev_[size_t(block)] != prev)
      broken(block_name(block) + "'s LRU back link is " + std::to_string(lru_prev_[size_t(block)]) + ", not " +
             std::to_string(prev));
    if (lru_next_[size_t(block)] < 0 && lru_tail_ != block) broken("the LRU list ends at " + block_name(block) + ", not at its tail");
    ++walked;
  }
  if ((lru_head_ < 0) != (lru_tail_ < 0)) broken("the LRU list has a head but no tail, or a tail but no head");
  if (walked != lru_size_)
    broken("the LRU list holds " + std::to_string(walked) + " blocks but counts " + std::to_string(lru_size_));
  for (size_t index = 0; index < count; ++index) {
    const auto block = static_cast<int32_t>(index);
    const int32_t refs = refcount_[index];
    const bool is_free = times_free[index] > 0, evictable = times_evictable[index] > 0;
    if (refs < 0) broken(block_name(block) + " has refcount " + std::to_string(refs));
    if (is_free && refs > 0)
      broken(block_name(block) + " is both free and referenced (refcount " + std::to_string(refs) + ")");
    if (is_free && evictable) broken(block_name(block) + " is both free and evictable");
    if (is_free && hash_of_block_[index]) broken(block_name(block) + " is free but still hashed");
    if (evictable && refs != 0)
      broken(block_name(block) + " is evictable with refcount " + std::to_string(refs) + " (must be 0)");
    if (evictable && !hash_of_block_[index]) broken(block_name(block) + " is evictable but has no hash");
    if (evictable != bool(in_lru_[index]))
      broken(block_name(block) + (evictable ? " is in the LRU list but not marked evictable"
                                            : " is marked evictable but not in the LRU list"));
    if (refs == 0 && !is_free && !evictable)
      broken(block_name(block) + " is lost: neither free, nor referenced, nor evictable");
    if (const auto& hash = hash_of_block_[index]) {
      const auto found = block_of_hash_.find(*hash);
      if (found == block_of_hash_.end() || found->second != block) {
        std::ostringstream message;
        message << block_name(block) << " says its hash is " << *hash << " but the hash map "
                << (found == block_of_hash_.end() ? "does not hold it" : "maps it to " + block_name(found->second));
        broken(message.str());
      }
    }
  }
  for (const auto& [hash, block] : block_of_hash_) {
    if (block < 0 || size_t(block) >= count) {
      std::ostringstream message;
      message << "the hash map maps " << hash << " to " << block_name(block) << ", out of range";
      broken(message.str());
    }
    if (hash_of_block_[size_t(block)] != hash) {
      std::ostringstream message;
      message << "the hash map maps " << hash << " to " << block_name(block) << ", which "
              << (hash_of_block_[size_t(block)] ? "says its hash is " + std::to_string(*hash_of_block_[size_t(block)])
                                                : std::string("has no hash"));
      broken(message.str());
    }
  }
}

}  // namespace inferlab::paged
