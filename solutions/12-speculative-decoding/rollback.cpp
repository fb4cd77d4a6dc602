// Exercise 12.3 — the rollback of a block table: a straightforward answer (the engine's own is
// runtime/paged/block_manager.h's truncate()). See exercises/12-speculative-decoding/ch12.h.
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

  const size_t kept_blocks = size_t((keep + block_size - 1) / block_size);
  std::vector<int32_t> freed;
  while (blocks.size() > kept_blocks) {  // the tail first
    freed.push_back(blocks.back());
    blocks.pop_back();
  }
  hashes.resize(std::min(hashes.size(), size_t(keep / block_size)));  // only full blocks keep a hash
  num_tokens = keep;
  return freed;
}

}  // namespace inferlab::student
