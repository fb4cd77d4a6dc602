// Exercise 12.1 — prompt lookup: a straightforward answer (the engine's own is
// runtime/engine/speculative.h). See exercises/12-speculative-decoding/ch12.h.
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

  const int64_t size = int64_t(tokens.size());
  if (num_tokens == 0) return {};
  // The longest n-gram first: a longer match is better evidence.
  for (int64_t n = std::min(max_ngram, size - 1); n >= min_ngram; --n) {
    const auto suffix = tokens.last(size_t(n));
    // The most recent earlier occurrence first; it may overlap the suffix, never be it.
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n, to = std::min(from + num_tokens, size);
      return {tokens.begin() + from, tokens.begin() + to};
    }
  }
  return {};
}

}  // namespace inferlab::student
