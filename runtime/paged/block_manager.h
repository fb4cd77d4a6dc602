#pragma once
/// @file block_manager.h
/// Sequence-level block management for PagedAttention (chapter 06): each sequence's block table
/// (logical block i → physical block id), its tokens, and the three ways blocks get shared —
/// fork (parallel sampling, beam search), the prefix cache (a new prompt takes the full blocks
/// that an earlier one computed), and copy-on-write to unshare a partly filled last block before
/// a write.
///
/// Pure bookkeeping, like the pool beneath it: every result says what the caller must do to the
/// KV memory (KvCache::set_block_table with table(), poison_block on each fresh block,
/// copy_block for a BlockCopy, then write the new tokens' K/V at their slots). Running out of
/// blocks returns BlockStatus::out_of_blocks and changes nothing. An unknown or duplicate
/// sequence id, or a size out of range, throws std::invalid_argument naming it.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "runtime/paged/block_pool.h"

namespace inferlab::paged {

/// What allocate_prompt() did.
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

/// Block tables of many sequences over one BlockPool, with fork, prefix caching and
/// copy-on-write.
class BlockManager {
 public:
  /// A manager over a pool of @p num_blocks blocks of @p block_size tokens; with
  /// @p prefix_caching, computed full blocks are cached and shared by later prompts. Throws
  /// std::invalid_argument when a size is ≤ 0.
  BlockManager(int64_t num_blocks, int64_t block_size, bool prefix_caching = true);

  /// Gives new sequence @p seq the blocks for @p prompt. Its leading full blocks that are in the
  /// prefix cache are shared (a hit), the rest are fresh. A hit never covers the last prompt
  /// token — its logits are needed, so it must be computed: hits stop at the last full block that
  /// ends before the prompt's last token (vLLM caps at num_tokens − 1; nano-vllm issue 144).
  /// All or nothing: on out_of_blocks no block is taken and no LRU order changes. The cached
  /// tokens count as computed; call mark_computed() once the rest is. Throws
  /// std::invalid_argument when @p seq exists or @p prompt is empty.
  PromptAllocation allocate_prompt(int64_t seq, std::span<const int32_t> prompt);

  /// Adds @p token to @p seq and returns the slot for its K/V: the next offset of the last block,
  /// or offset 0 of a fresh block when the last one is full. When the last block is partly
  /// filled and shared (refcount > 1, after a fork), copy-on-write: a fresh block replaces it in
  /// this table (the others keep the original), and the result asks the caller to copy the rows.
  /// A full shared block needs no copy: the token goes into a new block. On out_of_blocks
  /// nothing changes. Throws std::invalid_argument for an unknown @p seq.
  SlotAllocation append_slot(int64_t seq, int32_t token);

  /// Records that the K/V of the first @p num_tokens tokens of @p seq is now in the cache: each
  /// full block among them is registered in the prefix cache under its chained hash. A partial
  /// block is never registered (its content can still change). Throws std::invalid_argument for
  /// an unknown @p seq or @p num_tokens outside [0, num_tokens(seq)].
  void mark_computed(int64_t seq, int64_t num_tokens);

  /// New sequence @p child shares every block of @p parent (one more reference each) and has the
  /// same tokens; the first append to a shared partial block copies it. Never needs a block.
  /// Throws std::invalid_argument for an unknown @p parent or an existing @p child.
  void fork(int64_t parent, int64_t child);

  /// Releases every block of @p seq and forgets it. Blocks are released last to first, as vLLM
  /// does: a hashed block becomes evictable when its refcount reaches 0, so the sequence's tail —
  /// the part least likely to be another prompt's prefix — is evicted before its head. Throws
  /// std::invalid_argument for an unknown @p seq.
  void free(int64_t seq);

  /// True when @p seq is a sequence of this manager.
  bool has(int64_t seq) const { return sequences_.contains(seq); }
  /// The block table of @p seq: physical block ids of its logical blocks 0, 1, …
  const std::vector<int32_t>& table(int64_t seq) const;
  /// The tokens of @p seq (prompt, then appended tokens).
  const std::vector<int32_t>& tokens(int64_t seq) const;
  /// The number of tokens of @p seq.
  int64_t num_tokens(int64_t seq) const;
  /// Every sequence id, in increasing order.
  std::vector<int64_t> sequences() const;

  /// Blocks that can still be allocated (free + evictable).
  int64_t num_free_blocks() const { return pool_.num_free(); }
  /// Blocks a table of @p num_tokens tokens holds: ⌈num_tokens / block_size⌉. Throws
  /// std::invalid_argument when @p num_tokens < 0.
  int64_t blocks_needed(int64_t num_tokens) const;
  /// True when allocate_prompt(·, @p prompt) would succeed now (prefix-cache hits included).
  /// Throws std::invalid_argument when @p prompt is empty.
  bool can_allocate(std::span<const int32_t> prompt) const;
  /// The allocatable blocks allocate_prompt(·, @p prompt) would take now: fresh blocks plus the
  /// prefix-cache hits that are only evictable (a hit on a block in use takes nothing). Throws
  /// std::invalid_argument when @p prompt is empty.
  int64_t blocks_to_allocate(std::span<const int32_t> prompt) const;
  /// True when append_slot(@p seq, ·) would succeed now.
  bool can_append(int64_t seq) const;
  /// Tokens per block.
  int64_t block_size() const { return pool_.block_size(); }
  /// Whether computed full blocks are cached and shared.
  bool prefix_caching() const { return prefix_caching_; }
  /// The pool (refcounts, hashes, hit and eviction counters), read-only.
  const BlockPool& pool() const { return pool_; }

  /// The pool's invariants, plus: each block's refcount equals the number of block tables that
  /// hold it (a leak or a missing reference shows here); no table holds a block twice; each
  /// table has exactly ⌈num_tokens / block_size⌉ blocks; only full blocks are hashed, each under
  /// the chained hash of the tokens of every sequence that holds it. Throws std::logic_error
  /// naming the block and sequence. O(blocks + tokens); for tests and debug runs.
  void check_invariants() const;

 private:
  friend struct BlockManagerTestAccess;  // tests corrupt the state to prove check_invariants() fires

  struct Sequence {
    std::vector<int32_t> tokens;
    std::vector<int32_t> table;          // logical block → physical block
    std::vector<uint64_t> block_hashes;  // chained hash of each full block (with prefix caching)
    int64_t num_registered = 0;          // leading full blocks already offered to the prefix cache
  };
  struct PromptPlan {
    std::vector<uint64_t> block_hashes;  // of the prompt's full blocks
    std::vector<int32_t> hit_blocks;     // cached blocks for the leading hashes, capped
    int64_t fresh_blocks = 0;            // blocks to allocate after them
    int64_t blocks_taken = 0;            // from num_free(): fresh + hits that were evictable
  };

  PromptPlan plan_prompt(std::span<const int32_t> prompt) const;
  Sequence& sequence(int64_t seq);
  const Sequence& sequence(int64_t seq) const;
  void require_new(int64_t seq) const;

  BlockPool pool_;
  bool prefix_caching_;
  std::map<int64_t, Sequence> sequences_;
};

}  // namespace inferlab::paged
