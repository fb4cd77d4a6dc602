#include "runtime/engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
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

int32_t choose_token(std::span<const float> logits, const SamplingParams& params, uint64_t& state) {
  if (params.greedy()) return greedy_token(logits);
  return sample_top_p(logits, params.temperature, params.top_p, next_uniform(state));
}

}  // namespace inferlab::engine
