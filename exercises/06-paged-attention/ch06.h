#pragma once
/// @file ch06.h
/// Chapter 06 exercises — the contract: PagedAttention in three pieces. A paged KV cache cuts
/// every sequence's cache into fixed-size blocks of block_size tokens taken from one shared pool,
/// and a *block table* per sequence maps its logical block i (tokens i·block_size …
/// (i + 1)·block_size − 1) to a physical block of the pool. Exercise 6.1 writes the host
/// bookkeeping of the pool — allocation, reference counts, fork and copy-on-write; exercise 6.2
/// the chained hash that names a full block by its whole prefix (the key of prefix caching);
/// exercise 6.3 the decode kernel that reads K and V through the block table.
///
/// Exercises 6.1 and 6.2 are plain C++ (block_allocator.cpp and prefix_hash.cpp, namespace
/// inferlab::student). Exercise 6.3 is a .cu file (paged_decode.cu) holding a `__global__` kernel
/// (yours to write) and its host launcher (given: it checks the shapes and the block table,
/// copies the inputs to the device, launches your kernel with simt::launch and copies the result
/// back). The .cu file is compiled twice (see common/simt/simt.h): by g++ for the SIMT emulator
/// (namespace inferlab::sim::student — what the grader runs, no GPU needed) and, when nvcc is
/// found, for a real GPU (inferlab::cuda::student). The three exercises are graded separately:
/// nothing of one is used by another.
///
/// Graded by tests/06-paged-attention/test_student.cpp: 6.1 against a reference model of the
/// pool written plainly in the test (random operation sequences with a fresh seed — a failure
/// prints it, and INFERLAB_SEED set to it replays the run —, small pools that run out of
/// blocks, every refcount and num_free() compared after every operation); 6.2 against an
/// independent FNV-1a in the test; 6.3 against the float64 oracle on the sim backend with fresh random inputs,
/// blocks scattered through the pool, outputs poisoned with NaN and launches run under several
/// thread schedules (forward, reverse, shuffled). Run them on your code with
/// `./inferlab student test ch06` (it builds only this chapter and prints each failing test's
/// output) or `./inferlab grade --student exercises` (the score table); `./inferlab test` and the default
/// preset build solutions/, the reference, instead.
///
/// Each stub throws `NotImplemented(...)` (after the checks that are given): delete that line
/// once your code is written.
///
/// ## Exercise 6.1 — a block allocator with reference counts and copy-on-write (block_allocator.cpp)
///
/// StudentBlockAllocator owns the pool's bookkeeping — never KV memory: per physical block a
/// reference count (how many block tables hold it) and a stack of the free blocks. The caller
/// owns the block tables (BlockTable: the physical ids of a sequence's logical blocks 0, 1, …)
/// and the token counts, and does what the results say to the KV memory (write a token's K/V at
/// its slot, copy a block). The state is given (refcount_, free_) and so are the constructor,
/// refcount(), num_free() and require_held(); write allocate(), fork(), append_token() and free().
/// The rules:
///   - a block is free (refcount 0, on the free stack exactly once) or held (refcount ≥ 1, not
///     on the stack) — never both, never neither; the sum of the refcounts is the number of
///     entries of all live tables;
///   - allocate() pops a free block and gives it refcount 1; when none is free it returns
///     std::nullopt — running out of blocks is a normal outcome (a scheduler preempts a
///     sequence), not an error — and changes nothing;
///   - fork() (parallel sampling, beam search) gives the child the parent's blocks: one more
///     reference each, no block taken, no row copied;
///   - append_token() returns the slot of a sequence's next token. Its table holds
///     ⌈num_tokens / block_size⌉ blocks; the token goes to offset num_tokens % block_size of
///     the last block. When that offset is 0 (an empty table, or a full last block) the token
///     needs a fresh block, appended to the table — even when the full last block is shared: a
///     full block is never written again, so it is never copied. When the offset is not 0 and
///     the last block is shared (refcount > 1) it must not be written in place — the other
///     holders would see the token: *copy-on-write*. Take a fresh block, drop this table's
///     reference to the shared one, put the fresh one in its place and ask the caller to copy
///     the shared block's rows into it (BlockCopy{shared, fresh}) before writing the slot. An
///     unshared partial last block is written in place. Out of blocks: status out_of_blocks,
///     slot −1, and nothing changed — not the table, not one refcount;
///   - free() releases a table's blocks, last to first (as vLLM does); a block whose refcount
///     reaches 0 goes back on the free stack; the table is left empty.
/// Slots: slot = block · block_size + offset (vLLM's slot mapping; int64 — the product
/// overflows int32 in a large pool).
/// Errors: fork(), append_token() and free() first call require_held() (given) on every block
/// they read — a block id outside the pool throws std::invalid_argument, a free block (refcount
/// 0: a double free, or a table that was freed already) std::logic_error, both naming the
/// operation and the block — and only then change anything: a call that throws leaves every
/// refcount and the free stack as they were.
/// Graded: every result and every refcount against the test's model after each of thousands of
/// random operations (pools of 6 to 24 blocks, block sizes 1 to 16), copy-on-write exactly when
/// the last block is shared and partly filled, out of blocks changing nothing, every block
/// returned exactly once (after freeing every table, allocate() hands out each id once, then
/// std::nullopt), the errors. Budget: O(table size) per call, no allocation beyond the table
/// and the free stack. Size hint: roughly 45 lines for the four member functions.
///
/// ## Exercise 6.2 — the chained prefix hash (prefix_hash.cpp)
///
/// Prefix caching names each FULL block of a prompt by a 64-bit hash of its own tokens *and of
/// every token before it*, so two prompts get the same hash for block i exactly when their first
/// (i + 1)·block_size tokens agree (up to hash collisions) — and a new prompt can reuse the KV of
/// an old one's blocks. The chain does it: hash(i) = H(hash(i − 1), tokens of block i), with
/// hash(−1) = kFirstBlockParentHash. The lab's runtime uses XXH3 (runtime/paged/prefix_hash.h);
/// here H is FNV-1a 64, fully defined so that your values can be checked exactly:
///
///     h = 0xcbf29ce484222325                        (the FNV-1a 64 offset basis)
///     for each byte x of: the 8 bytes of parent_hash, least significant first, then
///                         for each token, the 4 bytes of uint32_t(token), least significant first:
///         h = h XOR x;  h = h · 0x100000001b3  (mod 2⁶⁴; the FNV 64 prime)
///
/// (byte order fixed here, whatever the machine's). Worked values:
/// student_block_hash(kFirstBlockParentHash, {1, 2, 3}, 3) = 0x731475a701ee4960;
/// student_block_hash(kFirstBlockParentHash, {}, 0) = 0x0859c0f1287c5c20;
/// student_prefix_hashes({1, 2, 3, 4, 5}, 2) = {0xc03d78b723e3e363, 0x1c7b49e274fceec4} (token 5,
/// a partial block, gets no hash).
/// Graded: exact values for random token lists (negative and large ids included) and parents,
/// the chaining (the same block after different prefixes gets different hashes), only full
/// blocks hashed (a partial tail changes nothing), block_size 1 and block_size larger than the
/// prompt. Budget: one pass over the tokens, no buffer. Size hint: roughly 15 lines.
///
/// ## Exercise 6.3 — paged decode attention: the block-table lookup (paged_decode.cu)
///
/// Chapter 03's decode step over a paged cache. `q` and `out` are [batch, num_heads, head_dim];
/// the pools `k_pool` and `v_pool` are [num_blocks, num_kv_heads, block_size, head_dim] (fp32);
/// `block_table` is int32 [batch][max_blocks_per_seq] (flat, row-major) and `lengths` [batch].
/// Token j of KV head g of sequence b sits in logical block j / block_size, physical block
///
///     p = block_table[b · max_blocks_per_seq + j / block_size],
///
/// at row (p · num_kv_heads + g) · block_size + j % block_size of the pool: its head_dim
/// elements start at that row · head_dim. Write `paged_decode_kernel` so that
///
///     out[b][h] = softmax(q[b][h] · K[b][g]ᵀ / √head_dim) · V[b][g],   g = h / group_size,
///
/// where K[b][g] and V[b][g] are the rows of tokens 0 … lengths[b] − 1 of KV head g of
/// sequence b — wherever the block table put them (blocks are scattered through the pool; two
/// sequences may share a block; entries past a sequence's last block may be −1, and every pool
/// row that no sequence's first lengths[b] tokens map to holds NaN). group_size = num_heads /
/// num_kv_heads (grouped-query attention). Compute the row offset in 64 bits (size_t):
/// p · num_kv_heads · block_size · head_dim overflows int in a large pool.
/// Launch (given): grid (num_heads, batch), blockDim.x = threads_per_block — any multiple of 32
/// from 32 to 1024 —, dynamic shared memory of head_dim + max_length floats (max_length = the
/// longest length of the batch): `q_scaled` [head_dim] then `scores` [max_length]. The steps are
/// those of exercise 3.2 (warp_reduce and block_reduce are given this time):
///   1. q_scaled[c] = q[b][h][c] / √head_dim (the threads stride through c); `__syncthreads()`;
///   2. scores, one warp per key: warp w takes keys j = w, w + warps, …; its 32 lanes split the
///      dot product q_scaled · K[j] with K[j] found through the block table (write
///      paged_row_offset()), warp_reduce, lane 0 writes scores[j]; `__syncthreads()`;
///   3. softmax over scores[0 … L−1] (block_reduce for the max, exp in place, block_reduce for
///      the sum);
///   4. thread c (striding) writes out[b][h][c] = Σ_j scores[j] · V[j][c] / sum, V[j] found
///      through the block table too.
/// Every thread must reach every barrier: no early return.
/// Budget per block: head_dim loads of q, L·head_dim loads of K and L·head_dim of V (each cached
/// element read once per query head), block-table entries only of the sequence's first
/// ⌈L / block_size⌉ logical blocks, head_dim stores; shared memory as given. No atomics.
/// Device memory per call: the given launcher's device copies of q, k_pool, v_pool, block_table
/// and lengths, and out — no more (no gathered contiguous copy of the cache, no scratch buffer)
/// and no less (the kernel reads K and V in the pools on the device, not rows gathered on the
/// host); the grader checks that each call launches a kernel and that its device-memory peak
/// is at most this sum and at least the two pools.
/// Size hint: roughly 30 lines (paged_row_offset about 4, the kernel about 25).

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/tensor.h"

namespace inferlab::student {

/// A block table: the physical block ids of a sequence's logical blocks 0, 1, … (exercise 6.1).
using BlockTable = std::vector<int32_t>;

/// Whether an operation got the block it needed (exercise 6.1). out_of_blocks is an expected
/// outcome, not an error: nothing was changed, and the caller decides what to do.
enum class BlockStatus {
  ok,            ///< done
  out_of_blocks  ///< no free block: nothing changed
};

/// A copy the caller must make before writing a slot (copy-on-write): every row of block @c from
/// (all KV heads, every layer, K and V) into block @c to.
struct BlockCopy {
  int32_t from = -1;  ///< the shared block, which keeps its rows and its other holders
  int32_t to = -1;    ///< the fresh block that becomes this table's own
  /// Two copies are equal when both ids are.
  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

/// What StudentBlockAllocator::append_token() did.
struct SlotResult {
  BlockStatus status = BlockStatus::ok;  ///< out_of_blocks: nothing changed, slot −1
  int64_t slot = -1;                     ///< block · block_size + offset of the new token; −1 when out of blocks
  std::optional<BlockCopy> copy;         ///< copy-on-write: copy from → to before writing the slot
  std::optional<int32_t> new_block;      ///< the fresh block taken, if any (a new last block, or the copy's target)
};

/// Exercise 6.1 — the block pool of a paged KV cache: reference counts, fork and copy-on-write
/// (see the file's documentation for the rules). The constructor, refcount(), num_free(),
/// num_blocks(), block_size() and require_held() are given; allocate(), fork(), append_token()
/// and free() are yours.
class StudentBlockAllocator {
 public:
  /// A pool of @p num_blocks free blocks (ids 0 … num_blocks − 1) of @p block_size tokens each.
  /// Given. Throws std::invalid_argument when a size is ≤ 0 or num_blocks does not fit an int32.
  StudentBlockAllocator(int64_t num_blocks, int64_t block_size);

  /// A free block, now with refcount 1 (popped from the free stack), or std::nullopt when none
  /// is free — then nothing changed.
  std::optional<int32_t> allocate();

  /// A child table sharing every block of @p parent: the same ids, one more reference each. Takes
  /// no block. Throws (require_held, before any change) when @p parent holds a free block or an
  /// id outside the pool.
  BlockTable fork(const BlockTable& parent);

  /// The slot of token number @p num_tokens (0-based: @p table holds the num_tokens tokens before
  /// it, in ⌈num_tokens / block_size⌉ blocks): a fresh block when the offset num_tokens %
  /// block_size is 0; copy-on-write when the last block is shared and partly filled; in place
  /// otherwise. Updates @p table. Out of blocks: status out_of_blocks, and nothing changed.
  /// Throws std::invalid_argument (given) when the table's size does not match @p num_tokens,
  /// and (require_held, before any change) when the last block is free or outside the pool.
  SlotResult append_token(BlockTable& table, int64_t num_tokens);

  /// Releases every block of @p table, last to first (refcount − 1; at 0 back on the free stack),
  /// and empties it. Checks every block with require_held() before releasing any: a free block
  /// (a double free) throws std::logic_error and changes nothing.
  void free(BlockTable& table);

  /// The number of tables holding @p block (0 when free). Given. Throws std::invalid_argument
  /// naming the block when it is outside [0, num_blocks()).
  int32_t refcount(int32_t block) const;
  /// Blocks on the free stack. Given.
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  /// Blocks in the pool. Given.
  int64_t num_blocks() const { return static_cast<int64_t>(refcount_.size()); }
  /// Tokens per block. Given.
  int64_t block_size() const { return block_size_; }

 private:
  /// Given: throws std::invalid_argument when @p block is outside the pool and std::logic_error
  /// when it is free (refcount 0), both naming @p operation, the block and its refcount.
  void require_held(int32_t block, std::string_view operation) const;

  int64_t block_size_;
  std::vector<int32_t> refcount_;  // per block: the number of tables holding it (0: free)
  std::vector<int32_t> free_;      // the free blocks, a stack: allocate() takes the back
};

/// The parent hash of a sequence's first block: the ASCII bytes of "InferLab" (exercise 6.2).
inline constexpr uint64_t kFirstBlockParentHash = 0x496e6665724c6162ULL;

/// Exercise 6.2 — the hash of one block: FNV-1a 64 (see the file's documentation) over the 8
/// little-endian bytes of @p parent_hash, then the 4 little-endian bytes of each of the @p count
/// tokens at @p tokens. Throws std::invalid_argument (given) when @p count < 0, or when
/// @p tokens is null and @p count > 0.
uint64_t student_block_hash(uint64_t parent_hash, const int32_t* tokens, int64_t count);

/// Exercise 6.2 — the chained hashes of the FULL blocks of @p tokens: element i is
/// student_block_hash(element i − 1 (kFirstBlockParentHash for i = 0), block i's block_size
/// tokens); a trailing partial block gets none. Size: tokens.size() / block_size. Throws
/// std::invalid_argument (given) when @p block_size ≤ 0.
std::vector<uint64_t> student_prefix_hashes(std::span<const int32_t> tokens, int64_t block_size);

}  // namespace inferlab::student

/// Declares the chapter-06 CUDA exercise launcher in namespace inferlab::NS::student (NS = sim or
/// cuda; see the file's documentation for the task).
#define INFERLAB_DECLARE_CH06_EXERCISES(NS)                                                                          \
  namespace inferlab::NS::student {                                                                                  \
  /* Exercise 6.3: out[b][h] = attention of q[b][h] over the first lengths[b] tokens of sequence b, */               \
  /* their K and V rows found through block_table [batch][max_blocks_per_seq] in the pools */                        \
  /* [num_blocks, num_kv_heads, block_size, head_dim]. */                                                            \
  void paged_decode_attention(const Tensor<float>& q, const Tensor<float>& k_pool, const Tensor<float>& v_pool,      \
                              const std::vector<int32_t>& block_table, int64_t max_blocks_per_seq,                   \
                              const std::vector<int32_t>& lengths, Tensor<float>& out, int threads_per_block = 128); \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CH06_EXERCISES(sim)
INFERLAB_DECLARE_CH06_EXERCISES(cuda)
/// @endcond
