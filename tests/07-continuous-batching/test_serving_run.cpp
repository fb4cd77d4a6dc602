// Chapter 07: engine::serve() (runtime/engine/serving_run.h), the one loop behind `inferlab
// generate` and the serving study. Its run must be the engine's own — the same tokens, timings,
// counters and step records as stepping an Engine by hand — under the requests' own labels, with
// the summary of its outputs, and progress lines exactly when asked for.
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/engine/serving_run.h"
#include "tests/07-continuous-batching/engine_fixture.h"
#include "tests/support/seeded.h"

namespace inferlab::testing {
namespace {

using engine::EngineConfig;
using engine::Request;

const model::LlamaModel& tiny_model() {
  static const model::LlamaModel m(model::random_llama(model::parse_random_spec("random:tiny,seq_len=256").config, 7));
  return m;
}

// A pool of 48 tokens (preemptions happen), the simulated clock (timings are deterministic), steps kept.
EngineConfig tight_config() {
  EngineConfig c;
  c.block_size = 4;
  c.num_blocks = 12;
  c.headroom_blocks_per_seq = 0;  // admit while a prompt fits: decodes soon run out of blocks
  c.max_num_batched_tokens = 24;
  c.chunk_size = 8;
  c.max_num_seqs = 6;
  c.max_seq_len = 64;
  c.clock = engine::ClockMode::simulated;
  c.record_steps = true;
  return c;
}

// Requests labelled 1000 − 7 i (not the engine's 0, 1, …), arriving over time, some sampled.
std::vector<Request> labelled_requests(Rng& rng, int64_t count) {
  std::vector<Request> requests;
  for (int64_t i = 0; i < count; ++i) {
    Request r = random_request(rng, 1000 - 7 * i, tiny_model().config().vocab_size, 1, 20, 16, i % 3 == 0);
    r.arrival = 0.002 * double(rng.integer(0, 10));
    requests.push_back(std::move(r));
  }
  return requests;
}

TEST(Ch07ServingRun, IsTheEnginesRunUnderTheRequestsOwnLabels) {
  SeededRng rng;
  const std::vector<Request> requests = labelled_requests(rng, 17);
  const EngineConfig config = tight_config();
  const engine::ServingRun run = engine::serve("labelled", tiny_model(), config, requests);

  engine::Engine by_hand(tiny_model(), config);
  for (const Request& r : requests) by_hand.add_request(r);
  by_hand.run();
  const std::vector<engine::RequestOutput> expected = by_hand.take_outputs();

  EXPECT_EQ(run.name, "labelled");
  EXPECT_EQ(run.config.num_blocks, config.num_blocks);
  EXPECT_EQ(run.stats.steps, by_hand.stats().steps);
  EXPECT_EQ(run.stats.preemptions, by_hand.stats().preemptions);
  EXPECT_GT(run.stats.preemptions, 0) << "the pool is meant to be tight enough to preempt";
  EXPECT_EQ(run.stats.generated_tokens, by_hand.stats().generated_tokens);
  EXPECT_EQ(run.stats.busy_seconds, by_hand.stats().busy_seconds);
  ASSERT_EQ(run.outputs.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const engine::RequestOutput& got = run.outputs[i];
    const engine::RequestOutput& want = expected[i];
    EXPECT_EQ(got.id, requests[size_t(want.id)].id) << "output " << i << " does not carry its request's label";
    EXPECT_EQ(got.tokens, want.tokens) << "request " << got.id;
    EXPECT_EQ(got.reason, want.reason) << "request " << got.id;
    EXPECT_EQ(got.metrics.token_times, want.metrics.token_times) << "request " << got.id;
    EXPECT_EQ(got.metrics.preemptions, want.metrics.preemptions) << "request " << got.id;
  }
  ASSERT_EQ(run.steps.size(), by_hand.steps().size());
  for (size_t s = 0; s < run.steps.size(); ++s) {
    std::vector<int64_t> labels;
    for (const int64_t id : by_hand.steps()[s].ids) labels.push_back(requests[size_t(id)].id);
    EXPECT_EQ(run.steps[s].ids, labels) << "step " << s << ": the requests that ran, by label";
    EXPECT_EQ(run.steps[s].start, by_hand.steps()[s].start) << "step " << s;
  }
  const engine::ServingSummary summary = engine::summarize(expected);
  EXPECT_EQ(run.summary.requests, summary.requests);
  EXPECT_EQ(run.summary.generated_tokens, summary.generated_tokens);
  EXPECT_EQ(run.summary.makespan, summary.makespan);
  EXPECT_EQ(run.summary.ttft.p99, summary.ttft.p99);
  EXPECT_EQ(run.summary.tpot.mean, summary.tpot.mean);
  EXPECT_EQ(run.summary.itl_max, summary.itl_max);
}

TEST(Ch07ServingRun, NoRequestsIsAnEmptyRun) {
  const engine::ServingRun run = engine::serve("empty", tiny_model(), tight_config(), {});
  EXPECT_TRUE(run.outputs.empty());
  EXPECT_EQ(run.stats.steps, 0);
  EXPECT_EQ(run.summary.requests, 0);
}

// Every line of @p text.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Ch07ServingRun, ProgressLinesComeEveryNStepsNamingTheRun) {
  SeededRng rng;
  const std::vector<Request> requests = labelled_requests(rng, 9);
  std::ostringstream text;
  const engine::ServingRun run =
      engine::serve("trace.jsonl", tiny_model(), tight_config(), requests, {.out = &text, .every_steps = 5});
  const std::vector<std::string> lines = lines_of(text.str());
  ASSERT_GE(run.stats.steps, 10) << "too few steps to see two lines";
  ASSERT_EQ(int64_t(lines.size()), run.stats.steps / 5) << text.str();
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string head = "    trace.jsonl: step " + std::to_string(5 * (i + 1)) + ", ";
    EXPECT_EQ(lines[i].substr(0, head.size()), head) << lines[i];
    EXPECT_NE(lines[i].find("/9 done, "), std::string::npos) << lines[i];
    EXPECT_NE(lines[i].find(" running, "), std::string::npos) << lines[i];
    EXPECT_NE(lines[i].find(" waiting"), std::string::npos) << lines[i];
  }

  std::ostringstream every_step, silent;
  const engine::ServingRun timed =
      engine::serve("timed", tiny_model(), tight_config(), requests, {.out = &every_step, .every_seconds = 1e-12});
  EXPECT_EQ(int64_t(lines_of(every_step.str()).size()), timed.stats.steps)
      << "a line after every step that comes at least 1e-12 s after the previous one";
  engine::serve("silent", tiny_model(), tight_config(), requests, {.out = &silent});
  EXPECT_EQ(silent.str(), "") << "neither steps nor seconds asked for: no lines";
}

TEST(Ch07ServingRun, ARequestTheEngineRefusesIsNamed) {
  std::vector<Request> requests(2);
  requests[0].prompt = {1, 2, 3};
  requests[1].prompt = {};  // refused: an empty prompt
  EXPECT_THROW(engine::serve("bad", tiny_model(), tight_config(), requests), std::invalid_argument);
}

}  // namespace
}  // namespace inferlab::testing
