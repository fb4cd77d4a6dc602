// Exercise 8.3 — the BPE merge loop: lowest rank first, ties leftmost, until no pair merges. See
// ch08.h for the rules and a worked example.
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

  throw NotImplemented("bpe_merge");  // TODO(student): delete this line once written

  // TODO(student): std::vector<std::string> parts(symbols.begin(), symbols.end()); then loop:
  //   best = −1 (no pair yet); for i = 0 … parts.size() − 2: look up {parts[i], parts[i + 1]} in
  //   ranks (ranks.find); keep i when its rank is STRICTLY lower than the best so far (so a tie
  //   keeps the leftmost); if best == −1, stop; else parts[best] += parts[best + 1] and erase
  //   parts[best + 1]. Return parts. (roughly 15 lines)
  return {};
}

}  // namespace inferlab::student
