// Exercise 6.1 — a block allocator with reference counts and copy-on-write. See ch06.h for the
// task and the rules.
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
  throw NotImplemented("StudentBlockAllocator::allocate");  // TODO(student): delete this line once written

  // TODO(student): no free block (free_ empty): return std::nullopt, changing nothing. Otherwise
  // pop the block at free_.back(), set its refcount to 1 and return it. (roughly 5 lines)
  return std::nullopt;
}

BlockTable StudentBlockAllocator::fork(const BlockTable& parent) {
  throw NotImplemented("StudentBlockAllocator::fork");  // TODO(student): delete this line once written

  // TODO(student): first require_held(block, "fork") for every block of parent — a throw must
  // leave every refcount unchanged, so check them all before incrementing any —, then one more
  // reference for each, and return the child: the same ids. (roughly 3 lines)
  return {};
}

SlotResult StudentBlockAllocator::append_token(BlockTable& table, int64_t num_tokens) {
  require(num_tokens >= 0, "num_tokens", num_tokens, "must be ≥ 0");
  const int64_t blocks_needed = (num_tokens + block_size_ - 1) / block_size_;
  require(static_cast<int64_t>(table.size()) == blocks_needed, "table.size()", table.size(),
          "must be ⌈num_tokens / block_size⌉ = ⌈" + std::to_string(num_tokens) + " / " + std::to_string(block_size_) +
              "⌉ = " + std::to_string(blocks_needed) + " (the blocks holding the tokens before the new one)");

  throw NotImplemented("StudentBlockAllocator::append_token");  // TODO(student): delete this line once written

  // TODO(student): require_held(table.back(), "append_token") when the table is not empty. With
  // offset = num_tokens % block_size_:
  //   - offset ≠ 0 and the last block's refcount is 1: the slot is last · block_size_ + offset,
  //     nothing else;
  //   - otherwise take a fresh block with allocate() — none: return status out_of_blocks (slot
  //     −1) having changed nothing —; offset 0: push it onto the table (a full last block, shared
  //     or not, is never copied); offset ≠ 0 (a shared partial block): copy-on-write — one
  //     reference fewer on the shared block, the fresh one replaces it in the table, and
  //     result.copy = {shared, fresh}. Set result.new_block and the slot in the fresh block.
  // The slot is int64: compute it as int64_t(block) * block_size_ + offset. (roughly 25 lines)
  return {};
}

void StudentBlockAllocator::free(BlockTable& table) {
  throw NotImplemented("StudentBlockAllocator::free");  // TODO(student): delete this line once written

  // TODO(student): require_held(block, "free") for every block first (a double free must throw
  // and change nothing), then release them last to first: one reference fewer, and a block that
  // reaches refcount 0 goes back on free_. Finally empty the table. (roughly 6 lines)
}

}  // namespace inferlab::student
