#pragma once
/// @file kv_layout.h
/// Where a KV cache keeps each row — the layout half of the cache's design (the element half is
/// kv_format.h). A *row* is the head_dim elements of K (or of V) of one token of one KV head of
/// one sequence; a layout maps (sequence, KV head, token) to the index of its row in the pool of
/// one layer. A row's elements start at row · head_dim; a per-token scale (INT8, FP8) sits at
/// index row of the scale array. Kernels never compute an offset themselves: they ask the
/// layout for the *run* of rows that starts at a token — rows stored one after another, which a
/// kernel streams with plain pointer arithmetic — so a new layout (chapter 06's paged blocks)
/// needs no new kernel.
///
/// The contiguous layout (chapters 03–05) reserves max_seq_len rows for every (sequence, KV
/// head): one layer is [batch][num_kv_heads][max_seq_len][head_dim], and a sequence's tokens
/// form a single run.

#include <cstdint>

#include "common/tensor.h"

#if defined(__CUDACC__)
#define INFERLAB_HOST_DEVICE __host__ __device__
#else
/// Marks a function callable from host code and from kernels (nvcc); empty for g++ and the emulator.
#define INFERLAB_HOST_DEVICE
#endif

namespace inferlab {

/// The sizes of a KV cache.
struct KvCacheShape {
  int64_t batch = 0;         ///< sequences
  int64_t num_kv_heads = 0;  ///< key/value heads per sequence
  int64_t max_seq_len = 0;   ///< capacity in tokens of every sequence
  int64_t head_dim = 0;      ///< d
  int64_t num_layers = 1;    ///< layers sharing the cache (one set of lengths for all of them)

  /// {batch, num_kv_heads, max_seq_len, head_dim}: the shape of one layer's K (and V).
  Shape shape() const { return {batch, num_kv_heads, max_seq_len, head_dim}; }
  /// Rows of K (= of V) in one layer.
  int64_t rows() const { return batch * num_kv_heads * max_seq_len; }
  /// Elements of K (= of V) in one layer.
  int64_t elements() const { return rows() * head_dim; }
  /// Flat index, within one layer of the contiguous layout, of element 0 of token @p token of
  /// KV head @p kv_head of sequence @p sequence (as .npy caches store them).
  int64_t offset(int64_t sequence, int64_t kv_head, int64_t token) const {
    return ((sequence * num_kv_heads + kv_head) * max_seq_len + token) * head_dim;
  }
};

/// Slots — where an append writes, as vLLM's *slot mapping* (reshape_and_cache): one int64 per
/// token, slot = block · block_size + offset, the same for every KV head; the token's row for
/// KV head g is slot_row(slot, g). The contiguous layout is the paged one with one block per
/// sequence (block = sequence, block_size = max_seq_len), so one append kernel serves both.
INFERLAB_HOST_DEVICE inline int64_t slot_row(int64_t slot, int64_t kv_head, int64_t num_kv_heads, int64_t block_size) {
  return ((slot / block_size) * num_kv_heads + kv_head) * block_size + slot % block_size;
}

/// A run of consecutive rows: the row of the first token and how many tokens follow it in
/// consecutive rows (the first one included).
struct KvRun {
  int64_t row = 0;     ///< row index of the first token
  int64_t length = 0;  ///< tokens stored from there in rows row, row + 1, …
};

/// The contiguous layout: row (sequence, kv_head, token) = (sequence · num_kv_heads + kv_head) ·
/// max_seq_len + token, so every sequence's tokens are one run.
struct ContiguousLayout {
  int64_t num_kv_heads = 0;  ///< KV heads per sequence
  int64_t max_seq_len = 0;   ///< rows reserved per (sequence, KV head)

  /// The row of token @p token of KV head @p kv_head of sequence @p sequence.
  INFERLAB_HOST_DEVICE int64_t row(int64_t sequence, int64_t kv_head, int64_t token) const {
    return (sequence * num_kv_heads + kv_head) * max_seq_len + token;
  }
  /// The run that starts at @p token: the rest of the sequence's reserved rows.
  INFERLAB_HOST_DEVICE KvRun run(int64_t sequence, int64_t kv_head, int64_t token) const {
    return {row(sequence, kv_head, token), max_seq_len - token};
  }
  /// The index of (sequence, kv_head) among per-head arrays (per-channel scales: × head_dim).
  INFERLAB_HOST_DEVICE int64_t head(int64_t sequence, int64_t kv_head) const {
    return sequence * num_kv_heads + kv_head;
  }
  /// The slot of token @p token of sequence @p sequence: sequence · max_seq_len + token.
  INFERLAB_HOST_DEVICE int64_t slot(int64_t sequence, int64_t token) const { return sequence * max_seq_len + token; }
  /// The row of KV head @p kv_head of slot @p slot (= row(sequence, kv_head, token)).
  INFERLAB_HOST_DEVICE int64_t slot_row(int64_t slot, int64_t kv_head) const {
    return inferlab::slot_row(slot, kv_head, num_kv_heads, max_seq_len);
  }
  /// head(sequence, kv_head) of the sequence that owns slot @p slot.
  INFERLAB_HOST_DEVICE int64_t slot_head(int64_t slot, int64_t kv_head) const {
    return head(slot / max_seq_len, kv_head);
  }
};

/// How a paged cache cuts its pool (chapter 06): every layer's K and V pools hold num_blocks
/// blocks of block_size tokens of every KV head, and one block id addresses the same slots in
/// all of them.
struct KvPaging {
  int64_t block_size = 0;  ///< tokens per block
  int64_t num_blocks = 0;  ///< physical blocks per pool
};

/// The paged layout (PagedAttention, chapter 06): a pool of fixed-size blocks shared by all
/// sequences, [num_blocks][num_kv_heads][block_size][head_dim], and a block table per sequence
/// (one int32 array [batch][max_blocks_per_seq], vLLM's layout) mapping its logical block i to a
/// physical block. Row (sequence, kv_head, token) = (block · num_kv_heads + kv_head) ·
/// block_size + token % block_size with block = block_table[sequence][token / block_size]; a run
/// ends at the end of its block. A block's rows (all its KV heads) are consecutive: copying a
/// block (copy-on-write) is one copy of num_kv_heads · block_size rows.
struct PagedLayout {
  const int32_t* block_table = nullptr;  ///< [batch][max_blocks_per_seq] physical block ids
  int64_t max_blocks_per_seq = 0;        ///< the block table's row length
  int64_t block_size = 0;                ///< tokens per block
  int64_t num_kv_heads = 0;              ///< KV heads per block

  /// The row of token @p token of KV head @p kv_head of sequence @p sequence.
  INFERLAB_HOST_DEVICE int64_t row(int64_t sequence, int64_t kv_head, int64_t token) const {
    const int64_t block = block_table[sequence * max_blocks_per_seq + token / block_size];
    return (block * num_kv_heads + kv_head) * block_size + token % block_size;
  }
  /// The run that starts at @p token: the rest of its block.
  INFERLAB_HOST_DEVICE KvRun run(int64_t sequence, int64_t kv_head, int64_t token) const {
    return {row(sequence, kv_head, token), block_size - token % block_size};
  }
  /// The index of (sequence, kv_head) among per-head arrays (per-channel scales: × head_dim).
  INFERLAB_HOST_DEVICE int64_t head(int64_t sequence, int64_t kv_head) const {
    return sequence * num_kv_heads + kv_head;
  }
  /// The slot of token @p token of sequence @p sequence: block · block_size + token % block_size.
  INFERLAB_HOST_DEVICE int64_t slot(int64_t sequence, int64_t token) const {
    return int64_t(block_table[sequence * max_blocks_per_seq + token / block_size]) * block_size + token % block_size;
  }
  /// The row of KV head @p kv_head of slot @p slot (= row(sequence, kv_head, token)).
  INFERLAB_HOST_DEVICE int64_t slot_row(int64_t slot, int64_t kv_head) const {
    return inferlab::slot_row(slot, kv_head, num_kv_heads, block_size);
  }
  /// Per-channel scales are per sequence; a paged cache has none (KvCache refuses them), and a
  /// slot does not say which sequence holds it: −1.
  INFERLAB_HOST_DEVICE int64_t slot_head(int64_t, int64_t) const { return -1; }
};

/// What a kernel reads of one layer: K and V rows of element type T, their scales of type S
/// (none for fp32/fp16), the layout and the lengths. Per-token scales sit at the row's index;
/// per-channel K scales at layout.head(sequence, kv_head) · head_dim + channel.
template <class T, class S = float, class Layout = ContiguousLayout>
struct KvRows {
  const T* k = nullptr;          ///< K rows (row r at k + r · head_dim)
  const T* v = nullptr;          ///< V rows
  const S* k_scales = nullptr;   ///< K scales (per token or per channel), or null
  const S* v_scales = nullptr;   ///< V scales (per token), or null
  const int32_t* lengths = nullptr;  ///< tokens cached per sequence
  Layout layout;                 ///< (sequence, KV head, token) → row
  int64_t head_dim = 0;          ///< elements per row
  bool per_channel = false;      ///< K scales are per channel
};

/// The writable twin of KvRows, for append kernels: the same rows, scales and layout through
/// non-const pointers.
template <class T, class S = float, class Layout = ContiguousLayout>
struct KvSlots {
  T* k = nullptr;                    ///< K rows
  T* v = nullptr;                    ///< V rows
  S* k_scales = nullptr;             ///< K scales (per token or per channel), or null
  S* v_scales = nullptr;             ///< V scales (per token), or null
  const int32_t* lengths = nullptr;  ///< tokens cached per sequence: the append slot
  Layout layout;                     ///< (sequence, KV head, token) → row
  int64_t head_dim = 0;              ///< elements per row
  bool per_channel = false;          ///< K scales are per channel
};

}  // namespace inferlab
