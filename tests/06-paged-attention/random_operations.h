#pragma once
/// @file random_operations.h
/// Chapter 06's property test: random allocate_prompt / mark_computed / append_slot / fork / free
/// on a block manager and on the reference model (block_model.h) side by side, everything
/// compared after every operation. Templated on the manager, like block_manager_check.h, so the
/// wrong fixtures run through it too.

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/rng.h"
#include "runtime/paged/block_manager.h"
#include "tests/06-paged-attention/block_manager_check.h"
#include "tests/06-paged-attention/block_model.h"

namespace inferlab::testing {

/// The sizes of a random-operations run.
struct PropertyConfig {
  int64_t num_blocks = 16;  ///< a small pool: allocation fails and blocks are evicted often
  int64_t block_size = 4;   ///< tokens per block
  int64_t num_ops = 10000;  ///< operations in the run
  int32_t vocab = 3;        ///< token ids 0 … vocab − 1: prefixes repeat
  int64_t max_live = 8;     ///< at most this many sequences at once
  int64_t max_tokens = 24;  ///< a sequence this long is freed rather than grown
  bool prefix_caching = true;  ///< must match the manager that make() builds
};

/// What a random-operations run exercised (so a test can insist that each path was taken).
struct PropertyStats {
  int64_t prompts = 0;          ///< allocate_prompt calls that succeeded
  int64_t prompt_hits = 0;      ///< … of which took at least one cached block
  int64_t capped_hits = 0;      ///< … whose hit was capped to leave the last token to compute
  int64_t out_of_blocks = 0;    ///< allocations that ran out of blocks (nothing changed)
  int64_t copies = 0;           ///< copy-on-write copies
  int64_t evictions = 0;        ///< evictable blocks reused
  int64_t forks = 0;            ///< fork calls
  int64_t frees = 0;            ///< free calls
  int64_t partial_computes = 0; ///< mark_computed calls over part of a prompt (chunked prefill)
};

namespace detail {

/// One random-operations run: the manager and the model side by side, the caller's KV slots,
/// and a comparison of everything after every operation.
template <class Manager>
class PropertyRun {
 public:
  PropertyRun(Manager manager, const PropertyConfig& config, Rng& rng)
      : manager_(std::move(manager)), model_(config.num_blocks, config.block_size, config.prefix_caching),
        kv_(config.num_blocks, config.block_size), config_(config), rng_(rng) {
    // A few long documents; prompts are their prefixes plus a little noise, so prefixes repeat.
    for (int d = 0; d < 4; ++d) {
      documents_.emplace_back();
      for (int64_t i = 0; i < config.max_tokens; ++i) documents_.back().push_back(token());
    }
  }

  ::testing::AssertionResult run(PropertyStats& stats) {
    for (int64_t op = 0; op < config_.num_ops; ++op) {
      const ::testing::AssertionResult result = without_exceptions([&] { return step(stats); });
      if (!result) return ::testing::AssertionFailure() << "operation " << op << " (" << last_op_ << "): " << result.message();
      const ::testing::AssertionResult same = without_exceptions([&] { return compare(); });
      if (!same) return ::testing::AssertionFailure() << "after operation " << op << " (" << last_op_ << "): " << same.message();
    }
    stats.evictions += model_.evictions();
    return ::testing::AssertionSuccess();
  }

 private:
  int32_t token() { return int32_t(rng_.integer(0, config_.vocab - 1)); }
  int64_t pick(const std::vector<int64_t>& ids) { return ids[size_t(rng_.integer(0, int64_t(ids.size()) - 1))]; }

  ::testing::AssertionResult step(PropertyStats& stats) {
    std::vector<int64_t> live, computed, uncomputed, long_ones;
    for (const auto& [seq, s] : model_.sequences()) {
      live.push_back(seq);
      (s.computed == int64_t(s.tokens.size()) ? computed : uncomputed).push_back(seq);
      if (int64_t(s.tokens.size()) >= config_.max_tokens) long_ones.push_back(seq);
    }
    const int64_t dice = rng_.integer(0, 99);
    if (!long_ones.empty() && dice < 30) return free(pick(long_ones), stats);
    if (live.empty() || (dice < 25 && int64_t(live.size()) < config_.max_live)) return prompt(stats);
    if (dice < 35 && !uncomputed.empty()) return compute(pick(uncomputed), stats);
    if (dice < 70 && !computed.empty()) return append(pick(computed), stats);
    if (dice < 80 && int64_t(live.size()) < config_.max_live) return fork(pick(live), stats);
    return free(pick(live), stats);
  }

  ::testing::AssertionResult prompt(PropertyStats& stats) {
    const auto& document = documents_[size_t(rng_.integer(0, int64_t(documents_.size()) - 1))];
    std::vector<int32_t> prompt(document.begin(), document.begin() + rng_.integer(1, config_.max_tokens / 2));
    for (int64_t extra = rng_.integer(-2, 3); extra > 0; --extra) prompt.push_back(token());
    const int64_t seq = next_seq_++;
    last_op_ = "allocate_prompt(" + std::to_string(seq) + ", " + std::to_string(prompt.size()) + " tokens)";
    bool capped = false;
    const std::vector<int> hits = model_.prompt_hits(prompt, capped);
    const bool fits = model_.blocks_taken(prompt, hits) <= model_.num_free();
    const paged::PromptAllocation allocation = manager_.allocate_prompt(seq, prompt);
    if ((allocation.status == paged::BlockStatus::ok) != fits)
      return check_failed(std::string("the model expects ") + (fits ? "success" : "out_of_blocks"));
    if (!fits) {
      ++stats.out_of_blocks;
      if (manager_.has(seq)) return check_failed("out_of_blocks, yet the sequence exists");
      return ::testing::AssertionSuccess();
    }
    ++stats.prompts;
    stats.prompt_hits += !hits.empty();
    stats.capped_hits += capped;
    if (allocation.cached_tokens != int64_t(hits.size()) * config_.block_size)
      return check_failed("cached_tokens = " + std::to_string(allocation.cached_tokens) + ", the model expects " +
                          std::to_string(hits.size() * config_.block_size));
    model_.add_prompt(seq, prompt, hits);
    const auto& table = manager_.table(seq);
    if (table.size() != model_.sequence(seq).table.size()) return check_failed("the table has the wrong length");
    if (std::vector<int32_t>(table.begin() + std::ptrdiff_t(hits.size()), table.end()) != allocation.new_blocks)
      return check_failed("new_blocks are not the table's blocks after the cached ones");
    for (size_t i = 0; i < table.size(); ++i)
      if (auto bound = model_.bind(model_.sequence(seq).table[i], table[i]); !bound) return bound;
    for (const int32_t block : allocation.new_blocks) kv_.poison(block);
    if (rng_.integer(0, 3) > 0) return compute_to(seq, int64_t(prompt.size()));
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult compute(int64_t seq, PropertyStats& stats) {
    const auto& s = model_.sequence(seq);
    const int64_t target = rng_.integer(s.computed + 1, int64_t(s.tokens.size()));
    stats.partial_computes += target < int64_t(s.tokens.size());
    last_op_ = "mark_computed(" + std::to_string(seq) + ", " + std::to_string(target) + ")";
    return compute_to(seq, target);
  }

  ::testing::AssertionResult compute_to(int64_t seq, int64_t num_tokens) {
    kv_.write_tokens(manager_, seq, model_.sequence(seq).computed, num_tokens);
    manager_.mark_computed(seq, num_tokens);
    model_.compute(seq, num_tokens);
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult append(int64_t seq, PropertyStats& stats) {
    const int32_t new_token = token();
    last_op_ = "append_slot(" + std::to_string(seq) + ", " + std::to_string(new_token) + ")";
    auto& s = model_.sequence(seq);
    const int64_t offset = int64_t(s.tokens.size()) % config_.block_size;
    const bool shared = offset != 0 && model_.block(s.table.back()).refcount > 1;
    const bool fits = (offset != 0 && !shared) || model_.num_free() > 0;
    const paged::SlotAllocation append = manager_.append_slot(seq, new_token);
    if ((append.status == paged::BlockStatus::ok) != fits)
      return check_failed(std::string("the model expects ") + (fits ? "success" : "out_of_blocks"));
    if (!fits) {
      ++stats.out_of_blocks;
      return ::testing::AssertionSuccess();
    }
    if (append.copy.has_value() != shared)
      return check_failed(shared ? "the manager made no copy of partial block " +
                                       std::to_string(model_.block(s.table.back()).physical) +
                                       ", shared with a fork: the fork's K/V would be overwritten"
                                 : "the manager made a copy that the model does not expect");
    std::optional<paged::BlockCopy> expected_copy;
    if (offset == 0) {
      s.table.push_back(model_.allocate());
    } else if (shared) {
      const int old_block = s.table.back();
      s.table.back() = model_.allocate();
      model_.release(old_block);
      expected_copy = paged::BlockCopy{model_.block(old_block).physical, manager_.table(seq).back()};
      ++stats.copies;
    }
    s.tokens.push_back(new_token);
    if (auto bound = model_.bind(s.table.back(), manager_.table(seq).back()); !bound) return bound;
    if (append.copy != expected_copy)
      return check_failed("the copy is not shared block " + std::to_string(expected_copy->from) + " → block " +
                          std::to_string(expected_copy->to));
    if ((offset == 0 || shared) != append.new_block.has_value() ||
        (append.new_block && *append.new_block != manager_.table(seq).back()))
      return check_failed("new_block is not the table's fresh last block");
    const int64_t slot = int64_t{manager_.table(seq).back()} * config_.block_size + offset;
    if (append.slot != slot)
      return check_failed("slot = " + std::to_string(append.slot) + ", expected " + std::to_string(slot));
    kv_.apply(append, new_token);
    return compute_to(seq, int64_t(s.tokens.size()));
  }

  ::testing::AssertionResult fork(int64_t parent, PropertyStats& stats) {
    const int64_t child = next_seq_++;
    last_op_ = "fork(" + std::to_string(parent) + ", " + std::to_string(child) + ")";
    manager_.fork(parent, child);
    model_.fork(parent, child);
    ++stats.forks;
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult free(int64_t seq, PropertyStats& stats) {
    last_op_ = "free(" + std::to_string(seq) + ")";
    manager_.free(seq);
    model_.free(seq);
    ++stats.frees;
    return ::testing::AssertionSuccess();
  }

  // Everything observable against the model, then the invariants and the caller's KV.
  ::testing::AssertionResult compare() {
    if (auto held = invariants_hold(manager_); !held) return held;
    std::vector<int64_t> expected_ids;
    for (const auto& entry : model_.sequences()) expected_ids.push_back(entry.first);
    if (manager_.sequences() != expected_ids) return check_failed("the set of sequences differs from the model's");
    for (const auto& [seq, s] : model_.sequences()) {
      if (manager_.tokens(seq) != s.tokens) return check_failed("sequence " + std::to_string(seq) + "'s tokens differ");
      const auto& table = manager_.table(seq);
      if (table.size() != s.table.size())
        return check_failed("sequence " + std::to_string(seq) + " has " + std::to_string(table.size()) +
                            " blocks, the model " + std::to_string(s.table.size()));
      for (size_t i = 0; i < table.size(); ++i)
        if (table[i] != model_.block(s.table[i]).physical)
          return check_failed("sequence " + std::to_string(seq) + "'s logical block " + std::to_string(i) + " is block " +
                              std::to_string(table[i]) + ", the model expects block " +
                              std::to_string(model_.block(s.table[i]).physical) + " (shared blocks must stay shared)");
      if (auto own = kv_.reads_own_tokens(manager_, seq, s.computed); !own) return own;
    }
    if (manager_.num_free_blocks() != model_.num_free())
      return check_failed("num_free_blocks() = " + std::to_string(manager_.num_free_blocks()) + ", the model expects " +
                          std::to_string(model_.num_free()));
    const auto& pool = manager_.pool();
    for (int32_t physical = 0; physical < pool.num_blocks(); ++physical) {
      const int id = model_.owner(physical);
      const int32_t expected = id < 0 ? 0 : model_.block(id).refcount;
      const bool cached = id >= 0 && model_.block(id).prefix.has_value();
      if (pool.refcount(physical) != expected || pool.hash_of(physical).has_value() != cached)
        return check_failed("block " + std::to_string(physical) + " has refcount " +
                            std::to_string(pool.refcount(physical)) + (pool.hash_of(physical) ? ", hashed" : ", unhashed") +
                            "; the model expects refcount " + std::to_string(expected) +
                            (cached ? ", cached" : ", not cached"));
    }
    return ::testing::AssertionSuccess();
  }

  Manager manager_;
  BlockModel model_;
  KvSlots kv_;
  PropertyConfig config_;
  Rng& rng_;
  std::vector<std::vector<int32_t>> documents_;
  int64_t next_seq_ = 0;
  std::string last_op_;
};

}  // namespace detail

/// @p config.num_ops random operations — allocate_prompt (prefixes of a few documents over a
/// tiny vocabulary, so prefixes repeat), mark_computed (whole or partial), append_slot, fork and
/// free, in a pool small enough to run out and evict — on the manager that @p make(num_blocks,
/// block_size) builds and on BlockModel side by side. After every operation: the invariants,
/// the sequences' tokens and tables (shared blocks, cache hits and eviction victims are the
/// model's), refcounts and cached blocks, num_free_blocks(), and that each sequence reads back
/// its own computed tokens. @p stats (optional) counts what the run exercised.
template <class Make>
::testing::AssertionResult random_operations_match_model(Make make, const PropertyConfig& config, Rng& rng,
                                                         PropertyStats* stats = nullptr) {
  PropertyStats local;
  detail::PropertyRun run(make(config.num_blocks, config.block_size), config, rng);
  const ::testing::AssertionResult result = run.run(stats ? *stats : local);
  if (!result) return ::testing::AssertionFailure() << "block size " << config.block_size << ", " << config.num_blocks
                                                    << " blocks: " << result.message();
  return result;
}

}  // namespace inferlab::testing
