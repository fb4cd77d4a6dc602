// Chapter 07: serving metrics (nearest-rank percentiles, TTFT, TPOT, ITL, throughput) on
// hand-made outputs, and the JSON-lines trace reader's answers to good and bad lines.
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include "runtime/engine/metrics.h"
#include "runtime/engine/trace.h"

namespace inferlab::engine {
namespace {

RequestOutput output(int64_t id, double arrival, std::vector<double> times, int64_t prompt = 4) {
  RequestOutput o;
  o.id = id;
  o.prompt.assign(size_t(prompt), 1);
  o.tokens.assign(times.size(), 7);
  o.metrics.arrival = arrival;
  o.metrics.first_token = times.empty() ? -1.0 : times.front();
  o.metrics.finish = times.empty() ? arrival : times.back();
  o.metrics.token_times = std::move(times);
  return o;
}

TEST(Ch07Metrics, NearestRankPercentiles) {
  const Percentiles p = percentiles({5, 1, 4, 2, 3});
  EXPECT_EQ(p.p50, 3);
  EXPECT_EQ(p.p99, 5);
  EXPECT_DOUBLE_EQ(p.mean, 3);
  EXPECT_EQ(p.count, 5);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_EQ(percentiles(hundred).p99, 99);
  EXPECT_EQ(percentiles({}).count, 0);
}

TEST(Ch07Metrics, TtftTpotItlAndThroughput) {
  // Request 0: arrives at 0, tokens at 1, 2, 4 → TTFT 1, TPOT (4 − 1) / 2 = 1.5, gaps 1 and 2.
  // Request 1: arrives at 1, one token at 5 → TTFT 4, no TPOT, no gap.
  const std::vector<RequestOutput> outs = {output(0, 0.0, {1, 2, 4}), output(1, 1.0, {5})};
  const ServingSummary s = summarize(outs);
  EXPECT_EQ(s.generated_tokens, 4);
  EXPECT_DOUBLE_EQ(s.makespan, 5.0);
  EXPECT_DOUBLE_EQ(s.tokens_per_second, 0.8);
  EXPECT_EQ(s.ttft.count, 2);
  EXPECT_DOUBLE_EQ(s.ttft.mean, 2.5);
  EXPECT_EQ(s.tpot.count, 1);
  EXPECT_DOUBLE_EQ(s.tpot.p50, 1.5);
  EXPECT_EQ(s.itl.count, 2);
  EXPECT_DOUBLE_EQ(s.itl_max, 2.0);
  EXPECT_EQ(inter_token_gaps(outs, 3).size(), 0u) << "both prompts are longer than 3";
}

TEST(Ch07Trace, ReadsPromptIdsRandomPromptsAndOptions) {
  std::istringstream in(
      "# comment\n"
      "{\"arrival\": 0.5, \"prompt_ids\": [1, 2, 3], \"max_new_tokens\": 4}\n"
      "\n"
      "{\"id\": 9, \"prompt_len\": 5, \"temperature\": 0.5, \"top_p\": 0.9, \"seed\": 3, \"stop_ids\": [2]}\n");
  const auto requests = read_trace(in, 16, 1);
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].id, 0);
  EXPECT_DOUBLE_EQ(requests[0].arrival, 0.5);
  EXPECT_EQ(requests[0].prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(requests[0].sampling.max_new_tokens, 4);
  EXPECT_EQ(requests[1].id, 9);
  EXPECT_EQ(requests[1].prompt.size(), 5u);
  for (const int32_t id : requests[1].prompt) EXPECT_LT(id, 16);
  EXPECT_FLOAT_EQ(requests[1].sampling.top_p, 0.9f);
  EXPECT_EQ(requests[1].sampling.stop_ids, (std::vector<int32_t>{2}));
}

TEST(Ch07Trace, BadLinesNameTheLineAndTheKey) {
  const auto error = [](const std::string& text) {
    std::istringstream in(text);
    try {
      read_trace(in, 16, 1);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("{\"prompt_ids\": [1]}\n{\"bogus\": 1, \"prompt_len\": 2}").find("line 2"), std::string::npos);
  EXPECT_NE(error("{\"bogus\": 1, \"prompt_len\": 2}").find("bogus"), std::string::npos);
  EXPECT_NE(error("{\"prompt_ids\": [1, 99]}").find("prompt_ids"), std::string::npos);
  EXPECT_NE(error("{\"max_new_tokens\": 3}").find("prompt_ids or prompt_len"), std::string::npos);
  EXPECT_NE(error("{\"prompt_ids\": [1]").find("expected"), std::string::npos);
  EXPECT_NE(error("{\"prompt_ids\": 1}").find("must be an array"), std::string::npos);
}

}  // namespace
}  // namespace inferlab::engine
