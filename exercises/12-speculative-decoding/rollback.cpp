// Exercise 12.3 — the rollback of a block table after verification: free the blocks past the kept
// tokens (last to first), drop the hashes of blocks no longer full. See ch12.h.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "12-speculative-decoding/ch12.h"
#include "common/check.h"

namespace inferlab::student {

std::vector<int32_t> rollback(std::vector<int32_t>& blocks, std::vector<uint64_t>& hashes, int64_t& num_tokens,
                              int64_t keep, int64_t block_size, int64_t num_registered) {
  // ---- given: the check ----
  require(block_size >= 1, "block_size", block_size, "must be ≥ 1");
  require(keep >= num_registered * block_size && keep <= num_tokens, "keep", keep,
          "must be in [" + std::to_string(num_registered * block_size) + ", " + std::to_string(num_tokens) +
              "]: the table's slotted tokens, not below its blocks offered to the prefix cache");

  throw NotImplemented("rollback");  // TODO(student): delete this line once written

  // TODO(student):
  //   1. the blocks kept: ⌈keep / block_size⌉; pop the others off the back, collecting their ids
  //      (the last block first). (about 4 lines)
  //   2. hashes: only the full blocks' — resize to min(hashes.size(), keep / block_size). (1 line)
  //   3. num_tokens = keep; return the freed ids. (2 lines)
  (void)blocks, (void)hashes;
  return {};
}

}  // namespace inferlab::student
