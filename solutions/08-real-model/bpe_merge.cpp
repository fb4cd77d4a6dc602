// Exercise 8.3 — the BPE merge loop: a straightforward answer, O(n²) lookups for n symbols (the
// lab's runtime/tokenizer/bpe_tokenizer.cpp uses a heap). See exercises/08-real-model/ch08.h.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "08-real-model/ch08.h"
#include "common/check.h"

namespace inferlab::student {

std::vector<std::string> bpe_merge(std::span<const std::string> symbols, const MergeRanks& ranks) {
  // ---- given: the check ----
  for (size_t i = 0; i < symbols.size(); ++i)
    require(!symbols[i].empty(), "symbols[" + std::to_string(i) + "]", "\"\"",
            "must not be empty (a symbol is a byte's character)");

  std::vector<std::string> parts(symbols.begin(), symbols.end());
  while (parts.size() > 1) {
    // The adjacent pair of lowest rank; strictly lower only, so that a tie keeps the leftmost.
    size_t best = 0;
    int32_t best_rank = -1;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto merge = ranks.find({parts[i], parts[i + 1]});
      if (merge != ranks.end() && (best_rank < 0 || merge->second < best_rank)) {
        best = i;
        best_rank = merge->second;
      }
    }
    if (best_rank < 0) break;  // no adjacent pair merges: these are the tokens
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + std::ptrdiff_t(best) + 1);
  }
  return parts;
}

}  // namespace inferlab::student
