#include "runtime/engine/request.h"

#include <cmath>

#include "common/check.h"

namespace inferlab::engine {

void SamplingParams::validate() const {
  require(max_new_tokens >= 1, "max_new_tokens", max_new_tokens, "must be ≥ 1");
  require(std::isfinite(temperature) && temperature >= 0.0f, "temperature", temperature,
          "must be finite and ≥ 0 (0 = greedy)");
  require(top_p > 0.0f && top_p <= 1.0f, "top_p", top_p, "must be in (0, 1]");
  require(logprobs >= -1 && logprobs <= kMaxLogprobs, "logprobs", logprobs,
          "must be −1 (none) or in [0, " + std::to_string(kMaxLogprobs) + "]");
  require(n >= 1, "n", n, "must be ≥ 1");
}

uint64_t choice_seed(uint64_t seed, int32_t choice) {
  if (choice == 0) return seed;
  uint64_t z = seed + uint64_t(choice) * 0x9E3779B97F4A7C15ULL;  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::string_view to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::length: return "length";
    case FinishReason::stop: return "stop";
    case FinishReason::aborted: return "aborted";
  }
  return "?";
}

double RequestMetrics::tpot() const {
  if (token_times.size() < 2) return -1.0;
  return (token_times.back() - token_times.front()) / double(token_times.size() - 1);
}

}  // namespace inferlab::engine
