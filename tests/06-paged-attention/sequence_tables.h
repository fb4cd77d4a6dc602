#pragma once
/// @file sequence_tables.h
/// The caller's side of chapter 06's block manager, for tests: a set of sequences, each with its
/// tokens and its paged::BlockTable, as the engine's Sequence holds them (runtime/engine/
/// sequence.h), handed to a manager with BlockManager's table interface (allocate, append_slot,
/// mark_computed, fork, free, check_invariants over the live tables). The checks of
/// block_manager_check.h and random_operations.h address sequences by id through it; the real
/// runtime::paged::BlockManager and the broken sketches of tests/wrong/wrong_ch06_pool.cpp sit
/// under the very same wrapper. An unknown or duplicate id throws std::invalid_argument "seq = …".

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/check.h"
#include "runtime/paged/block_manager.h"

namespace inferlab::testing {

/// Sequences by id over a manager of type @p Manager (paged::BlockManager, or a test sketch with
/// its interface).
template <class Manager = paged::BlockManager>
class SequenceTables {
 public:
  /// Sequences over @p manager (it holds no sequence yet).
  explicit SequenceTables(Manager manager) : manager_(std::move(manager)) {}

  /// A new sequence @p seq with @p prompt and the blocks for it (Manager::allocate); on
  /// out_of_blocks no sequence is added.
  paged::PromptAllocation allocate_prompt(int64_t seq, std::span<const int32_t> prompt) {
    require(!has(seq), "seq", seq, "is already a sequence");
    Entry entry;
    entry.tokens.assign(prompt.begin(), prompt.end());
    const paged::PromptAllocation result = manager_.allocate(entry.table, prompt);
    if (result.status == paged::BlockStatus::ok) sequences_.emplace(seq, std::move(entry));
    return result;
  }
  /// Appends @p token to @p seq and gives it a slot (Manager::append_slot); on out_of_blocks
  /// the sequence is unchanged.
  paged::SlotAllocation append_slot(int64_t seq, int32_t token) {
    Entry& s = entry(seq);
    s.tokens.push_back(token);
    const paged::SlotAllocation result = manager_.append_slot(s.table, s.tokens);
    if (result.status != paged::BlockStatus::ok) s.tokens.pop_back();
    return result;
  }
  /// Manager::mark_computed on @p seq's table.
  void mark_computed(int64_t seq, int64_t num_tokens) { manager_.mark_computed(entry(seq).table, num_tokens); }
  /// New sequence @p child: @p parent's tokens and a forked table (Manager::fork).
  void fork(int64_t parent, int64_t child) {
    const Entry& p = entry(parent);
    require(!has(child), "seq", child, "is already a sequence");
    Entry copy{p.tokens, manager_.fork(p.table)};
    sequences_.emplace(child, std::move(copy));
  }
  /// Frees @p seq's blocks (Manager::free) and forgets it.
  void free(int64_t seq) {
    manager_.free(entry(seq).table);
    sequences_.erase(seq);
  }

  /// True when @p seq exists.
  bool has(int64_t seq) const { return sequences_.contains(seq); }
  /// @p seq's physical blocks.
  const std::vector<int32_t>& table(int64_t seq) const { return entry(seq).table.blocks; }
  /// @p seq's whole table, writable: tests corrupt it to prove check_invariants() sees it.
  paged::BlockTable& table_state(int64_t seq) { return entry(seq).table; }
  /// @p seq's tokens.
  const std::vector<int32_t>& tokens(int64_t seq) const { return entry(seq).tokens; }
  /// @p seq's token count.
  int64_t num_tokens(int64_t seq) const { return int64_t(entry(seq).tokens.size()); }
  /// Every sequence id, increasing.
  std::vector<int64_t> sequences() const {
    std::vector<int64_t> ids;
    for (const auto& entry : sequences_) ids.push_back(entry.first);
    return ids;
  }
  /// Manager::num_free_blocks.
  int64_t num_free_blocks() const { return manager_.num_free_blocks(); }
  /// Manager::blocks_needed.
  int64_t blocks_needed(int64_t num_tokens) const { return manager_.blocks_needed(num_tokens); }
  /// Manager::can_allocate.
  bool can_allocate(std::span<const int32_t> prompt) const { return manager_.can_allocate(prompt); }
  /// Manager::can_append on @p seq's table.
  bool can_append(int64_t seq) const { return manager_.can_append(entry(seq).table); }
  /// Manager::block_size.
  int64_t block_size() const { return manager_.block_size(); }
  /// Manager::pool.
  const auto& pool() const { return manager_.pool(); }
  /// The manager.
  Manager& manager() { return manager_; }
  /// The manager, read-only.
  const Manager& manager() const { return manager_; }
  /// Manager::check_invariants over every sequence's table and tokens.
  void check_invariants() const {
    std::vector<paged::SequenceBlocks> live;
    for (const auto& [seq, s] : sequences_) live.push_back({seq, &s.table, s.tokens});
    manager_.check_invariants(live);
  }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    paged::BlockTable table;
  };
  Entry& entry(int64_t seq) {
    const auto found = sequences_.find(seq);
    require(found != sequences_.end(), "seq", seq, "is not a sequence");
    return found->second;
  }
  const Entry& entry(int64_t seq) const {
    const auto found = sequences_.find(seq);
    require(found != sequences_.end(), "seq", seq, "is not a sequence");
    return found->second;
  }

  Manager manager_;
  std::map<int64_t, Entry> sequences_;
};

}  // namespace inferlab::testing
