#include "runtime/engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/check.h"

namespace inferlab::engine {

int32_t greedy_token(std::span<const float> logits) {
  require(!logits.empty(), "logits.size()", 0, "must be > 0");
  int32_t best = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    // The message is built only for a NaN (a string per logit cost 7% of a decode step).
    if (std::isnan(logits[i])) require(false, "logits[" + std::to_string(i) + "]", logits[i], "is NaN");
    if (logits[i] > logits[size_t(best)]) best = int32_t(i);
  }
  return best;
}

int32_t sample_top_p(std::span<const float> logits, float temperature, float top_p, double u) {
  require(!logits.empty(), "logits.size()", 0, "must be > 0");
  require(temperature > 0.0f, "temperature", temperature, "must be > 0 to sample (0 is greedy)");
  require(top_p > 0.0f && top_p <= 1.0f, "top_p", top_p, "must be in (0, 1]");
  require(u >= 0.0 && u < 1.0, "u", u, "must be in [0, 1)");
  const double max = double(*std::max_element(logits.begin(), logits.end()));
  std::vector<double> p(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < p.size(); ++i) total += p[i] = std::exp((double(logits[i]) - max) / double(temperature));
  std::vector<int32_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
  size_t kept = 0;
  double mass = 0.0;
  while (kept < order.size()) {
    mass += p[size_t(order[kept++])] / total;
    if (mass >= double(top_p)) break;
  }
  const double target = u * mass;
  double cumulative = 0.0;
  for (size_t i = 0; i < kept; ++i) {
    cumulative += p[size_t(order[i])] / total;
    if (cumulative > target) return order[i];
  }
  return order[kept - 1];  // rounding: u·mass at the very top
}

double next_uniform(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

SampledLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t top) {
  if (logits.empty()) throw std::invalid_argument("token_logprobs: empty logits");
  if (token < 0 || size_t(token) >= logits.size())
    throw std::invalid_argument("token_logprobs: token " + std::to_string(token) + " is outside the " +
                                std::to_string(logits.size()) + " logits");
  if (top < 0) throw std::invalid_argument("token_logprobs: top must be ≥ 0");
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float x : logits) sum += std::exp(double(x) - max);
  const double log_z = max + std::log(sum);  // log Σ exp(logit)
  SampledLogprobs out;
  out.logprob = float(double(logits[size_t(token)]) - log_z);
  const size_t k = std::min(size_t(top), logits.size());
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(k), ids.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  for (size_t i = 0; i < k; ++i) out.top.push_back({ids[i], float(double(logits[size_t(ids[i])]) - log_z)});
  return out;
}

int32_t choose_token(std::span<const float> logits, const SamplingParams& params, uint64_t& state) {
  if (params.greedy()) return greedy_token(logits);
  return sample_top_p(logits, params.temperature, params.top_p, next_uniform(state));
}

}  // namespace inferlab::engine
