// Exercise 6.2 — the chained prefix hash (FNV-1a 64). See ch06.h for the task, the constants and
// worked values.
#include <cstdint>
#include <string>
#include <vector>

#include "06-paged-attention/ch06.h"
#include "common/check.h"

namespace inferlab::student {

uint64_t student_block_hash(uint64_t parent_hash, const int32_t* tokens, int64_t count) {
  require(count >= 0, "count", count, "must be ≥ 0");
  require(tokens != nullptr || count == 0, "tokens", "nullptr", "must point at count tokens when count > 0");

  throw NotImplemented("student_block_hash");  // TODO(student): delete this line once written

  // TODO(student): h = the offset basis 0xcbf29ce484222325; fold in the 8 bytes of parent_hash,
  // least significant first, then for each token the 4 bytes of uint32_t(tokens[i]), least
  // significant first: h ^= byte; h *= 0x100000001b3 (uint64_t arithmetic wraps mod 2^64, as
  // FNV wants). Take the bytes with shifts ((value >> 8·k) & 0xff), not memcpy: the byte order
  // must not depend on the machine. A helper that folds the n low bytes of a value is about 5
  // lines; the rest about 5.
  return 0;
}

std::vector<uint64_t> student_prefix_hashes(std::span<const int32_t> tokens, int64_t block_size) {
  require_positive("block_size", block_size);

  throw NotImplemented("student_prefix_hashes");  // TODO(student): delete this line once written

  // TODO(student): the number of FULL blocks is tokens.size() / block_size (a partial tail gets
  // no hash). parent = kFirstBlockParentHash; for each full block i, parent =
  // student_block_hash(parent, tokens.data() + i · block_size, block_size), appended to the
  // result. (roughly 8 lines)
  return {};
}

}  // namespace inferlab::student
