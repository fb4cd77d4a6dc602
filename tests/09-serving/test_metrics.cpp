// The Prometheus histogram and exposition (runtime/serving/prometheus.h), the server's metrics under
// vLLM's names (runtime/serving/serving_metrics.h), and admission control with its Little's-law
// Retry-After (runtime/serving/admission.h). The histogram is checked against counting the observations
// directly; the exposition line by line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/seeded.h"
#include "runtime/serving/admission.h"
#include "runtime/serving/prometheus.h"
#include "runtime/serving/serving_metrics.h"

namespace inferlab::serving {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool has_line(const std::string& text, const std::string& line) {
  const auto lines = lines_of(text);
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

TEST(PrometheusHistogram, BucketsAreCumulativeAndABoundCountsAsLessOrEqual) {
  Histogram h({0.1, 0.5, 1.0});
  for (const double v : {0.05, 0.1, 0.3, 0.5, 0.7, 2.0}) h.observe(v);
  const HistogramSnapshot s = h.snapshot();
  // le 0.1: 0.05 and 0.1 itself; le 0.5: + 0.3, 0.5; le 1: + 0.7; +Inf: + 2.0.
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 5, 6}));
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.sum, 0.05 + 0.1 + 0.3 + 0.5 + 0.7 + 2.0);
}

TEST(PrometheusHistogram, RandomObservationsMatchCountingThemDirectly) {
  testing::SeededRng rng;
  const std::vector<double> bounds{0.001, 0.01, 0.02, 0.5, 3.0, 10.0};
  Histogram h(bounds);
  std::vector<double> values;
  for (int i = 0; i < 2000; ++i) {
    // Some exactly on a bound, some past the last one, some negative.
    const int64_t kind = rng.integer(0, 3);
    const double v = kind == 0 ? bounds[size_t(rng.integer(0, int64_t(bounds.size()) - 1))]
                     : kind == 1 ? double(rng.uniform(10.0f, 20.0f))
                                 : double(rng.uniform(-0.01f, 4.0f));
    values.push_back(v);
    h.observe(v);
  }
  const HistogramSnapshot s = h.snapshot();
  ASSERT_EQ(s.cumulative.size(), bounds.size() + 1);
  for (size_t b = 0; b < bounds.size(); ++b)
    EXPECT_EQ(s.cumulative[b], uint64_t(std::count_if(values.begin(), values.end(), [&](double v) { return v <= bounds[b]; })))
        << "le " << bounds[b];
  EXPECT_EQ(s.cumulative.back(), values.size());
  EXPECT_EQ(s.count, values.size());
}

TEST(PrometheusHistogram, ObservationsFromManyThreadsAreAllCounted) {
  Histogram h({1.0});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) h.observe(i % 2 ? 0.5 : 1.5);
    });
  for (auto& t : threads) t.join();
  const HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.count, 20000u);
  EXPECT_EQ(s.cumulative[0], 10000u);
}

TEST(PrometheusHistogram, BadBoundsAndNaNAreRefused) {
  EXPECT_THROW(Histogram({}), std::invalid_argument);
  EXPECT_THROW(Histogram({0.5, 0.5}), std::invalid_argument);
  EXPECT_THROW(Histogram({1.0, std::numeric_limits<double>::infinity()}), std::invalid_argument);
  try {
    Histogram({0.1, 0.2, 0.15});
    FAIL() << "decreasing bounds were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("upper_bounds[2] = 0.15"), std::string::npos) << e.what();
  }
  Histogram h({1.0});
  EXPECT_THROW(h.observe(std::nan("")), std::invalid_argument);
}

TEST(PrometheusText, AHistogramIsWrittenWithLeLastSumAndCount) {
  Histogram h({0.5, 1.0});
  h.observe(0.25);
  h.observe(0.75);
  h.observe(4.0);
  MetricsText m;
  m.histogram("x_seconds", "An example.", {{"model_name", "m"}}, h.snapshot());
  EXPECT_EQ(m.str(),
            "# HELP x_seconds An example.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{model_name=\"m\",le=\"0.5\"} 1\n"
            "x_seconds_bucket{model_name=\"m\",le=\"1\"} 2\n"
            "x_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 3\n"
            "x_seconds_sum{model_name=\"m\"} 5\n"
            "x_seconds_count{model_name=\"m\"} 3\n");
}

TEST(PrometheusText, NumbersReadBackAndLabelValuesAreEscaped) {
  for (const double v : {0.1, 1.0 / 3.0, 1e-9, 123456789.0, -2.5}) EXPECT_EQ(std::stod(prometheus_number(v)), v);
  EXPECT_EQ(prometheus_number(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(prometheus_number(std::nan("")), "NaN");
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  MetricsText m;
  m.scalar("g", "gauge", "help", {{"model_name", "say \"hi\""}}, 2);
  EXPECT_TRUE(has_line(m.str(), "g{model_name=\"say \\\"hi\\\"\"} 2")) << m.str();
}

TEST(ServingMetrics, TheEngineStateAndTheRequestsUnderVllmNames) {
  ServingMetrics metrics("smollm2");
  metrics.record({.ttft = 0.2, .itl = {0.01, 0.02}, .e2e = 0.23, .queue = 0.05, .reason = FinishedReason::length});
  metrics.record({.ttft = 0.1, .itl = {}, .e2e = 0.1, .queue = 0.0, .reason = FinishedReason::stop});
  metrics.record({.ttft = -1, .itl = {}, .e2e = -1, .queue = -1, .reason = FinishedReason::abort});
  metrics.reject(true);
  engine::AsyncEngineStats s;
  s.running = 3;
  s.waiting = 2;
  s.num_blocks = 200;
  s.free_blocks = 150;
  s.engine.prompt_tokens = 70;
  s.engine.generated_tokens = 12;
  s.engine.preemptions = 1;
  const std::string text = metrics.render(s);
  const std::string m = "{model_name=\"smollm2\"}";
  EXPECT_TRUE(has_line(text, "vllm:num_requests_running" + m + " 3")) << text;
  EXPECT_TRUE(has_line(text, "vllm:num_requests_waiting" + m + " 2"));
  EXPECT_TRUE(has_line(text, "vllm:kv_cache_usage_perc" + m + " 0.25"));
  EXPECT_TRUE(has_line(text, "vllm:prompt_tokens_total" + m + " 70"));
  EXPECT_TRUE(has_line(text, "vllm:generation_tokens_total" + m + " 12"));
  EXPECT_TRUE(has_line(text, "vllm:num_preemptions_total" + m + " 1"));
  EXPECT_TRUE(has_line(text, "vllm:request_success_total{model_name=\"smollm2\",finished_reason=\"length\"} 1"));
  EXPECT_TRUE(has_line(text, "vllm:request_success_total{model_name=\"smollm2\",finished_reason=\"stop\"} 1"));
  EXPECT_TRUE(has_line(text, "vllm:request_success_total{model_name=\"smollm2\",finished_reason=\"abort\"} 1"));
  EXPECT_TRUE(has_line(text, "inferlab:requests_rejected_total{model_name=\"smollm2\",reason=\"queue_full\"} 1"));
  // The aborted request is in no latency histogram.
  EXPECT_TRUE(has_line(text, "vllm:time_to_first_token_seconds_count" + m + " 2"));
  EXPECT_TRUE(has_line(text, "vllm:inter_token_latency_seconds_count" + m + " 2"));
  EXPECT_TRUE(has_line(text, "vllm:e2e_request_latency_seconds_count" + m + " 2"));
  EXPECT_TRUE(has_line(text, "vllm:request_queue_time_seconds_count" + m + " 2"));
  EXPECT_TRUE(has_line(text, "vllm:time_to_first_token_seconds_bucket{model_name=\"smollm2\",le=\"0.1\"} 1"));
  // Service time: (0.23 − 0.05 + 0.1 − 0) / 2.
  EXPECT_NEAR(metrics.mean_service_seconds(), 0.14, 1e-12);
  // Every sample line is "name{labels} number" (what a scraper parses).
  for (const std::string& line : lines_of(text)) {
    if (line.starts_with("#")) continue;
    const size_t space = line.rfind(' ');
    ASSERT_NE(space, std::string::npos) << line;
    EXPECT_NO_THROW((void)std::stod(line.substr(space + 1))) << line;
  }
}

TEST(Admission, TicketsUpToTheCapacityThenRefusalsAndPlacesComeBack) {
  AdmissionControl a(2, 1);
  EXPECT_EQ(a.capacity(), 3);
  std::vector<AdmissionControl::Ticket> held;
  for (int i = 0; i < 3; ++i) {
    auto t = a.try_admit();
    ASSERT_TRUE(t.has_value()) << "ticket " << i;
    held.push_back(std::move(*t));
  }
  EXPECT_FALSE(a.try_admit().has_value());
  EXPECT_EQ(a.in_flight(), 3);
  held.pop_back();
  EXPECT_EQ(a.in_flight(), 2);
  EXPECT_TRUE(a.try_admit().has_value());  // admitted, then given back at once
  EXPECT_EQ(a.in_flight(), 2);
  EXPECT_THROW(AdmissionControl(0, 1), std::invalid_argument);
  EXPECT_THROW(AdmissionControl(1, -1), std::invalid_argument);
}

TEST(Admission, ManyThreadsNeverHoldMoreThanTheCapacity) {
  AdmissionControl a(3, 2);
  std::atomic<int64_t> most = 0, admitted = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i)
        if (auto ticket = a.try_admit()) {
          ++admitted;
          int64_t seen = a.in_flight(), prev = most.load();
          while (seen > prev && !most.compare_exchange_weak(prev, seen)) {
          }
        }
    });
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), 5);
  EXPECT_GT(admitted.load(), 0);
  EXPECT_EQ(a.in_flight(), 0);
}

TEST(Admission, RetryAfterIsLittlesLawRoundedUp) {
  // Full (in_flight = capacity): the next departure, S / running = 2.0 / 4 = 0.5 s → 1 s.
  EXPECT_EQ(retry_after_seconds(8, 8, 4, 2.0), 1);
  // Three ahead: 3 · 10 / 4 = 7.5 → 8 s.
  EXPECT_EQ(retry_after_seconds(10, 8, 4, 10.0), 8);
  EXPECT_EQ(retry_after_seconds(8, 8, 4, 0.0), 1);     // nothing measured yet
  EXPECT_EQ(retry_after_seconds(8, 8, 1, 1e9), 3600);  // clamped
}

}  // namespace
}  // namespace inferlab::serving
