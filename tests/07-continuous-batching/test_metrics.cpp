// Chapter 07: serving metrics (nearest-rank percentiles, TTFT, TPOT, ITL, throughput) on
// hand-made outputs, the JSON-lines trace reader's answers to good and bad lines, and the run's JSON.
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

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

// Each kind of bad line is reported as "trace line N: …" with N the line in the file (comments
// and blank lines counted) and the key, or the column of a syntax error.
TEST(Ch07Trace, MalformedLinesAreReportedWithTheirLineNumberAndKey) {
  const auto error = [](const std::string& text) {
    std::istringstream in("# a comment\n\n{\"prompt_ids\": [1]}\n" + text + "\n{\"prompt_ids\": [2]}\n");
    try {
      read_trace(in, 16, 1);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // A bad type for a key.
  EXPECT_EQ(error("{\"prompt_ids\": [1], \"arrival\": \"soon\"}"),
            "trace line 4: arrival must be a number, not \"soon\"");
  EXPECT_EQ(error("{\"prompt_len\": [3]}"), "trace line 4: prompt_len must be a number, not [3]");
  EXPECT_EQ(error("{\"prompt_ids\": [1, \"x\"]}"), "trace line 4: prompt_ids holds \"x\", not a token id in [0, 16)");
  EXPECT_EQ(error("{\"prompt_ids\": [1.5]}"), "trace line 4: prompt_ids holds 1.5, not a token id in [0, 16)");
  EXPECT_EQ(error("{\"stop_ids\": {\"a\": 1}, \"prompt_len\": 2}"),
            "trace line 4: stop_ids must be an array (of token ids), not {\"a\":1}");
  // A missing key.
  EXPECT_EQ(error("{\"arrival\": 1.0}"), "trace line 4: needs prompt_ids or prompt_len ≥ 1");
  // Syntax errors: the line, then the parser's column and reason.
  const std::string syntax = error("{\"prompt_ids\": [1, 2}");
  EXPECT_EQ(syntax.rfind("trace line 4: not JSON: parse error at column 21: syntax error", 0), 0u) << syntax;
  EXPECT_EQ(error("{'prompt_len': 3}").rfind("trace line 4: not JSON: ", 0), 0u);
  EXPECT_EQ(error("[1, 2]"), "trace line 4: must be a JSON object ({\"key\": value, …}), not [1,2]");
  // An unknown key, named with its quotes escaped.
  EXPECT_EQ(
      error("{\"prompt_len\": 2, \"we\\\"ird\": 1}").rfind("trace line 4: unknown key \"we\\\"ird\" (known: id,", 0),
      0u)
      << error("{\"prompt_len\": 2, \"we\\\"ird\": 1}");
  EXPECT_EQ(error("{\"prompt_len\": 2}"), "no error");
}

// run_json is the document generate --trace writes: the keys the lesson's plots read, each
// request's figures, and text that parses back to the same value.
TEST(Ch07Trace, RunJsonCarriesConfigSummaryStatsAndRequests) {
  std::vector<RequestOutput> outs = {output(3, 0.0, {0.5, 1.0, 2.0}), output(8, 0.25, {1.25})};
  outs[1].reason = FinishReason::aborted;
  EngineConfig config;
  EngineStats stats;
  stats.steps = 4;
  stats.busy_seconds = 2.0 / 3.0;
  const Json json = run_json(config, stats, outs);
  std::ostringstream text;
  write_run_json(text, config, stats, outs);
  EXPECT_EQ(Json::parse(text.str()), json);
  std::vector<std::string> keys;
  for (const auto& item : json.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"config", "summary", "stats", "requests"}));
  EXPECT_EQ(json["config"]["block_size"], config.block_size);
  EXPECT_EQ(json["summary"]["requests"], 2);
  EXPECT_EQ(json["summary"]["ttft_s"]["count"], 2);
  EXPECT_EQ(json["stats"]["steps"], 4);
  EXPECT_EQ(json["stats"]["busy_s"].dump(), "0.666666667") << "seconds carry 9 significant digits";
  ASSERT_EQ(json["requests"].size(), 2u);
  EXPECT_EQ(json["requests"][0]["id"], 3);
  EXPECT_EQ(json["requests"][0]["ttft"], 0.5);
  EXPECT_EQ(json["requests"][0]["latency"], 2);
  EXPECT_EQ(json["requests"][0]["tokens"], Json({7, 7, 7}));
  EXPECT_EQ(json["requests"][1]["reason"], std::string(to_string(FinishReason::aborted)));
  EXPECT_EQ(text.str().find("\n    {\"id\": 3, \"arrival\": 0, \"first_token\": 0.5,"), text.str().find("\n    {"))
      << text.str();
}

}  // namespace
}  // namespace inferlab::engine
