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
