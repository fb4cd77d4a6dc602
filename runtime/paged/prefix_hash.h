#pragma once
/// @file prefix_hash.h
/// The chained block hash of prefix caching (chapter 06): a full block of tokens is named by a
/// 64-bit hash of its own tokens *and* of every token before it, so two sequences get the same
/// hash for block i exactly when their first (i + 1) · block_size tokens are equal.
///
/// Choice: hash(i) = XXH3_64bits(tokens of block i, seed = hash(i − 1)), with
/// hash(−1) = kFirstBlockParent. Seeding with the parent hash chains the blocks without copying
/// parent‖tokens into a buffer, and XXH3 is the fast non-cryptographic hash that nano-vllm
/// (xxh64) and vLLM (its default) use for the same job. Token ids are hashed as the bytes of
/// int32 in host byte order: the hashes name blocks inside one process, they are never stored.
///
/// A 64-bit hash is trusted without comparing the tokens (as vLLM does by default): a false hit
/// between n distinct blocks has probability about n² / 2⁶⁵ — 3·10⁻⁸ for a million blocks.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace inferlab::paged {

/// The parent hash of a sequence's first block: the ASCII bytes of "InferLab". Any fixed value
/// works; fixing it makes hashes reproducible across runs and processes.
inline constexpr uint64_t kFirstBlockParent = 0x496e6665724c6162ULL;

/// The hash of one block: XXH3_64bits over @p tokens' bytes, seeded with @p parent_hash (the
/// hash of the block before it, or kFirstBlockParent for a sequence's first block).
uint64_t block_hash(uint64_t parent_hash, std::span<const int32_t> tokens);

/// The parent hash of a sequence's first block for a request with @p cache_salt: kFirstBlockParent
/// for "" (no salt), else XXH3_64bits of the salt's bytes seeded with kFirstBlockParent. Every
/// later hash chains from it, so requests with different salts never share a block — vLLM's
/// `cache_salt`: a tenant cannot learn from a faster answer that another tenant sent the same
/// prompt.
uint64_t prefix_root(std::string_view cache_salt);

/// The chained hashes of the FULL blocks of @p tokens: element i names tokens
/// [0, (i + 1) · block_size). A trailing partial block gets no hash — its content can still
/// change, so it must never be shared through the prefix cache. Size: tokens.size() / block_size.
/// The first block's parent is @p root (prefix_root() of the request's salt).
/// Throws std::invalid_argument when @p block_size ≤ 0.
std::vector<uint64_t> prefix_block_hashes(std::span<const int32_t> tokens, int64_t block_size,
                                          uint64_t root = kFirstBlockParent);

}  // namespace inferlab::paged
