#pragma once
/// @file paged_kv.h
/// Applying the block manager's bookkeeping to the KV memory (chapter 06): the manager
/// (block_manager.h) decides which physical blocks a sequence holds; a paged KvCache
/// (kernels/kv/kv_cache.h) holds the rows. After each manager operation the caller brings the
/// cache in line — poison the fresh blocks (their rows are a former owner's), copy a block that
/// copy-on-write unshared, and write the sequence's block table into the cache's row for it —
/// which is what these functions do, in that order. The cache's sequence index (its row of the
/// block table) is the caller's choice: a manager's sequence ids are request ids, a cache has a
/// fixed number of rows.

#include <cstdint>

#include "kernels/kv/kv_cache.h"
#include "runtime/paged/block_manager.h"

namespace inferlab::paged {

/// After allocate_prompt(): poisons @p allocation's fresh blocks and maps @p manager's table of
/// @p seq into row @p cache_sequence of @p cache. Does nothing when the allocation failed.
inline void apply_prompt(KvCache& cache, int64_t cache_sequence, const BlockManager& manager, int64_t seq,
                         const PromptAllocation& allocation) {
  if (allocation.status != BlockStatus::ok) return;
  for (const int32_t block : allocation.new_blocks) cache.poison_block(block);
  cache.set_block_table(cache_sequence, manager.table(seq));
}

/// After append_slot(): poisons a fresh block, performs a copy-on-write copy (rows of every
/// layer, from → to) and maps the table of @p seq into row @p cache_sequence. Does nothing when
/// the allocation failed.
inline void apply_slot(KvCache& cache, int64_t cache_sequence, const BlockManager& manager, int64_t seq,
                       const SlotAllocation& allocation) {
  if (allocation.status != BlockStatus::ok) return;
  if (allocation.new_block && !allocation.copy) cache.poison_block(*allocation.new_block);
  if (allocation.copy) cache.copy_block(allocation.copy->from, allocation.copy->to);
  cache.set_block_table(cache_sequence, manager.table(seq));
}

}  // namespace inferlab::paged
