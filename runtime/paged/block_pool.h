#pragma once
/// @file block_pool.h
/// The KV block pool of PagedAttention (chapter 06), on the host: which physical blocks are free,
/// who holds each one (its refcount), and the prefix cache of full blocks named by their chained
/// hash (prefix_hash.h). Pure bookkeeping — it never touches KV memory; one block id addresses the
/// same block_size slots in every layer's K pool and V pool.
///
/// Every block is in exactly one state:
///   - free:       refcount 0, no hash, in the free list;
///   - in use:     refcount > 0 (held by that many block tables), with or without a hash;
///   - evictable:  refcount 0 but hashed — its KV is kept so that a later prompt with the same
///                 prefix can take it back (lookup()), until allocate() needs it: an evictable
///                 block is reused only when the free list is empty, least recently used first.
///
/// Running out of blocks is a normal outcome (allocate() returns no block; chapter 07's scheduler
/// preempts a sequence on it). Misuse — a block id out of range — throws std::invalid_argument
/// naming it; a broken protocol — releasing a free block, retaining a free one — throws
/// std::logic_error naming the block.

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace inferlab::paged {

/// Whether an allocation got its blocks. out_of_blocks is an expected outcome, not an error:
/// nothing was changed, and the caller decides (wait, or preempt someone).
enum class BlockStatus { ok, out_of_blocks };

/// A copy the caller must make before writing (copy-on-write): every row of block @c from into
/// block @c to, in every layer's K and V pool (KvCache::copy_block).
struct BlockCopy {
  int32_t from = -1;  ///< the shared block, still holding the rows
  int32_t to = -1;    ///< the fresh block that becomes the writer's own
  /// Two copies are equal when both ids are.
  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

/// The physical KV blocks: a free list, refcounts and the prefix cache with LRU eviction.
class BlockPool {
 public:
  /// A pool of @p num_blocks free blocks (ids 0 … num_blocks − 1) of @p block_size tokens each.
  /// Throws std::invalid_argument when either is ≤ 0 or when num_blocks does not fit an int32 id.
  BlockPool(int64_t num_blocks, int64_t block_size);

  /// A block with refcount 1 for a new holder: from the free list if it has one (lowest id first
  /// in a fresh pool), otherwise the least recently used evictable block, whose hash is dropped
  /// (an eviction). No block (std::nullopt) when none is free or evictable; then nothing changed.
  /// The caller must treat the block's rows as garbage (KvCache::poison_block).
  std::optional<int32_t> allocate();

  /// One more holder of in-use block @p block (a fork shares it). Throws std::logic_error when
  /// the block is free or evictable (take those with allocate() or lookup()).
  void retain(int32_t block);

  /// One holder fewer. At refcount 0 a hashed block becomes evictable (the most recently used
  /// one), an unhashed block goes back to the free list. Throws std::logic_error naming the block
  /// when its refcount is already 0 (a double free).
  void release(int32_t block);

  /// Registers in-use, full block @p block under @p hash in the prefix cache. Returns false, and
  /// changes nothing, when another block already holds @p hash (the same prefix was computed
  /// twice; this copy stays unhashed and is freed normally). Registering a block again under its
  /// own hash is a no-op returning true. Throws std::logic_error when the block is not in use or
  /// already holds a different hash (a block's content, hence its hash, never changes once full).
  bool register_hash(int32_t block, uint64_t hash);

  /// The cached block of @p hash with one more reference (a prefix-cache hit: an evictable block
  /// is revived), or std::nullopt on a miss. Counts a lookup, and a hit when found.
  std::optional<int32_t> lookup(uint64_t hash);

  /// The cached block of @p hash without taking it: no reference, no counter, no LRU change —
  /// for planning an allocation before committing to it.
  std::optional<int32_t> cached_block(uint64_t hash) const;

  /// The hash block @p block is registered under, if any.
  std::optional<uint64_t> hash_of(int32_t block) const;
  /// The number of holders of @p block (0 when free or evictable).
  int32_t refcount(int32_t block) const;
  /// True when @p block has refcount 0 and a hash (kept for the prefix cache, reusable).
  bool is_evictable(int32_t block) const;

  /// Blocks in the pool.
  int64_t num_blocks() const { return static_cast<int64_t>(refcount_.size()); }
  /// Tokens per block.
  int64_t block_size() const { return block_size_; }
  /// Blocks that allocate() can still hand out: free + evictable.
  int64_t num_free() const { return static_cast<int64_t>(free_list_.size()) + lru_size_; }
  /// Evictable blocks (refcount 0, hashed), included in num_free().
  int64_t num_evictable() const { return lru_size_; }
  /// The evictable blocks in eviction order: least recently used first.
  std::vector<int32_t> evictable_blocks() const;
  /// Blocks registered in the prefix cache (in use or evictable).
  int64_t num_cached() const { return static_cast<int64_t>(block_of_hash_.size()); }
  /// lookup() calls so far.
  int64_t lookups() const { return lookups_; }
  /// lookup() calls that found their block (prefix-cache hits, in blocks).
  int64_t hits() const { return hits_; }
  /// Evictable blocks that allocate() reused, dropping their hash.
  int64_t evictions() const { return evictions_; }

  /// Checks that every block is in exactly one state and that the prefix cache agrees with itself:
  /// no block both free and referenced, or lost (neither free, referenced nor evictable); no block
  /// twice in the free list or the LRU list; hash → block and block → hash agree; every evictable
  /// block has refcount 0 and a hash. Throws std::logic_error naming the first broken rule and
  /// block. O(num_blocks); for tests and debug runs.
  void check_invariants() const;

 private:
  friend struct BlockPoolTestAccess;  // tests corrupt the state to prove check_invariants() fires

  void require_block(int32_t block) const;  // std::invalid_argument unless 0 ≤ block < num_blocks
  void lru_push_back(int32_t block);         // the most recently used evictable block
  void lru_remove(int32_t block);            // revived or evicted

  int64_t block_size_;
  std::vector<int32_t> refcount_;   // per block: number of holders
  std::vector<int32_t> free_list_;  // a stack: allocate() pops the back
  // Evictable blocks, least recently used first: a doubly linked list threaded through the
  // blocks (vLLM's free-block queue), so that a hit removes a block from the middle in O(1) and
  // the pool stays a plain copyable value. −1 ends the list.
  std::vector<int32_t> lru_prev_, lru_next_;
  int32_t lru_head_ = -1, lru_tail_ = -1;
  int64_t lru_size_ = 0;
  std::vector<bool> in_lru_;  // per block: in the LRU list (refcount 0, hashed)
  std::vector<std::optional<uint64_t>> hash_of_block_;
  std::unordered_map<uint64_t, int32_t> block_of_hash_;
  int64_t lookups_ = 0;
  int64_t hits_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace inferlab::paged
