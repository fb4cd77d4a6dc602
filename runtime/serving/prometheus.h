#pragma once
/// @file prometheus.h
/// Prometheus metrics for `GET /metrics` (chapter 09): a histogram and the text exposition
/// format (version 0.0.4, what a Prometheus server scrapes). A histogram does not keep its
/// observations: it counts how many fell at or below each of a fixed list of upper bounds
/// ("le", less or equal), plus their sum and their count. The exposition lists the buckets
/// *cumulatively* — bucket le = b counts every observation ≤ b, so the counts never decrease
/// and the last one, le = "+Inf", is the count — which is what lets a scraper estimate any
/// quantile later (histogram_quantile) and add histograms from several servers.
///
///     # HELP vllm:e2e_request_latency_seconds Request latency, arrival to last token.
///     # TYPE vllm:e2e_request_latency_seconds histogram
///     vllm:e2e_request_latency_seconds_bucket{model_name="smollm2",le="0.5"} 3
///     vllm:e2e_request_latency_seconds_bucket{model_name="smollm2",le="1"} 7
///     vllm:e2e_request_latency_seconds_bucket{model_name="smollm2",le="+Inf"} 8
///     vllm:e2e_request_latency_seconds_sum{model_name="smollm2"} 5.25
///     vllm:e2e_request_latency_seconds_count{model_name="smollm2"} 8

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace inferlab::serving {

/// A histogram's counts at one moment.
struct HistogramSnapshot {
  std::vector<double> upper_bounds;  ///< the finite bounds, increasing (le = "+Inf" is implied)
  std::vector<uint64_t> cumulative;  ///< observations ≤ each bound; one more entry, +Inf's, = count
  double sum = 0.0;                  ///< the sum of the observations
  uint64_t count = 0;                ///< how many were observed
};

/// A Prometheus histogram; observe() and snapshot() may be called from any thread.
class Histogram {
 public:
  /// Buckets with @p upper_bounds: finite and strictly increasing, at least one; throws
  /// std::invalid_argument naming the first bad bound.
  explicit Histogram(std::vector<double> upper_bounds);

  /// Counts @p value in the first bucket whose bound is ≥ it (+Inf when none); NaN is refused
  /// (std::invalid_argument).
  void observe(double value);
  /// The counts, cumulative as the exposition lists them.
  HistogramSnapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last one is (last bound, +Inf)
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

/// A metric's labels, in the order they are written: {{"model_name", "smollm2"}}.
using Labels = std::vector<std::pair<std::string, std::string>>;

/// Writes metrics in the text exposition format.
class MetricsText {
 public:
  /// A gauge or a counter (@p type "gauge" / "counter"): its HELP and TYPE lines, then one sample.
  void scalar(const std::string& name, const std::string& type, const std::string& help, const Labels& labels,
              double value);
  /// The HELP and TYPE lines of a family whose samples follow (sample()).
  void family(const std::string& name, const std::string& type, const std::string& help);
  /// One sample line: name{labels} value.
  void sample(const std::string& name, const Labels& labels, double value);
  /// A histogram: its HELP and TYPE lines, its cumulative buckets (le last among the labels),
  /// _sum and _count.
  void histogram(const std::string& name, const std::string& help, const Labels& labels, const HistogramSnapshot& h);
  /// The text so far.
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

/// A number as the exposition writes it: the shortest text that reads back to the same double;
/// "+Inf", "-Inf", "NaN".
std::string prometheus_number(double value);

/// @p value with backslash, double quote and newline escaped, as a label value must be.
std::string escape_label_value(const std::string& value);

/// The Content-Type of the text exposition.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace inferlab::serving
