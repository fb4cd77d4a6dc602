// Exercise 6.1 — a block allocator with reference counts and copy-on-write: a straightforward
// answer (the lab's runtime/paged/block_pool.h adds the prefix cache and LRU eviction). See
// exercises/06-paged-attention/ch06.h.
#include <limits>
#include <stdexcept>
#include <string>

#include "06-paged-attention/ch06.h"
#include "common/check.h"

namespace inferlab::student {

// ---- given ----

StudentBlockAllocator::StudentBlockAllocator(int64_t num_blocks, int64_t block_size) : block_size_(block_size) {
  require(num_blocks > 0 && num_blocks <= std::numeric_limits<int32_t>::max(), "num_blocks", num_blocks,
          "must be in [1, 2^31 − 1] (block ids are int32)");
  require_positive("block_size", block_size);
  refcount_.assign(static_cast<size_t>(num_blocks), 0);
  // The stack's top is its back: pushing the ids in decreasing order makes a fresh pool hand out
  // 0, 1, 2, … (any free block would do; the grader accepts any).
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t id = num_blocks - 1; id >= 0; --id) free_.push_back(static_cast<int32_t>(id));
}

int32_t StudentBlockAllocator::refcount(int32_t block) const {
  require(block >= 0 && block < num_blocks(), "block", block,
          "is not a block of the pool [0, " + std::to_string(num_blocks()) + ")");
  return refcount_[static_cast<size_t>(block)];
}

void StudentBlockAllocator::require_held(int32_t block, std::string_view operation) const {
  require(block >= 0 && block < num_blocks(), std::string(operation) + ": block", block,
          "is not a block of the pool [0, " + std::to_string(num_blocks()) + ")");
  if (refcount_[static_cast<size_t>(block)] == 0)
    throw std::logic_error(std::string(operation) + ": block " + std::to_string(block) +
                           " has refcount 0 — it is free, so no table may hold it (a double free, or a table "
                           "used after free())");
}

// ---- the exercise ----

std::optional<int32_t> StudentBlockAllocator::allocate() {
  if (free_.empty()) return std::nullopt;  // out of blocks: an outcome, and nothing changed
  const int32_t block = free_.back();
  free_.pop_back();
  refcount_[static_cast<size_t>(block)] = 1;
  return block;
}

BlockTable StudentBlockAllocator::fork(const BlockTable& parent) {
  // Check everything before changing anything: a throw must leave every refcount as it was.
  for (const int32_t block : parent) require_held(block, "fork");
  for (const int32_t block : parent) ++refcount_[static_cast<size_t>(block)];
  return parent;  // the child maps its logical blocks to the very same physical blocks
}

SlotResult StudentBlockAllocator::append_token(BlockTable& table, int64_t num_tokens) {
  require(num_tokens >= 0, "num_tokens", num_tokens, "must be ≥ 0");
  const int64_t blocks_needed = (num_tokens + block_size_ - 1) / block_size_;
  require(static_cast<int64_t>(table.size()) == blocks_needed, "table.size()", table.size(),
          "must be ⌈num_tokens / block_size⌉ = ⌈" + std::to_string(num_tokens) + " / " + std::to_string(block_size_) +
              "⌉ = " + std::to_string(blocks_needed) + " (the blocks holding the tokens before the new one)");
  if (!table.empty()) require_held(table.back(), "append_token");

  const int64_t offset = num_tokens % block_size_;
  SlotResult result;
  if (offset != 0 && refcount_[static_cast<size_t>(table.back())] == 1) {
    // The last block has room and is this table's alone: write in place.
    result.slot = int64_t(table.back()) * block_size_ + offset;
    return result;
  }
  // Either the last block is full (or there is none) — the token starts a fresh block, and a
  // full block, shared or not, is never written again, so never copied — or it has room but
  // is shared: copy-on-write into a fresh block.
  const std::optional<int32_t> fresh = allocate();
  if (!fresh) {  // nothing was changed yet: the shared block keeps this table's reference
    result.status = BlockStatus::out_of_blocks;
    return result;
  }
  if (offset == 0) {
    table.push_back(*fresh);
  } else {
    const int32_t shared = table.back();
    --refcount_[static_cast<size_t>(shared)];  // still ≥ 1: the other holders keep it
    table.back() = *fresh;
    result.copy = BlockCopy{shared, *fresh};
  }
  result.new_block = *fresh;
  result.slot = int64_t(*fresh) * block_size_ + offset;
  return result;
}

void StudentBlockAllocator::free(BlockTable& table) {
  for (const int32_t block : table) require_held(block, "free");  // a double free changes nothing
  // Last to first, as vLLM does (with a prefix cache, the tail is then evicted before the head).
  for (auto block = table.rbegin(); block != table.rend(); ++block) {
    if (--refcount_[static_cast<size_t>(*block)] == 0) free_.push_back(*block);
  }
  table.clear();
}

}  // namespace inferlab::student
