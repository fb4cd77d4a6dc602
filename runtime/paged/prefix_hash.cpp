#include "runtime/paged/prefix_hash.h"

#include <xxhash.h>

#include "common/check.h"

namespace inferlab::paged {

uint64_t block_hash(uint64_t parent_hash, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent_hash);
}

uint64_t prefix_root(std::string_view cache_salt) {
  return cache_salt.empty() ? kFirstBlockParent
                            : XXH3_64bits_withSeed(cache_salt.data(), cache_salt.size(), kFirstBlockParent);
}

std::vector<uint64_t> prefix_block_hashes(std::span<const int32_t> tokens, int64_t block_size, uint64_t root) {
  require_positive("block_size", block_size);
  const auto full_blocks = static_cast<int64_t>(tokens.size()) / block_size;
  std::vector<uint64_t> hashes;
  hashes.reserve(static_cast<size_t>(full_blocks));
  uint64_t parent = root;
  for (int64_t i = 0; i < full_blocks; ++i) {
    parent = block_hash(parent, tokens.subspan(static_cast<size_t>(i * block_size), static_cast<size_t>(block_size)));
    hashes.push_back(parent);
  }
  return hashes;
}

}  // namespace inferlab::paged
