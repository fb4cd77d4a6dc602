#pragma once
/// @file block_manager_check.h
/// The checks of chapter 06's block bookkeeping, for sequences addressed by id over a manager
/// (sequence_tables.h: SequenceTables holds each sequence's tokens and block table, as the
/// engine's Sequence does): the real runtime/paged/BlockManager (test_block_pool.cpp) and the
/// deliberately broken managers of tests/wrong/wrong_ch06_pool.cpp go through the very same
/// functions under the same wrapper, so a green suite proves the
/// checks can see each mistake. This file: the invariants seen from outside and the scenario
/// checks; random_operations.h: the property test against the reference model of block_model.h.
///
/// Each check plays the caller too: KvSlots records which token's K/V every slot of the pool
/// holds, written the way a real caller writes the KV cache (poison fresh blocks, copy before
/// write, write each token at its slot). "Every sequence reads its own tokens" is the property
/// that block tables, sharing and copy-on-write exist to keep.

#include <gtest/gtest.h>

#include <cstdint>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/paged/block_manager.h"

namespace inferlab::testing {

/// A failed check with @p message.
inline ::testing::AssertionResult check_failed(const std::string& message) {
  return ::testing::AssertionFailure() << message;
}

/// Which token's K/V each slot (block · block_size + offset) of the pool holds, as a caller that
/// follows the manager's instructions would have written it.
class KvSlots {
 public:
  /// A slot nobody wrote since its block was handed out fresh (KvCache::poison_block).
  static constexpr int32_t kPoison = -1;

  /// A pool of @p num_blocks blocks of @p block_size slots, all poisoned.
  KvSlots(int64_t num_blocks, int64_t block_size)
      : block_size_(block_size), slots_(size_t(num_blocks * block_size), kPoison) {}

  /// A fresh block: its slots hold garbage.
  void poison(int32_t block) {
    for (int64_t offset = 0; offset < block_size_; ++offset) slots_[size_t(block * block_size_ + offset)] = kPoison;
  }
  /// Copy-on-write: every slot of copy.from into copy.to.
  void copy(const paged::BlockCopy& copy) {
    for (int64_t offset = 0; offset < block_size_; ++offset)
      slots_[size_t(copy.to * block_size_ + offset)] = slots_[size_t(copy.from * block_size_ + offset)];
  }
  /// The K/V of @p token written at @p slot.
  void write(int64_t slot, int32_t token) { slots_.at(size_t(slot)) = token; }

  /// The caller's side of an append: poison the fresh block, copy the shared one, write the slot.
  void apply(const paged::SlotAllocation& append, int32_t token) {
    if (append.new_block) poison(*append.new_block);
    if (append.copy) copy(*append.copy);
    write(append.slot, token);
  }

  /// Prefill of tokens [@p from, @p to) of @p seq: each one's K/V at the slot its table names.
  template <class Manager>
  void write_tokens(const Manager& manager, int64_t seq, int64_t from, int64_t to) {
    for (int64_t position = from; position < to; ++position)
      write(slot_of(manager, seq, position), manager.tokens(seq)[size_t(position)]);
  }

  /// Success when the first @p computed tokens of @p seq read back their own K/V through its table.
  template <class Manager>
  ::testing::AssertionResult reads_own_tokens(const Manager& manager, int64_t seq, int64_t computed) const {
    for (int64_t position = 0; position < computed; ++position) {
      const int64_t slot = slot_of(manager, seq, position);
      const int32_t expected = manager.tokens(seq)[size_t(position)], found = slots_[size_t(slot)];
      if (found == expected) continue;
      std::ostringstream message;
      message << "sequence " << seq << " reads position " << position << " at slot " << slot << " and finds "
              << (found == kPoison ? std::string("poison (nobody wrote it since the block was handed out)")
                                   : "the K/V of token " + std::to_string(found))
              << ", not of its token " << expected << " (another sequence overwrote or reused its block)";
      return check_failed(message.str());
    }
    return ::testing::AssertionSuccess();
  }

 private:
  template <class Manager>
  int64_t slot_of(const Manager& manager, int64_t seq, int64_t position) const {
    return int64_t{manager.table(seq)[size_t(position / block_size_)]} * block_size_ + position % block_size_;
  }

  int64_t block_size_;
  std::vector<int32_t> slots_;
};

/// The manager-level invariants seen from outside, through the public interface only: each
/// block's refcount equals the number of block tables holding it (a leak shows here), each table
/// has ⌈num_tokens / block_size⌉ blocks, no partial block is hashed, and num_free_blocks() is
/// every block that no table holds.
template <class Manager>
::testing::AssertionResult tables_agree_with_pool(const Manager& manager) {
  const auto& pool = manager.pool();
  const int64_t block_size = manager.block_size();
  std::vector<int32_t> holders(size_t(pool.num_blocks()), 0);
  for (const int64_t seq : manager.sequences()) {
    const auto& table = manager.table(seq);
    const int64_t num_tokens = manager.num_tokens(seq);
    const int64_t needed = (num_tokens + block_size - 1) / block_size;
    if (int64_t(table.size()) != needed)
      return check_failed("sequence " + std::to_string(seq) + " has " + std::to_string(num_tokens) + " tokens in " +
                          std::to_string(table.size()) + " blocks; it needs " + std::to_string(needed));
    for (size_t logical = 0; logical < table.size(); ++logical) {
      const int32_t block = table[logical];
      if (block < 0 || block >= pool.num_blocks())
        return check_failed("sequence " + std::to_string(seq) + " maps to block " + std::to_string(block) +
                            ", outside the pool");
      ++holders[size_t(block)];
      if (pool.hash_of(block) && int64_t(logical) >= num_tokens / block_size)
        return check_failed("block " + std::to_string(block) + " is hashed, but it is the partial last block of sequence " +
                            std::to_string(seq) + " (" + std::to_string(num_tokens % block_size) + " of " +
                            std::to_string(block_size) + " tokens): only full blocks may enter the prefix cache");
    }
  }
  int64_t held = 0;
  for (int32_t block = 0; block < pool.num_blocks(); ++block) {
    held += holders[size_t(block)] > 0;
    if (pool.refcount(block) != holders[size_t(block)])
      return check_failed("block " + std::to_string(block) + " has refcount " + std::to_string(pool.refcount(block)) +
                          " but " + std::to_string(holders[size_t(block)]) + " block tables hold it" +
                          (pool.refcount(block) > holders[size_t(block)] ? " (a leaked reference)" : ""));
  }
  if (manager.num_free_blocks() != pool.num_blocks() - held)
    return check_failed("num_free_blocks() = " + std::to_string(manager.num_free_blocks()) + " but " +
                        std::to_string(pool.num_blocks() - held) + " blocks are held by no table");
  return ::testing::AssertionSuccess();
}

/// The manager's own check_invariants() (a std::logic_error becomes a failure) and
/// tables_agree_with_pool().
template <class Manager>
::testing::AssertionResult invariants_hold(const Manager& manager) {
  try {
    manager.check_invariants();
  } catch (const std::logic_error& error) {
    return check_failed(std::string("check_invariants(): ") + error.what());
  }
  return tables_agree_with_pool(manager);
}

/// Runs @p check, turning an exception thrown by the manager into a failure: a broken manager
/// may throw where the real one does not, and the check must still report, not crash.
template <class Check>
::testing::AssertionResult without_exceptions(Check&& check) {
  try {
    return check();
  } catch (const std::exception& error) {
    return check_failed(std::string("threw: ") + error.what());
  }
}

namespace detail {

// Returns from the enclosing function when @p result is a failure, with a note of where.
// (The check comes last, as __VA_ARGS__, so that braced prompts with commas pass through.)
#define INFERLAB_CHECK_STEP(where, ...)                                             \
  do {                                                                              \
    if (::testing::AssertionResult step_ = (__VA_ARGS__); !step_)                   \
      return ::testing::AssertionFailure() << (where) << ": " << step_.message();   \
  } while (false)

template <class Manager>
::testing::AssertionResult allocate_and_compute(Manager& manager, KvSlots& kv, int64_t seq,
                                                const std::vector<int32_t>& prompt) {
  const paged::PromptAllocation allocation = manager.allocate_prompt(seq, prompt);
  if (allocation.status != paged::BlockStatus::ok)
    return check_failed("allocate_prompt(" + std::to_string(seq) + ") ran out of blocks");
  for (const int32_t block : allocation.new_blocks) kv.poison(block);
  kv.write_tokens(manager, seq, allocation.cached_tokens, int64_t(prompt.size()));
  manager.mark_computed(seq, int64_t(prompt.size()));
  return invariants_hold(manager);
}

template <class Manager>
::testing::AssertionResult append_and_compute(Manager& manager, KvSlots& kv, int64_t seq, int32_t token,
                                              paged::SlotAllocation* out = nullptr) {
  const paged::SlotAllocation append = manager.append_slot(seq, token);
  if (append.status != paged::BlockStatus::ok)
    return check_failed("append_slot(" + std::to_string(seq) + ") ran out of blocks");
  kv.apply(append, token);
  manager.mark_computed(seq, manager.num_tokens(seq));
  if (out) *out = append;
  return invariants_hold(manager);
}

}  // namespace detail

/// Copy-on-write: a prompt of 1½ blocks is forked, then parent and child each append a different
/// token. Exactly one copy is made (for the shared partial last block, by the first writer; the
/// second finds refcount 1 and writes in place), the shared full block is not copied, refcounts
/// follow, and each sequence reads back its own tokens. A fork at a full last block needs no copy.
/// @p make(num_blocks, block_size) builds the manager.
template <class Make>
::testing::AssertionResult copy_on_write_keeps_forks_apart(Make make) {
  return without_exceptions([&]() -> ::testing::AssertionResult {
    auto manager = make(8, 4);
    KvSlots kv(8, 4);
    INFERLAB_CHECK_STEP("prompt of 6 tokens", detail::allocate_and_compute(manager, kv, 0, {11, 12, 13, 14, 15, 16}));
    manager.fork(0, 1);
    INFERLAB_CHECK_STEP("fork(0, 1)", invariants_hold(manager));
    const int32_t full = manager.table(0)[0], partial = manager.table(0)[1];
    if (manager.table(1) != manager.table(0)) return check_failed("fork(0, 1): the child's table differs from the parent's");

    paged::SlotAllocation parent_append, child_append;
    INFERLAB_CHECK_STEP("append 100 to the parent", detail::append_and_compute(manager, kv, 0, 100, &parent_append));
    INFERLAB_CHECK_STEP("append 200 to the child", detail::append_and_compute(manager, kv, 1, 200, &child_append));
    for (const int64_t seq : {0, 1})
      INFERLAB_CHECK_STEP("after both appends", kv.reads_own_tokens(manager, seq, manager.num_tokens(seq)));
    if (!parent_append.copy)
      return check_failed("the parent appended into partial block " + std::to_string(partial) +
                          ", shared with its fork, without a copy-on-write: the child's K/V would be overwritten");
    if (parent_append.copy->from != partial || parent_append.copy->to != manager.table(0)[1])
      return check_failed("the parent's copy is not shared block " + std::to_string(partial) + " → its new last block");
    if (child_append.copy)
      return check_failed("the child copied block " + std::to_string(child_append.copy->from) +
                          " though nobody else held it any more (one copy is enough)");
    if (manager.table(1)[1] != partial || child_append.slot != int64_t{partial} * 4 + 2)
      return check_failed("the child should write in place, at slot " + std::to_string(partial * 4 + 2));
    if (manager.table(0)[0] != full || manager.table(1)[0] != full || manager.pool().refcount(full) != 2)
      return check_failed("the shared full block " + std::to_string(full) + " must stay shared (refcount 2), not copied");
    if (manager.pool().refcount(partial) != 1 || manager.pool().refcount(manager.table(0)[1]) != 1)
      return check_failed("after the copy, each last block must have refcount 1");

    // Fill the parent's block, fork at a full boundary: the next token starts a new block, no copy.
    INFERLAB_CHECK_STEP("append 101 to the parent", detail::append_and_compute(manager, kv, 0, 101, nullptr));
    manager.fork(0, 2);
    paged::SlotAllocation after_full;
    INFERLAB_CHECK_STEP("append 300 to fork 2", detail::append_and_compute(manager, kv, 2, 300, &after_full));
    if (after_full.copy) return check_failed("appending after a full shared block copied it");
    if (manager.pool().refcount(manager.table(0)[1]) != 2)
      return check_failed("fork 2 must still share the parent's full second block");
    for (const int64_t seq : {0, 1, 2})
      INFERLAB_CHECK_STEP("after fork 2's append", kv.reads_own_tokens(manager, seq, manager.num_tokens(seq)));
    return ::testing::AssertionSuccess();
  });
}

/// Freeing returns every block: prompts that share a cached prefix, a fork, copy-on-write and
/// appends, then each sequence freed in turn; every refcount must follow, and at the end all
/// blocks are free again (refcount 0, num_free_blocks() = num_blocks).
template <class Make>
::testing::AssertionResult free_returns_every_block(Make make) {
  return without_exceptions([&]() -> ::testing::AssertionResult {
    auto manager = make(16, 4);
    KvSlots kv(16, 4);
    const std::vector<int32_t> document{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    INFERLAB_CHECK_STEP("prompt 0", detail::allocate_and_compute(manager, kv, 0, document));
    std::vector<int32_t> sibling(document.begin(), document.begin() + 9);
    sibling.push_back(42);
    INFERLAB_CHECK_STEP("prompt 1 (two cached blocks)", detail::allocate_and_compute(manager, kv, 1, sibling));
    manager.fork(0, 2);
    INFERLAB_CHECK_STEP("fork(0, 2)", invariants_hold(manager));
    INFERLAB_CHECK_STEP("append to the fork (copy-on-write)", detail::append_and_compute(manager, kv, 2, 77));
    INFERLAB_CHECK_STEP("append to the parent", detail::append_and_compute(manager, kv, 0, 78));
    INFERLAB_CHECK_STEP("prompt 3", detail::allocate_and_compute(manager, kv, 3, {9, 9, 9}));
    for (const int64_t seq : {2, 0, 3, 1}) {
      manager.free(seq);
      INFERLAB_CHECK_STEP("free(" + std::to_string(seq) + ")", invariants_hold(manager));
    }
    for (int32_t block = 0; block < 16; ++block)
      if (manager.pool().refcount(block) != 0)
        return check_failed("every sequence is freed but block " + std::to_string(block) + " has refcount " +
                            std::to_string(manager.pool().refcount(block)) + " (a leak)");
    if (manager.num_free_blocks() != 16)
      return check_failed("every sequence is freed but only " + std::to_string(manager.num_free_blocks()) +
                          " of 16 blocks are free");
    return ::testing::AssertionSuccess();
  });
}

/// Only full blocks enter the prefix cache: a 6-token prompt (block size 4) registers one block,
/// its partial block none; once appends fill it, it is registered; a later prompt that shares 6
/// tokens gets only the full block (4 cached tokens).
template <class Make>
::testing::AssertionResult only_full_blocks_are_hashed(Make make) {
  return without_exceptions([&]() -> ::testing::AssertionResult {
    auto manager = make(8, 4);
    KvSlots kv(8, 4);
    INFERLAB_CHECK_STEP("prompt of 6 tokens", detail::allocate_and_compute(manager, kv, 0, {1, 2, 3, 4, 5, 6}));
    const auto& pool = manager.pool();
    const int32_t partial = manager.table(0)[1];
    if (pool.hash_of(partial))
      return check_failed("block " + std::to_string(partial) + " holds 2 of 4 tokens but was registered in the prefix cache");
    if (pool.num_cached() != 1 || !pool.hash_of(manager.table(0)[0]))
      return check_failed("after computing 6 tokens exactly one block (the full one) must be cached, not " +
                          std::to_string(pool.num_cached()));
    const paged::PromptAllocation twin = manager.allocate_prompt(1, std::vector<int32_t>{1, 2, 3, 4, 5, 6, 9});
    if (twin.status != paged::BlockStatus::ok || twin.cached_tokens != 4)
      return check_failed("a prompt sharing 6 tokens must get 4 cached tokens (the full block), got " +
                          std::to_string(twin.cached_tokens));
    for (const int32_t block : twin.new_blocks) kv.poison(block);
    kv.write_tokens(manager, 1, 4, 7);
    manager.mark_computed(1, 7);
    INFERLAB_CHECK_STEP("the second prompt", invariants_hold(manager));
    INFERLAB_CHECK_STEP("append 7", detail::append_and_compute(manager, kv, 0, 7));
    INFERLAB_CHECK_STEP("append 8 (fills the block)", detail::append_and_compute(manager, kv, 0, 8));
    if (!pool.hash_of(manager.table(0)[1]) || pool.num_cached() != 2)
      return check_failed("the block filled by appends must be registered once full and computed");
    const paged::PromptAllocation later = manager.allocate_prompt(2, std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 0});
    if (later.cached_tokens != 8) return check_failed("a prompt sharing both full blocks must get 8 cached tokens");
    for (const int64_t seq : {0, 1}) INFERLAB_CHECK_STEP("end", kv.reads_own_tokens(manager, seq, manager.num_tokens(seq)));
    return invariants_hold(manager);
  });
}

#undef INFERLAB_CHECK_STEP

}  // namespace inferlab::testing
