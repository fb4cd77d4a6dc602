// Exercise 12.1 — prompt lookup: guess the tokens that followed the last n-gram's most recent
// earlier occurrence. See ch12.h for the task and a worked example.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "12-speculative-decoding/ch12.h"
#include "common/check.h"

namespace inferlab::student {

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int64_t num_tokens, int64_t max_ngram,
                                   int64_t min_ngram) {
  // ---- given: the checks ----
  require(num_tokens >= 0, "num_tokens", num_tokens, "must be ≥ 0");
  require(min_ngram >= 1, "min_ngram", min_ngram, "must be ≥ 1");
  require(max_ngram >= min_ngram, "max_ngram", max_ngram, "must be ≥ min_ngram = " + std::to_string(min_ngram));

  throw NotImplemented("propose_ngram");  // TODO(student): delete this line once written

  // TODO(student):
  //   1. num_tokens = 0: nothing to guess. (1 line)
  //   2. for n from min(max_ngram, size − 1) down to min_ngram: the suffix is the last n tokens;
  //      for j from size − n − 1 down to 0 (the most recent first): when tokens[j, j + n) equals
  //      the suffix (std::equal), return tokens[j + n, min(j + n + num_tokens, size)). (about 8 lines)
  //   3. no match: return {}. (1 line)
  (void)tokens;
  return {};
}

}  // namespace inferlab::student
