#include "runtime/engine/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace inferlab::engine {

Percentiles percentiles(std::vector<double> values) {
  Percentiles p;
  p.count = int64_t(values.size());
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  const auto rank = [&](double q) {  // nearest rank: the smallest value with ≥ q% at or below it
    const auto k = size_t(std::max(1.0, std::ceil(q / 100.0 * double(values.size()))));
    return values[k - 1];
  };
  p.p50 = rank(50.0);
  p.p99 = rank(99.0);
  p.mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  return p;
}

ServingSummary summarize(std::span<const RequestOutput> outputs) {
  ServingSummary s;
  s.requests = int64_t(outputs.size());
  std::vector<double> ttft, tpot, latency;
  double first = std::numeric_limits<double>::infinity(), last = 0.0;
  for (const RequestOutput& o : outputs) {
    const RequestMetrics& m = o.metrics;
    s.generated_tokens += int64_t(o.tokens.size());
    s.preemptions += m.preemptions;
    first = std::min(first, m.arrival);
    last = std::max(last, m.finish);
    if (m.ttft() >= 0) ttft.push_back(m.ttft());
    if (m.tpot() >= 0) tpot.push_back(m.tpot());
    if (o.reason != FinishReason::aborted) {
      ++s.finished;
      latency.push_back(m.latency());
    }
  }
  s.makespan = outputs.empty() ? 0.0 : last - first;
  s.tokens_per_second = s.makespan > 0 ? double(s.generated_tokens) / s.makespan : 0.0;
  s.ttft = percentiles(std::move(ttft));
  s.tpot = percentiles(std::move(tpot));
  s.latency = percentiles(std::move(latency));
  std::vector<double> gaps = inter_token_gaps(outputs, std::numeric_limits<int64_t>::max());
  s.itl_max = gaps.empty() ? 0.0 : *std::max_element(gaps.begin(), gaps.end());
  s.itl = percentiles(std::move(gaps));
  return s;
}

std::vector<double> inter_token_gaps(std::span<const RequestOutput> outputs, int64_t max_prompt) {
  std::vector<double> gaps;
  for (const RequestOutput& o : outputs) {
    if (int64_t(o.prompt.size()) > max_prompt) continue;
    const auto& t = o.metrics.token_times;
    for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
  }
  return gaps;
}

namespace {
// Seconds and rates carry 9 significant digits in the JSON (nanoseconds of a run of seconds).
Json figure(double value) {
  return json_number(value, 9);
}

Json to_json(const Percentiles& p) {
  return {{"p50", figure(p.p50)}, {"p99", figure(p.p99)}, {"mean", figure(p.mean)}, {"count", p.count}};
}
}  // namespace

Json to_json(const ServingSummary& s) {
  return {{"requests", s.requests},
          {"finished", s.finished},
          {"generated_tokens", s.generated_tokens},
          {"makespan_s", figure(s.makespan)},
          {"tokens_per_s", figure(s.tokens_per_second)},
          {"ttft_s", to_json(s.ttft)},
          {"tpot_s", to_json(s.tpot)},
          {"itl_s", to_json(s.itl)},
          {"itl_max_s", figure(s.itl_max)},
          {"latency_s", to_json(s.latency)},
          {"preemptions", s.preemptions}};
}

}  // namespace inferlab::engine
