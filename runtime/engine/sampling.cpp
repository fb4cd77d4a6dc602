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

namespace {

// Nucleus sampling's candidates: softmax(logits / temperature) in double (max subtracted), the
// token ids by decreasing probability (ties: smaller id first), and how many of them the nucleus
// keeps (up to the first whose cumulative probability reaches top_p) with their mass.
struct Nucleus {
  std::vector<double> p;       // softmax probabilities, by token id
  std::vector<int32_t> order;  // ids by decreasing p
  size_t kept = 0;             // the nucleus: order[0, kept)
  double mass = 0.0;           // Σ p over the nucleus
};

Nucleus nucleus(std::span<const float> logits, float temperature, float top_p) {
  Nucleus n;
  const double max = double(*std::max_element(logits.begin(), logits.end()));
  n.p.resize(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < n.p.size(); ++i) total += n.p[i] = std::exp((double(logits[i]) - max) / double(temperature));
  for (double& x : n.p) x /= total;
  n.order.resize(n.p.size());
  std::iota(n.order.begin(), n.order.end(), 0);
  std::stable_sort(n.order.begin(), n.order.end(),
                   [&](int32_t a, int32_t b) { return n.p[size_t(a)] > n.p[size_t(b)]; });
  while (n.kept < n.order.size()) {
    n.mass += n.p[size_t(n.order[n.kept++])];
    if (n.mass >= double(top_p)) break;
  }
  return n;
}

void require_no_nan(std::span<const float> logits) {
  require(!logits.empty(), "logits.size()", 0, "must be > 0");
  for (size_t i = 0; i < logits.size(); ++i)
    if (std::isnan(logits[i])) require(false, "logits[" + std::to_string(i) + "]", logits[i], "is NaN");
}

}  // namespace

int32_t sample_top_p(std::span<const float> logits, float temperature, float top_p, double u) {
  require(!logits.empty(), "logits.size()", 0, "must be > 0");
  require(temperature > 0.0f, "temperature", temperature, "must be > 0 to sample (0 is greedy)");
  require(top_p > 0.0f && top_p <= 1.0f, "top_p", top_p, "must be in (0, 1]");
  require(u >= 0.0 && u < 1.0, "u", u, "must be in [0, 1)");
  const Nucleus n = nucleus(logits, temperature, top_p);
  const double target = u * n.mass;
  double cumulative = 0.0;
  for (size_t i = 0; i < n.kept; ++i) {
    cumulative += n.p[size_t(n.order[i])];
    if (cumulative > target) return n.order[i];
  }
  return n.order[n.kept - 1];  // rounding: u·mass at the very top
}

std::vector<double> sampling_distribution(std::span<const float> logits, const SamplingParams& params) {
  require_no_nan(logits);
  require(params.temperature >= 0.0f, "temperature", params.temperature, "must be ≥ 0 (0 is greedy)");
  require(params.top_p > 0.0f && params.top_p <= 1.0f, "top_p", params.top_p, "must be in (0, 1]");
  std::vector<double> out(logits.size(), 0.0);
  if (params.greedy()) {
    out[size_t(greedy_token(logits))] = 1.0;
    return out;
  }
  const Nucleus n = nucleus(logits, params.temperature, params.top_p);
  for (size_t i = 0; i < n.kept; ++i) out[size_t(n.order[i])] = n.p[size_t(n.order[i])] / n.mass;
  return out;
}

int32_t sample_distribution(std::span<const double> p, double u) {
  require(!p.empty(), "p.size()", 0, "must be > 0");
  require(u >= 0.0 && u < 1.0, "u", u, "must be in [0, 1)");
  double total = 0.0;
  int32_t last = -1;  // the last id with a positive weight
  for (size_t i = 0; i < p.size(); ++i) {
    if (!(p[i] >= 0.0) || !std::isfinite(p[i]))
      require(false, "p[" + std::to_string(i) + "]", p[i], "must be a finite weight ≥ 0");
    total += p[i];
    if (p[i] > 0.0) last = int32_t(i);
  }
  require(total > 0.0, "p's sum", total, "must be > 0");
  const double target = u * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    cumulative += p[i];
    if (p[i] > 0.0 && cumulative > target) return int32_t(i);
  }
  return last;
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
