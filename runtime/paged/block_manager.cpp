#include "runtime/paged/block_manager.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "runtime/paged/prefix_hash.h"

namespace inferlab::paged {
namespace {

[[noreturn]] void broken(const std::string& message) { throw std::logic_error("BlockManager: " + message); }

std::string where(int64_t seq, size_t logical) {
  return "sequence " + std::to_string(seq) + "'s logical block " + std::to_string(logical);
}

}  // namespace

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, bool prefix_caching)
    : pool_(num_blocks, block_size), prefix_caching_(prefix_caching) {}

BlockManager::Sequence& BlockManager::sequence(int64_t seq) {
  const auto found = sequences_.find(seq);
  require(found != sequences_.end(), "seq", seq, "is not a sequence of this block manager");
  return found->second;
}

const BlockManager::Sequence& BlockManager::sequence(int64_t seq) const {
  const auto found = sequences_.find(seq);
  require(found != sequences_.end(), "seq", seq, "is not a sequence of this block manager");
  return found->second;
}

void BlockManager::require_new(int64_t seq) const {
  require(!has(seq), "seq", seq, "is already a sequence of this block manager");
}

BlockManager::PromptPlan BlockManager::plan_prompt(std::span<const int32_t> prompt) const {
  require(!prompt.empty(), "prompt.size()", prompt.size(), "must be > 0");
  PromptPlan plan;
  const auto num_blocks = blocks_needed(static_cast<int64_t>(prompt.size()));
  if (prefix_caching_) {
    plan.block_hashes = prefix_block_hashes(prompt, block_size());
    // The last prompt token must be computed (its logits sample the first output token), so a
    // hit may only cover full blocks that end at or before token size − 2.
    const auto max_hits = (static_cast<int64_t>(prompt.size()) - 1) / block_size();
    for (int64_t i = 0; i < max_hits; ++i) {
      const auto block = pool_.cached_block(plan.block_hashes[size_t(i)]);
      if (!block) break;  // chained hashes: after one miss, no later block can match
      plan.hit_blocks.push_back(*block);
      if (pool_.refcount(*block) == 0) ++plan.blocks_taken;  // reviving it takes it from num_free()
    }
  }
  plan.fresh_blocks = num_blocks - static_cast<int64_t>(plan.hit_blocks.size());
  plan.blocks_taken += plan.fresh_blocks;
  return plan;
}

PromptAllocation BlockManager::allocate_prompt(int64_t seq, std::span<const int32_t> prompt) {
  require_new(seq);
  PromptPlan plan = plan_prompt(prompt);
  PromptAllocation result;
  // Decide before touching anything: undoing a revived hit would move it in the LRU order.
  if (plan.blocks_taken > pool_.num_free()) {
    result.status = BlockStatus::out_of_blocks;
    return result;
  }
  Sequence fresh;
  fresh.tokens.assign(prompt.begin(), prompt.end());
  for (size_t i = 0; i < plan.hit_blocks.size(); ++i) {
    const auto block = pool_.lookup(plan.block_hashes[i]);
    if (block != plan.hit_blocks[i]) broken("the prefix cache changed between planning and taking its blocks");
    fresh.table.push_back(*block);
  }
  for (int64_t i = 0; i < plan.fresh_blocks; ++i) {
    const auto block = pool_.allocate();
    if (!block) broken("the pool ran out of blocks that it had counted as free");
    fresh.table.push_back(*block);
    result.new_blocks.push_back(*block);
  }
  fresh.block_hashes = std::move(plan.block_hashes);
  fresh.num_registered = static_cast<int64_t>(plan.hit_blocks.size());
  result.cached_tokens = fresh.num_registered * block_size();
  sequences_.emplace(seq, std::move(fresh));
  return result;
}

SlotAllocation BlockManager::append_slot(int64_t seq, int32_t token) {
  Sequence& s = sequence(seq);
  SlotAllocation result;
  const auto offset = static_cast<int64_t>(s.tokens.size()) % block_size();
  if (offset == 0) {  // the last block is full (or there is none): the token starts a new block
    const auto block = pool_.allocate();
    if (!block) {
      result.status = BlockStatus::out_of_blocks;
      return result;
    }
    s.table.push_back(*block);
    result.new_block = block;
  } else if (const int32_t last = s.table.back(); pool_.refcount(last) > 1) {
    // Copy-on-write: writing into a block that another table also reads would change that
    // sequence's past. Take a private copy; the others keep the original.
    const auto block = pool_.allocate();
    if (!block) {
      result.status = BlockStatus::out_of_blocks;
      return result;
    }
    pool_.release(last);  // refcount was > 1: stays in use by the others
    s.table.back() = *block;
    result.copy = BlockCopy{last, *block};
    result.new_block = block;
  }
  result.slot = int64_t{s.table.back()} * block_size() + offset;
  s.tokens.push_back(token);
  if (prefix_caching_ && offset + 1 == block_size()) {  // this token fills its block: hash it
    const uint64_t parent = s.block_hashes.empty() ? kFirstBlockParent : s.block_hashes.back();
    const std::span<const int32_t> block_tokens(s.tokens.end() - block_size(), s.tokens.end());
    s.block_hashes.push_back(block_hash(parent, block_tokens));
  }
  return result;
}

void BlockManager::mark_computed(int64_t seq, int64_t num_tokens) {
  Sequence& s = sequence(seq);
  require(num_tokens >= 0 && num_tokens <= static_cast<int64_t>(s.tokens.size()), "num_tokens", num_tokens,
          "must be in [0, " + std::to_string(s.tokens.size()) + "], the tokens of sequence " + std::to_string(seq));
  if (!prefix_caching_) return;
  // Only full blocks: floor, never ceil — a partial block's hash would name content it does not
  // have yet.
  const int64_t full_blocks = num_tokens / block_size();
  for (int64_t i = s.num_registered; i < full_blocks; ++i)
    pool_.register_hash(s.table[size_t(i)], s.block_hashes[size_t(i)]);  // false: a twin is cached; fine
  s.num_registered = std::max(s.num_registered, full_blocks);
}

void BlockManager::fork(int64_t parent, int64_t child) {
  const Sequence& p = sequence(parent);
  require_new(child);
  for (const int32_t block : p.table) pool_.retain(block);
  Sequence copy = p;
  sequences_.emplace(child, std::move(copy));
}

void BlockManager::free(int64_t seq) {
  Sequence& s = sequence(seq);
  for (auto block = s.table.rbegin(); block != s.table.rend(); ++block) pool_.release(*block);
  sequences_.erase(seq);
}

const std::vector<int32_t>& BlockManager::table(int64_t seq) const { return sequence(seq).table; }

const std::vector<int32_t>& BlockManager::tokens(int64_t seq) const { return sequence(seq).tokens; }

int64_t BlockManager::num_tokens(int64_t seq) const { return static_cast<int64_t>(sequence(seq).tokens.size()); }

std::vector<int64_t> BlockManager::sequences() const {
  std::vector<int64_t> ids;
  ids.reserve(sequences_.size());
  for (const auto& entry : sequences_) ids.push_back(entry.first);
  return ids;
}

int64_t BlockManager::blocks_needed(int64_t num_tokens) const {
  require(num_tokens >= 0, "num_tokens", num_tokens, "must be >= 0");
  return num_tokens / block_size() + (num_tokens % block_size() != 0 ? 1 : 0);
}

bool BlockManager::can_allocate(std::span<const int32_t> prompt) const {
  return blocks_to_allocate(prompt) <= pool_.num_free();
}

int64_t BlockManager::blocks_to_allocate(std::span<const int32_t> prompt) const {
  return plan_prompt(prompt).blocks_taken;
}

bool BlockManager::can_append(int64_t seq) const {
  const Sequence& s = sequence(seq);
  const bool needs_block =
      s.tokens.size() % size_t(block_size()) == 0 || pool_.refcount(s.table.back()) > 1;
  return !needs_block || pool_.num_free() > 0;
}

void BlockManager::check_invariants() const {
  pool_.check_invariants();
  std::vector<int32_t> holders(size_t(pool_.num_blocks()), 0);
  for (const auto& [seq, s] : sequences_) {
    const auto name = "sequence " + std::to_string(seq);
    const auto num_tokens = static_cast<int64_t>(s.tokens.size());
    if (num_tokens == 0) broken(name + " has no tokens");
    if (static_cast<int64_t>(s.table.size()) != blocks_needed(num_tokens))
      broken(name + " has " + std::to_string(num_tokens) + " tokens in " + std::to_string(s.table.size()) +
             " blocks; it needs " + std::to_string(blocks_needed(num_tokens)));
    const auto full_blocks = static_cast<size_t>(num_tokens / block_size());
    if (prefix_caching_ && s.block_hashes != prefix_block_hashes(s.tokens, block_size()))
      broken(name + "'s block hashes are not the chained hashes of its tokens");
    if (s.num_registered > static_cast<int64_t>(full_blocks))
      broken(name + " registered " + std::to_string(s.num_registered) + " blocks but has only " +
             std::to_string(full_blocks) + " full ones");
    for (size_t logical = 0; logical < s.table.size(); ++logical) {
      const int32_t block = s.table[logical];
      if (block < 0 || block >= pool_.num_blocks())
        broken(where(seq, logical) + " is block " + std::to_string(block) + ", out of range");
      if (std::find(s.table.begin(), s.table.begin() + std::ptrdiff_t(logical), block) !=
          s.table.begin() + std::ptrdiff_t(logical))
        broken(name + " holds block " + std::to_string(block) + " twice");
      ++holders[size_t(block)];
      const auto hash = pool_.hash_of(block);
      if (!hash) continue;
      if (logical >= full_blocks)
        broken("block " + std::to_string(block) + " is hashed but it is " + where(seq, logical) + ", which holds " +
               std::to_string(num_tokens - int64_t(logical) * block_size()) + " of " +
               std::to_string(block_size()) + " tokens (only full blocks may be hashed)");
      if (!prefix_caching_) broken("block " + std::to_string(block) + " is hashed with prefix caching off");
      if (*hash != s.block_hashes[logical])
        broken("block " + std::to_string(block) + "'s hash is not the chained hash of " + where(seq, logical));
    }
  }
  for (int32_t block = 0; block < pool_.num_blocks(); ++block)
    if (pool_.refcount(block) != holders[size_t(block)])
      broken("block " + std::to_string(block) + " has refcount " + std::to_string(pool_.refcount(block)) + " but " +
             std::to_string(holders[size_t(block)]) + " block tables hold it" +
             (pool_.refcount(block) > holders[size_t(block)] ? " (a leaked reference)" : " (a missing reference)"));
}

}  // namespace inferlab::paged
