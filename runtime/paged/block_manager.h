#pragma once
/// @file block_manager.h
/// Block management for PagedAttention (chapter 06), over the block tables of sequences that
/// the caller owns: a sequence's BlockTable (logical block i → physical block id, the chained
/// hashes of its full blocks) lives in the caller's sequence state (the engine's Sequence,
/// runtime/engine/sequence.h), next to its tokens; the manager keeps only block-level state —
/// the pool (refcounts, the hash → block map of the prefix cache, LRU eviction) — and operates
/// on the tables handed to it, as nano-vllm's BlockManager operates on `seq.block_table`. The
/// three ways blocks get shared: fork (parallel sampling, beam search), the prefix cache (a new
/// prompt takes the full blocks that an earlier one computed), and copy-on-write to unshare a
/// partly filled last block before a write.
///
/// Pure bookkeeping, like the pool beneath it: every result says what the caller must do to the
/// KV memory (poison each fresh block, make each BlockCopy, map the table, then write the new
/// tokens' K/V at their slots — the step plan carries these to the model runner,
/// runtime/model/step_plan.h). Running out of blocks returns BlockStatus::out_of_blocks and
/// changes nothing. A table in the wrong state or a size out of range throws
/// std::invalid_argument naming it.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "runtime/paged/block_pool.h"
#include "runtime/paged/prefix_hash.h"

namespace inferlab::paged {

/// The blocks of one sequence, kept in the caller's sequence state (the manager keeps no copy).
/// Its first @ref num_tokens tokens have a slot: @ref blocks holds ⌈num_tokens / block_size⌉
/// physical blocks.
struct BlockTable {
  std::vector<int32_t> blocks;   ///< logical block → physical block
  std::vector<uint64_t> hashes;  ///< chained hash of each full block (with prefix caching)
  int64_t num_tokens = 0;        ///< tokens that have a slot in @ref blocks
  int64_t num_registered = 0;    ///< leading full blocks already offered to the prefix cache
  uint64_t root = kFirstBlockParent;  ///< the first block's parent hash (prefix_root() of a cache salt)
  /// True before allocate() and after free().
  bool empty() const { return blocks.empty() && num_tokens == 0; }
};

/// What allocate() did.
struct PromptAllocation {
  BlockStatus status = BlockStatus::ok;  ///< out_of_blocks: nothing changed, no block taken
  /// Leading prompt tokens whose KV came from the prefix cache (a multiple of block_size, always
  /// < the prompt's length): compute only the tokens from here on.
  int64_t cached_tokens = 0;
  /// The fresh blocks, in table order after the cached ones: poison them (their rows are garbage).
  std::vector<int32_t> new_blocks;
};

/// What append_slot() did.
struct SlotAllocation {
  BlockStatus status = BlockStatus::ok;  ///< out_of_blocks: nothing changed, no slot
  /// Where this token's K/V goes: physical block · block_size + offset in the block (int64: the
  /// product overflows int32 in a large pool — a bug vLLM's kernel had to cast away). −1 when
  /// out_of_blocks.
  int64_t slot = -1;
  /// Copy-on-write: the last block was shared and partly filled, so the sequence got a fresh
  /// block; copy the rows from → to before writing the slot.
  std::optional<BlockCopy> copy;
  /// The fresh block, if one was taken (a new last block, or the copy's target): poison it.
  std::optional<int32_t> new_block;
};

/// A live sequence as check_invariants() sees it: its id (for messages), its table and its
/// tokens (the first table->num_tokens of them have slots; more may follow, not yet slotted).
struct SequenceBlocks {
  int64_t id = 0;                     ///< the sequence's id, named in messages
  const BlockTable* table = nullptr;  ///< its table
  std::span<const int32_t> tokens;    ///< its tokens
};

/// The block pool plus the operations on sequences' block tables: allocate, append, fork, free,
/// prefix caching and copy-on-write.
class BlockManager {
 public:
  /// A manager over a pool of @p num_blocks blocks of @p block_size tokens; with
  /// @p prefix_caching, computed full blocks are cached and shared by later prompts. Throws
  /// std::invalid_argument when a size is ≤ 0.
  BlockManager(int64_t num_blocks, int64_t block_size, bool prefix_caching = true);

  /// Gives the empty @p table the blocks for @p prompt. Its leading full blocks that are in the
  /// prefix cache are shared (a hit), the rest are fresh. A hit never covers the last prompt
  /// token — its logits are needed, so it must be computed: hits stop at the last full block that
  /// ends before the prompt's last token (vLLM caps at num_tokens − 1; nano-vllm issue 144).
  /// All or nothing: on out_of_blocks no block is taken, no LRU order changes and @p table stays
  /// empty. The cached tokens count as computed; call mark_computed() once the rest is. Throws
  /// std::invalid_argument when @p table is not empty or @p prompt is. The hashes chain from
  /// @p root (prefix_root() of the request's cache salt), kept in the table.
  PromptAllocation allocate(BlockTable& table, std::span<const int32_t> prompt, uint64_t root = kFirstBlockParent);

  /// The slot for the K/V of @p tokens.back(), the one token of @p tokens that has none yet
  /// (tokens.size() = table.num_tokens + 1; the earlier ones are the sequence's slotted tokens):
  /// the next offset of the last block, or offset 0 of a fresh block when the last one is full.
  /// When the last block is partly filled and shared (refcount > 1, after a fork),
  /// copy-on-write: a fresh block replaces it in @p table (the others keep the original), and
  /// the result asks the caller to copy the rows. A full shared block needs no copy: the token
  /// goes into a new block. On out_of_blocks nothing changes. Throws std::invalid_argument when
  /// @p tokens does not hold exactly one token past the table's.
  SlotAllocation append_slot(BlockTable& table, std::span<const int32_t> tokens);

  /// Records that the K/V of the first @p num_tokens tokens of @p table is now in the cache:
  /// each full block among them is registered in the prefix cache under its chained hash. A
  /// partial block is never registered (its content can still change). Throws
  /// std::invalid_argument for @p num_tokens outside [0, table.num_tokens].
  void mark_computed(BlockTable& table, int64_t num_tokens);

  /// A new table that shares every block of @p parent (one more reference each); the first
  /// append to a shared partial block copies it. Never needs a block.
  BlockTable fork(const BlockTable& parent);

  /// Rollback (speculative decoding, chapter 12): keeps only the first @p num_tokens tokens of
  /// @p table — the blocks past ⌈num_tokens / block_size⌉ are released, last to first, and the
  /// hashes of blocks that are no longer full are dropped (a block filled by guesses that were
  /// then rejected is never registered in the prefix cache). The kept last block's rows past
  /// num_tokens keep stale K/V that the next appends overwrite. Throws std::invalid_argument when
  /// @p num_tokens is outside [table.num_registered · block_size, table.num_tokens] (a block
  /// already offered to the prefix cache cannot be taken back), or when the kept last block would
  /// be partly filled while another table shares it or the prefix cache holds it (its rows past
  /// num_tokens must be free to rewrite). The engine never asks for either: guesses are appended
  /// after copy-on-write, into private blocks, and registered only once verified.
  void truncate(BlockTable& table, int64_t num_tokens);
  /// Releases every block of @p table and empties it. Blocks are released last to first, as vLLM
  /// does: a hashed block becomes evictable when its refcount reaches 0, so the sequence's tail —
  /// the part least likely to be another prompt's prefix — is evicted before its head.
  void free(BlockTable& table);

  /// Blocks that can still be allocated (free + evictable).
  int64_t num_free_blocks() const { return pool_.num_free(); }
  /// Blocks a table of @p num_tokens tokens holds: ⌈num_tokens / block_size⌉. Throws
  /// std::invalid_argument when @p num_tokens < 0.
  int64_t blocks_needed(int64_t num_tokens) const;
  /// True when allocate(·, @p prompt) would succeed now (prefix-cache hits included).
  /// Throws std::invalid_argument when @p prompt is empty.
  bool can_allocate(std::span<const int32_t> prompt, uint64_t root = kFirstBlockParent) const;
  /// The allocatable blocks allocate(·, @p prompt) would take now: fresh blocks plus the
  /// prefix-cache hits that are only evictable (a hit on a block in use takes nothing). Throws
  /// std::invalid_argument when @p prompt is empty.
  int64_t blocks_to_allocate(std::span<const int32_t> prompt, uint64_t root = kFirstBlockParent) const;
  /// True when append_slot(@p table, ·) would succeed now.
  bool can_append(const BlockTable& table) const;
  /// The slot of token @p position of @p table (< table.num_tokens, else std::invalid_argument).
  int64_t slot(const BlockTable& table, int64_t position) const;
  /// Tokens per block.
  int64_t block_size() const { return pool_.block_size(); }
  /// Whether computed full blocks are cached and shared.
  bool prefix_caching() const { return prefix_caching_; }
  /// The pool (refcounts, hashes, hit and eviction counters), read-only.
  const BlockPool& pool() const { return pool_; }

  /// The pool's invariants, plus, over the @p live sequences (every table that holds blocks):
  /// each block's refcount equals the number of tables that hold it (a leak or a missing
  /// reference shows here); no table holds a block twice; each table has exactly
  /// ⌈num_tokens / block_size⌉ blocks and no more slotted tokens than its sequence has; its
  /// hashes are the chained hashes of its slotted tokens' full blocks; only full blocks are
  /// hashed, each under the hash its holders' tables name. Throws std::logic_error naming the
  /// block and sequence. O(blocks + tokens); for tests and debug runs.
  void check_invariants(std::span<const SequenceBlocks> live) const;

 private:
  friend struct BlockManagerTestAccess;  // tests corrupt the pool to prove check_invariants() fires

  struct PromptPlan {
    std::vector<uint64_t> block_hashes;  // of the prompt's full blocks
    std::vector<int32_t> hit_blocks;     // cached blocks for the leading hashes, capped
    int64_t fresh_blocks = 0;            // blocks to allocate after them
    int64_t blocks_taken = 0;            // from num_free(): fresh + hits that were evictable
  };

  PromptPlan plan_prompt(std::span<const int32_t> prompt, uint64_t root) const;

  BlockPool pool_;
  bool prefix_caching_;
};

}  // namespace inferlab::paged
