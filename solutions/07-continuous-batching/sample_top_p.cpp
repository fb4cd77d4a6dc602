// Exercise 7.3 — nucleus (top-p) sampling: a straightforward answer (the engine's own is
// runtime/engine/sampling.h). See exercises/07-continuous-batching/ch07.h.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <vector>

#include "07-continuous-batching/ch07.h"
#include "common/check.h"

namespace inferlab::student {

int32_t student_sample_top_p(std::span<const float> logits, float temperature, float top_p, double u) {
  // ---- given: the checks ----
  require(!logits.empty(), "logits.size()", 0, "must be > 0");
  require(temperature > 0.0f, "temperature", temperature, "must be > 0 to sample (0 is greedy)");
  require(top_p > 0.0f && top_p <= 1.0f, "top_p", top_p, "must be in (0, 1]");
  require(u >= 0.0 && u < 1.0, "u", u, "must be in [0, 1)");

  const size_t vocab_size = logits.size();
  // 1. softmax(logits / T) in double; subtracting the max keeps every exp ≤ 1 (no overflow).
  const double max_logit = double(*std::max_element(logits.begin(), logits.end()));
  std::vector<double> prob(vocab_size);
  double total = 0.0;
  for (size_t i = 0; i < vocab_size; ++i) {
    prob[i] = std::exp((double(logits[i]) - max_logit) / double(temperature));
    total += prob[i];
  }

  // 2. The tokens by decreasing probability, equal probabilities by increasing id.
  std::vector<int32_t> by_prob(vocab_size);
  std::iota(by_prob.begin(), by_prob.end(), 0);
  std::sort(by_prob.begin(), by_prob.end(), [&](int32_t a, int32_t b) {
    const double pa = prob[size_t(a)], pb = prob[size_t(b)];
    return pa != pb ? pa > pb : a < b;
  });

  // 3. The nucleus: the shortest prefix whose probability reaches top_p (all of it at worst).
  size_t nucleus_size = 0;
  double mass = 0.0;
  while (nucleus_size < vocab_size && (nucleus_size == 0 || mass < double(top_p)))
    mass += prob[size_t(by_prob[nucleus_size++])] / total;

  // 4. Inverse-CDF sampling over the renormalised nucleus: cumulative / mass > u.
  const double threshold = u * mass;
  double cumulative = 0.0;
  for (size_t k = 0; k < nucleus_size; ++k) {
    cumulative += prob[size_t(by_prob[k])] / total;
    if (cumulative > threshold) return by_prob[k];
  }
  return by_prob[nucleus_size - 1];  // u · mass at the very top, lost to rounding
}

}  // namespace inferlab::student
