#include "runtime/paged/block_manager.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "runtime/paged/prefix_hash.h"

namespace inferlab::paged {
namespace {

[[noreturn]] void broken(const std::string& message) {
  throw std::logic_error("BlockManager: " + message);
}

std::string where(int64_t seq, size_t logical) {
  return "sequence " + std::to_string(seq) + "'s logical block " + std::to_string(logical);
}

}  // namespace

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, bool prefix_caching)
    : pool_(num_blocks, block_size), prefix_caching_(prefix_caching) {}

BlockManager::PromptPlan BlockManager::plan_prompt(std::span<const int32_t> prompt, uint64_t root) const {
  require(!prompt.empty(), "prompt.size()", prompt.size(), "must be > 0");
  PromptPlan plan;
  const auto num_blocks = blocks_needed(static_cast<int64_t>(prompt.size()));
  if (prefix_caching_) {
    plan.block_hashes = prefix_block_hashes(prompt, block_size(), root);
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

PromptAllocation BlockManager::allocate(BlockTable& table, std::span<const int32_t> prompt, uint64_t root) {
  require(table.empty(), "table.blocks.size()", table.blocks.size(),
          "must be 0: allocate() gives a sequence its first blocks (free() it first)");
  PromptPlan plan = plan_prompt(prompt, root);
  PromptAllocation result;
  // Decide before touching anything: undoing a revived hit would move it in the LRU order.
  if (plan.blocks_taken > pool_.num_free()) {
    result.status = BlockStatus::out_of_blocks;
    return result;
  }
  BlockTable fresh;
  for (size_t i = 0; i < plan.hit_blocks.size(); ++i) {
    const auto block = pool_.lookup(plan.block_hashes[i]);
    if (block != plan.hit_blocks[i]) broken("the prefix cache changed between planning and taking its blocks");
    fresh.blocks.push_back(*block);
  }
  for (int64_t i = 0; i < plan.fresh_blocks; ++i) {
    const auto block = pool_.allocate();
    if (!block) broken("the pool ran out of blocks that it had counted as free");
    fresh.blocks.push_back(*block);
    result.new_blocks.push_back(*block);
  }
  fresh.hashes = std::move(plan.block_hashes);
  fresh.root = root;
  fresh.num_tokens = static_cast<int64_t>(prompt.size());
  fresh.num_registered = static_cast<int64_t>(plan.hit_blocks.size());
  result.cached_tokens = fresh.num_registered * block_size();
  table = std::move(fresh);
  return result;
}

SlotAllocation BlockManager::append_slot(BlockTable& table, std::span<const int32_t> tokens) {
  require(static_cast<int64_t>(tokens.size()) == table.num_tokens + 1, "tokens.size()", tokens.size(),
          "must be the table's " + std::to_string(table.num_tokens) + " slotted tokens + the one to append");
  SlotAllocation result;
  const auto offset = table.num_tokens % block_size();
  if (offset == 0) {  // the last block is full (or there is none): the token starts a new block
    const auto block = pool_.allocate();
    if (!block) {
      result.status = BlockStatus::out_of_blocks;
      return result;
    }
    table.blocks.push_back(*block);
    result.new_block = block;
  } else if (const int32_t last = table.blocks.back(); pool_.refcount(last) > 1) {
    // Copy-on-write: writing into a block that another table also reads would change that
    // sequence's past. Take a private copy; the others keep the original.
    const auto block = pool_.allocate();
    if (!block) {
      result.status = BlockStatus::out_of_blocks;
      return result;
    }
    pool_.release(last);  // refcount was > 1: stays in use by the others
    table.blocks.back() = *block;
    result.copy = BlockCopy{last, *block};
    result.new_block = block;
  }
  result.slot = int64_t{table.blocks.back()} * block_size() + offset;
  ++table.num_tokens;
  if (prefix_caching_ && offset + 1 == block_size()) {  // this token fills its block: hash it
    const uint64_t parent = table.hashes.empty() ? table.root : table.hashes.back();
    table.hashes.push_back(block_hash(parent, tokens.last(size_t(block_size()))));
  }
  return result;
}

void BlockManager::mark_computed(BlockTable& table, int64_t num_tokens) {
  require(num_tokens >= 0 && num_tokens <= table.num_tokens, "num_tokens", num_tokens,
          "must be in [0, " + std::to_string(table.num_tokens) + "], the table's slotted tokens");
  if (!prefix_caching_) return;
  // Only full blocks: floor, never ceil — a partial block's hash would name content it does not
  // have yet.
  const int64_t full_blocks = num_tokens / block_size();
  for (int64_t i = table.num_registered; i < full_blocks; ++i)
    pool_.register_hash(table.blocks[size_t(i)], table.hashes[size_t(i)]);  // false: a twin is cached; fine
  table.num_registered = std::max(table.num_registered, full_blocks);
}

BlockTable BlockManager::fork(const BlockTable& parent) {
  for (const int32_t block : parent.blocks) pool_.retain(block);
  return parent;
}

void BlockManager::free(BlockTable& table) {
  for (auto block = table.blocks.rbegin(); block != table.blocks.rend(); ++block) pool_.release(*block);
  table = BlockTable{};
}

void BlockManager::truncate(BlockTable& table, int64_t num_tokens) {
  const int64_t registered = table.num_registered * block_size();
  require(num_tokens >= registered && num_tokens <= table.num_tokens, "num_tokens", num_tokens,
          "must be in [" + std::to_string(registered) + ", " + std::to_string(table.num_tokens) +
              "]: the table's slotted tokens, not below its blocks offered to the prefix cache");
  const auto kept = size_t(blocks_needed(num_tokens));
  if (num_tokens % block_size() != 0) {  // the kept last block becomes partial: the next appends write into it
    const int32_t last = table.blocks[kept - 1];
    require(pool_.refcount(last) == 1 && !pool_.hash_of(last), "num_tokens", num_tokens,
            "would leave block " + std::to_string(last) +
                " partly filled while it is shared or in the prefix cache (its rows past num_tokens could not be "
                "rewritten)");
  }
  while (table.blocks.size() > kept) {
    pool_.release(table.blocks.back());
    table.blocks.pop_back();
  }
  table.hashes.resize(std::min(table.hashes.size(), size_t(num_tokens / block_size())));
  table.num_tokens = num_tokens;
}

int64_t BlockManager::blocks_needed(int64_t num_tokens) const {
  require(num_tokens >= 0, "num_tokens", num_tokens, "must be >= 0");
  return num_tokens / block_size() + (num_tokens % block_size() != 0 ? 1 : 0);
}

bool BlockManager::can_allocate(std::span<const int32_t> prompt, uint64_t root) const {
  return blocks_to_allocate(prompt, root) <= pool_.num_free();
}

int64_t BlockManager::blocks_to_allocate(std::span<const int32_t> prompt, uint64_t root) const {
  return plan_prompt(prompt, root).blocks_taken;
}

bool BlockManager::can_append(const BlockTable& table) const {
  const bool needs_block = table.num_tokens % block_size() == 0 || pool_.refcount(table.blocks.back()) > 1;
  return !needs_block || pool_.num_free() > 0;
}

int64_t BlockManager::slot(const BlockTable& table, int64_t position) const {
  require(position >= 0 && position < table.num_tokens, "position", position,
          "must be in [0, " + std::to_string(table.num_tokens) + "), the table's slotted tokens");
  return int64_t{table.blocks[size_t(position / block_size())]} * block_size() + position % block_size();
}

void BlockManager::check_invariants(std::span<const SequenceBlocks> live) const {
  pool_.check_invariants();
  std::vector<int32_t> holders(size_t(pool_.num_blocks()), 0);
  for (const SequenceBlocks& entry : live) {
    const int64_t seq = entry.id;
    const BlockTable& s = *entry.table;
    const auto name = "sequence " + std::to_string(seq);
    const auto num_tokens = s.num_tokens;
    if (num_tokens == 0) broken(name + " has no tokens");
    if (num_tokens > static_cast<int64_t>(entry.tokens.size()))
      broken(name + "'s table has " + std::to_string(num_tokens) + " slotted tokens but the sequence has only " +
             std::to_string(entry.tokens.size()));
    if (static_cast<int64_t>(s.blocks.size()) != blocks_needed(num_tokens))
      broken(name + " has " + std::to_string(num_tokens) + " tokens in " + std::to_string(s.blocks.size()) +
             " blocks; it needs " + std::to_string(blocks_needed(num_tokens)));
    const auto full_blocks = static_cast<size_t>(num_tokens / block_size());
    if (prefix_caching_ && s.hashes != prefix_block_hashes(entry.tokens.first(size_t(num_tokens)), block_size(), s.root))
      broken(name + "'s block hashes are not the chained hashes of its tokens");
    if (s.num_registered > static_cast<int64_t>(full_blocks))
      broken(name + " registered " + std::to_string(s.num_registered) + " blocks but has only " +
             std::to_string(full_blocks) + " full ones");
    for (size_t logical = 0; logical < s.blocks.size(); ++logical) {
      const int32_t block = s.blocks[logical];
      if (block < 0 || block >= pool_.num_blocks())
        broken(where(seq, logical) + " is block " + std::to_string(block) + ", out of range");
      if (std::find(s.blocks.begin(), s.blocks.begin() + std::ptrdiff_t(logical), block) !=
          s.blocks.begin() + std::ptrdiff_t(logical))
        broken(name + " holds block " + std::to_string(block) + " twice");
      ++holders[size_t(block)];
      const auto hash = pool_.hash_of(block);
      if (!hash) continue;
      if (logical >= full_blocks)
        broken("block " + std::to_string(block) + " is hashed but it is " + where(seq, logical) + ", which holds " +
               std::to_string(num_tokens - int64_t(logical) * block_size()) + " of " + std::to_string(block_size()) +
               " tokens (only full blocks may be hashed)");
      if (!prefix_caching_) broken("block " + std::to_string(block) + " is hashed with prefix caching off");
      if (*hash != s.hashes[logical])
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
