#pragma once
/// @file kv_factories.h
/// KV caches built for tests, benchmarks and `inferlab decode` (chapters 03–06), apart from the
/// cache class itself (kv_cache.h): a cache holding external data (.npy files' full
/// [batch, num_kv_heads, max_seq_len, head_dim] arrays), the scattered block order a paged pool
/// is handed out in, and the paged copy of a contiguous cache.

#include <cstdint>
#include <vector>

#include "common/tensor.h"
#include "kernels/kv/kv_cache.h"
#include "kernels/kv/kv_format.h"

namespace inferlab {

/// A cache of @p format holding external data: @p k and @p v are full caches
/// [batch, num_kv_heads, max_seq_len, head_dim] (as .npy files store them) and @p lengths the
/// tokens of each sequence. Only the first lengths[b] tokens are copied (quantized as the
/// format says); the rest is poisoned. Throws std::invalid_argument naming k, v or lengths[b]
/// when shapes or lengths are wrong.
KvCache make_kv_cache(const Tensor<float>& k, const Tensor<float>& v, const std::vector<int64_t>& lengths,
                      KvFormat format);

/// A permutation of the block ids 0 … @p count − 1 in which no block directly follows its
/// predecessor (order[i + 1] ≠ order[i] + 1) when @p count ≥ 3: a pool handed out in this
/// order has no two logical neighbours physically adjacent, so a kernel that ignored the block
/// table could not pass by luck. Seeded: the same order for the same seed.
std::vector<int32_t> scattered_block_order(int64_t count, uint64_t seed);

/// How to_paged() hands out the pool's blocks.
enum class BlockOrder {
  scattered,  ///< scattered_block_order(): no block after its logical predecessor (a pool after churn)
  in_order,   ///< sequence b's block i is b · blocks_per_seq + i: the block table, but adjacent blocks
};

/// The same cache in a paged pool (chapter 06's tests, benchmarks and `decode --block-size`):
/// every sequence gets ⌈max_seq_len / block_size⌉ blocks (room to append up to max_seq_len),
/// taken in scattered_block_order() (or in order, @p order); lengths, rows and scales are copied
/// byte for byte, so a decode of the copy must equal the decode of @p cache. Throws
/// std::invalid_argument when @p block_size is not positive or @p cache is paged or has
/// per-channel K scales.
KvCache to_paged(const KvCache& cache, int64_t block_size, uint64_t seed, BlockOrder order = BlockOrder::scattered);

}  // namespace inferlab
