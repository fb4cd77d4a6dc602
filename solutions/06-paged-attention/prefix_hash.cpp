// Exercise 6.2 — the chained prefix hash (FNV-1a 64): a straightforward answer (the lab's
// runtime/paged/prefix_hash.h chains XXH3 the same way). See exercises/06-paged-attention/ch06.h.
#include <cstdint>
#include <string>
#include <vector>

#include "06-paged-attention/ch06.h"
#include "common/check.h"

namespace inferlab::student {

namespace {

constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

// Folds the @p num_bytes low bytes of @p value into @p hash, least significant byte first: the
// byte order is fixed by the shifts, whatever the machine's (no memcpy of the integer).
uint64_t fnv1a_bytes(uint64_t hash, uint64_t value, int num_bytes) {
  for (int i = 0; i < num_bytes; ++i) {
    hash ^= (value >> (8 * i)) & 0xffu;
    hash *= kFnvPrime;  // unsigned: wraps modulo 2^64, as FNV wants
  }
  return hash;
}

}  // namespace

uint64_t student_block_hash(uint64_t parent_hash, const int32_t* tokens, int64_t count) {
  require(count >= 0, "count", count, "must be ≥ 0");
  require(tokens != nullptr || count == 0, "tokens", "nullptr", "must point at count tokens when count > 0");

  // The parent first: it stands for every token before this block, which is what chains them.
  uint64_t hash = fnv1a_bytes(kFnvOffsetBasis, parent_hash, 8);
  for (int64_t i = 0; i < count; ++i)
    hash = fnv1a_bytes(hash, static_cast<uint32_t>(tokens[i]), 4);  // a negative id: its two's-complement bits
  return hash;
}

std::vector<uint64_t> student_prefix_hashes(std::span<const int32_t> tokens, int64_t block_size) {
  require_positive("block_size", block_size);

  const int64_t full_blocks = static_cast<int64_t>(tokens.size()) / block_size;  // a partial tail gets no hash
  std::vector<uint64_t> hashes;
  hashes.reserve(static_cast<size_t>(full_blocks));
  uint64_t parent = kFirstBlockParentHash;
  for (int64_t i = 0; i < full_blocks; ++i) {
    parent = student_block_hash(parent, tokens.data() + i * block_size, block_size);
    hashes.push_back(parent);
  }
  return hashes;
}

}  // namespace inferlab::student
