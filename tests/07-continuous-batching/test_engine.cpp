// Chapter 07: the serving engine. Every batched run must give each greedy request exactly the
// tokens it gets alone on a contiguous cache, whatever the arrival order, chunk size, block size,
// budgets, preemption or prefix-cache hits — and whatever KV format (fp32, INT8, FP8), compared
// with the request alone in that format; every request leaves exactly once; the pool is free
// at the end. The model is a small random one (tiny preset) so that hundreds of requests run in
// seconds; tests/07-continuous-batching/test_model.cpp checks the model itself.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <set>

#include "runtime/engine/make_model_runner.h"
#include "runtime/engine/sampling.h"
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

EngineConfig config_with(int64_t block_size, int64_t num_blocks, int64_t budget, int64_t chunk, int64_t max_seqs) {
  EngineConfig c;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  c.max_num_batched_tokens = budget;
  c.chunk_size = chunk;
  c.max_num_seqs = max_seqs;
  c.max_seq_len = 128;
  c.clock = engine::ClockMode::simulated;
  return c;
}

TEST(Ch07Engine, GreedyTokensEqualRunningAloneUnderAnyScheduling) {
  SeededRng rng;
  const auto& model = tiny_model();
  std::vector<Request> requests;
  for (int64_t i = 0; i < 24; ++i) {
    requests.push_back(random_request(rng, i, model.config().vocab_size, 1, 60, 24));
    requests.back().arrival = rng.uniform(0.0f, 0.05f);
  }
  const auto reference = alone(model, requests);
  struct Case {
    int64_t block_size, num_blocks, budget, chunk, max_seqs;
  };
  for (const Case c : {Case{16, 64, 256, 256, 8}, Case{1, 400, 7, 3, 5}, Case{4, 300, 32, 5, 16},
                       Case{7, 60, 64, 64, 24}, Case{32, 9, 40, 16, 4}}) {
    const auto served = serve(model, config_with(c.block_size, c.num_blocks, c.budget, c.chunk, c.max_seqs), requests);
    expect_same_tokens(model, served, reference,
                       "block " + std::to_string(c.block_size) + ", " + std::to_string(c.num_blocks) +
                           " blocks, budget " + std::to_string(c.budget) + ", chunk " + std::to_string(c.chunk));
  }
}

TEST(Ch07Engine, ADifferenceIsReportedWithTheReferenceTopTwoMargin) {
  SeededRng rng;
  const auto& model = tiny_model();
  const Request r = random_request(rng, 3, model.config().vocab_size, 5, 9, 1);
  const auto reference = alone(model, {r});
  std::map<int64_t, engine::RequestOutput> served;
  served[3].prompt = r.prompt;
  served[3].tokens = reference.at(3);
  served[3].tokens[0] = (served[3].tokens[0] + 1) % int32_t(model.config().vocab_size);  // a wrong first token
  EXPECT_NONFATAL_FAILURE(expect_same_tokens(model, served, reference, "planted"),
                          "at generated token 0 (1 vs 1 tokens); the reference's top-2 logit margin there is");
  EXPECT_GT(top2_margin(model, r.prompt), 0.0);
}

TEST(Ch07Engine, ArrivalOrderDoesNotChangeTokens) {
  SeededRng rng;
  const auto& model = tiny_model();
  std::vector<Request> requests;
  for (int64_t i = 0; i < 16; ++i) requests.push_back(random_request(rng, i, model.config().vocab_size, 1, 40, 16));
  const auto reference = alone(model, requests);
  for (int trial = 0; trial < 3; ++trial) {
    std::shuffle(requests.begin(), requests.end(), rng.engine());
    for (size_t i = 0; i < requests.size(); ++i) requests[i].arrival = 0.001 * double(i);
    expect_same_tokens(model, serve(model, config_with(8, 48, 48, 12, 6), requests), reference,
                       "arrival order " + std::to_string(trial));
  }
}

TEST(Ch07Engine, SampledRequestsFollowTheirOwnSeed) {
  SeededRng rng;
  const auto& model = tiny_model();
  std::vector<Request> requests;
  for (int64_t i = 0; i < 12; ++i)
    requests.push_back(random_request(rng, i, model.config().vocab_size, 1, 30, 20, /*sampled=*/true));
  expect_same_tokens(model, serve(model, config_with(4, 80, 24, 6, 5), requests), alone(model, requests),
                     "top-p sampling");
}

TEST(Ch07Engine, TinyPoolPreemptsAndStillMatches) {
  SeededRng rng;
  const auto& model = tiny_model();
  std::vector<Request> requests;
  for (int64_t i = 0; i < 20; ++i) requests.push_back(random_request(rng, i, model.config().vocab_size, 20, 40, 40));
  engine::EngineStats stats;
  // 20 blocks of 4 = 80 tokens: two requests of up to 80 tokens cannot both grow. No headroom:
  // admit while a prompt fits, so decodes run out of blocks.
  EngineConfig c = config_with(4, 20, 64, 16, 8);
  c.headroom_blocks_per_seq = 0;
  const auto served = serve(model, c, requests, &stats);
  EXPECT_GT(stats.preemptions, 0) << "the pool was meant to run out";
  EXPECT_GT(stats.recomputed_tokens, 0);
  expect_same_tokens(model, served, alone(model, requests), "with preemption");
  int64_t preempted = 0;
  for (const auto& [id, out] : served) preempted += out.metrics.preemptions;
  EXPECT_EQ(preempted, stats.preemptions);
}

// The logprobs the API reports: log softmax of the raw logits, against a long double oracle, on
// odd sizes, large offsets (a naive exp overflows) and ties (the smaller id first).
TEST(Ch07Logprobs, TokenLogprobsAreTheLogSoftmax) {
  SeededRng rng;
  for (const int64_t n : {1, 7, 1000}) {
    std::vector<float> logits(static_cast<size_t>(n), 0.0f);
    for (float& x : logits) x = 90.0f + rng.normal(0.0f, 4.0f);
    if (n > 3) logits[2] = logits[1];  // a tie
    long double z = 0;
    const float max = *std::max_element(logits.begin(), logits.end());
    for (const float x : logits) z += std::exp((long double)(x - max));
    const int32_t token = int32_t(rng.integer(0, n - 1));
    const engine::SampledLogprobs lp = engine::token_logprobs(logits, token, 5);
    const auto oracle = [&](int32_t id) { return double((long double)(logits[size_t(id)] - max) - std::log(z)); };
    EXPECT_NEAR(lp.logprob, oracle(token), 1e-5) << "n " << n;
    ASSERT_EQ(lp.top.size(), size_t(std::min<int64_t>(5, n)));
    for (size_t i = 0; i < lp.top.size(); ++i) {
      EXPECT_NEAR(lp.top[i].logprob, oracle(lp.top[i].id), 1e-5);
      if (i > 0) {
        EXPECT_GE(lp.top[i - 1].logprob, lp.top[i].logprob);
        if (lp.top[i - 1].logprob == lp.top[i].logprob) {
          EXPECT_LT(lp.top[i - 1].id, lp.top[i].id);
        }
      }
    }
    EXPECT_EQ(lp.top[0].id, engine::greedy_token(logits)) << "the most likely first";
  }
  const std::vector<float> row = {0.0f, 1.0f};
  expect_invalid([&] { engine::token_logprobs(row, 2, 1); }, {"token 2"});
  expect_invalid([&] { engine::token_logprobs(row, 0, -1); }, {"top"});
  EXPECT_TRUE(engine::token_logprobs(row, 0, 0).top.empty());
}

// A request that asks for logprobs gets one entry per generated token in its deltas — greedy, so
// the token is the most likely — equal to the log softmax of the model's logits run alone; one
// that does not ask gets none.
TEST(Ch07Logprobs, DeltasCarryEachTokensLogprobs) {
  SeededRng rng;
  const auto& model = tiny_model();
  Request with = random_request(rng, 1, model.config().vocab_size, 9, 9, 6);
  with.sampling.logprobs = 3;
  with.sampling.max_new_tokens = 6;
  with.sampling.temperature = 0.0f;
  with.sampling.stop_ids.clear();
  Request without = random_request(rng, 2, model.config().vocab_size, 5, 5, 6);
  engine::Engine e(model, config_with(4, 32, 64, 64, 4));
  const int64_t id_with = e.add_request(with), id_without = e.add_request(without);
  std::vector<int32_t> tokens = with.prompt;
  int64_t checked = 0;
  while (const engine::StepOutput out = e.step()) {
    for (const engine::RequestDelta& d : out.deltas) {
      if (d.id == id_without) {
        EXPECT_TRUE(d.logprobs.empty());
      }
      if (d.id != id_with) continue;
      ASSERT_EQ(d.logprobs.size(), d.new_tokens.size());
      for (size_t j = 0; j < d.new_tokens.size(); ++j) {
        const Tensor<float> logits = logits_alone(model, tokens);
        const int64_t V = logits.dim(1);
        const std::span<const float> last(logits.data() + (logits.dim(0) - 1) * V, size_t(V));
        const engine::SampledLogprobs want = engine::token_logprobs(last, d.new_tokens[j], 3);
        EXPECT_NEAR(d.logprobs[j].logprob, want.logprob, 1e-5);
        ASSERT_EQ(d.logprobs[j].top.size(), 3u);
        EXPECT_EQ(d.logprobs[j].top[0].id, d.new_tokens[j]) << "greedy: the token is the most likely";
        EXPECT_FLOAT_EQ(d.logprobs[j].top[0].logprob, d.logprobs[j].logprob);
        EXPECT_LE(d.logprobs[j].logprob, 0.0f);
        tokens.push_back(d.new_tokens[j]);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 6);
  Request bad = with;
  bad.sampling.logprobs = engine::SamplingParams::kMaxLogprobs + 1;
  expect_invalid([&] { e.add_request(bad); }, {"logprobs"});
}

// Parallel sampling (n): the prompt prefilled once, then n choices that share its blocks. Each
// choice's tokens equal the same request run alone with that choice's seed (n = 1), so a fork
// changes no token; the pool holds the prompt's blocks once and copies the shared partial block
// at each choice's first write; the invariants hold after every step.
struct ChoiceRun {
  std::map<int32_t, std::vector<int32_t>> tokens;  // by choice
  std::map<int32_t, int64_t> finishes;             // by choice
};

ChoiceRun run_choices(engine::Engine& e, int64_t id, std::vector<int64_t>* free_blocks = nullptr,
                      const std::function<void(int64_t step)>& between = {}) {
  ChoiceRun run;
  for (int64_t step = 0;; ++step) {
    const engine::StepOutput out = e.step();  // an abort's delta may come with the step that finds the engine empty
    for (const engine::RequestDelta& d : out.deltas) {
      if (d.id != id) continue;
      auto& t = run.tokens[d.index];
      t.insert(t.end(), d.new_tokens.begin(), d.new_tokens.end());
      if (d.finish) ++run.finishes[d.index];
    }
    if (!out.more) break;
    if (free_blocks != nullptr) free_blocks->push_back(e.blocks().num_free_blocks());
    if (between) between(step);
  }
  return run;
}

TEST(Ch07ParallelSampling, EachChoiceEqualsItsSeedAloneAndThePromptIsShared) {
  SeededRng rng;
  const auto& model = tiny_model();
  Request r = random_request(rng, 1, model.config().vocab_size, 10, 10, 8);  // 2 full blocks of 4 and 2 tokens
  r.sampling.max_new_tokens = 8;
  r.sampling.temperature = 1.0f;
  r.sampling.stop_ids.clear();
  r.sampling.seed = 4242;
  r.sampling.n = 3;
  EngineConfig c = config_with(4, 32, 64, 64, 4);
  c.check_invariants = true;
  engine::Engine e(model, c);
  const int64_t free_at_start = e.blocks().num_free_blocks();
  std::vector<int64_t> free;
  const ChoiceRun run = run_choices(e, e.add_request(r), &free);
  ASSERT_EQ(run.tokens.size(), 3u);
  std::set<std::vector<int32_t>> distinct;
  for (int32_t i = 0; i < 3; ++i) {
    Request alone_r = r;
    alone_r.sampling.n = 1;
    alone_r.sampling.seed = engine::choice_seed(r.sampling.seed, i);
    EXPECT_EQ(run.tokens.at(i), engine::generate_alone(model, alone_r).tokens) << "choice " << i;
    EXPECT_EQ(run.finishes.at(i), 1) << "choice " << i << ": exactly one finish";
    distinct.insert(run.tokens.at(i));
  }
  EXPECT_EQ(distinct.size(), 3u) << "three seeds, three samples";
  // Step 0 prefills and forks: the 3 prompt blocks, held once. Step 1 writes token 11 of each
  // choice into the shared partial block: two copy it, the last owns it — 2 more blocks.
  ASSERT_GE(free.size(), 2u);
  EXPECT_EQ(free_at_start - free[0], 3);
  EXPECT_EQ(free_at_start - free[1], 5);
  EXPECT_EQ(e.blocks().num_free_blocks(), free_at_start) << "every block back after the choices finished";
}

TEST(Ch07ParallelSampling, GreedyChoicesAgreeAndPreemptionChangesNothing) {
  SeededRng rng;
  const auto& model = tiny_model();
  Request r = random_request(rng, 1, model.config().vocab_size, 9, 9, 30);
  r.sampling.max_new_tokens = 30;
  r.sampling.temperature = 0.0f;
  r.sampling.stop_ids.clear();
  r.sampling.n = 2;
  // 24 blocks of 4: two choices of up to 38 cached tokens (18 blocks, the prompt's 2 full ones
  // shared) and another request of up to 55 (14 blocks) do not all fit: the newest are preempted.
  Request other = random_request(rng, 2, model.config().vocab_size, 16, 16, 40);
  other.sampling.max_new_tokens = 40;
  other.sampling.temperature = 0.0f;
  other.sampling.stop_ids.clear();
  EngineConfig c = config_with(4, 24, 64, 64, 5);
  c.check_invariants = true;
  c.headroom_blocks_per_seq = 0;
  engine::Engine e(model, c);
  const int64_t id = e.add_request(r), other_id = e.add_request(other);
  std::vector<int32_t> other_tokens;
  ChoiceRun run;
  for (;;) {
    const engine::StepOutput out = e.step();
    for (const engine::RequestDelta& d : out.deltas) {
      auto& t = d.id == id ? run.tokens[d.index] : other_tokens;
      t.insert(t.end(), d.new_tokens.begin(), d.new_tokens.end());
      if (d.id == other_id) {
        EXPECT_EQ(d.index, 0);
      }
    }
    if (!out.more) break;
  }
  EXPECT_EQ(other_tokens, engine::generate_alone(model, other).tokens);
  const std::vector<int32_t> greedy = engine::generate_alone(model, [&] {
    Request one = r;
    one.sampling.n = 1;
    return one;
  }()).tokens;
  for (int32_t i = 0; i < 2; ++i) EXPECT_EQ(run.tokens.at(i), greedy) << "choice " << i;
  EXPECT_GT(e.stats().preemptions, 0) << "the pool was meant to run out";
}

TEST(Ch07ParallelSampling, AbortingAChoiceLeavesTheOthersAndTheRequestAbortsAll) {
  SeededRng rng;
  const auto& model = tiny_model();
  Request r = random_request(rng, 1, model.config().vocab_size, 6, 6, 10);
  r.sampling.max_new_tokens = 10;
  r.sampling.stop_ids.clear();
  r.sampling.n = 3;
  EngineConfig c = config_with(4, 32, 64, 64, 4);
  c.check_invariants = true;
  engine::Engine e(model, c);
  const int64_t id = e.add_request(r);
  const ChoiceRun run = run_choices(e, id, nullptr, [&](int64_t step) {
    if (step == 2) {
      EXPECT_TRUE(e.abort(id, 1));
    }
  });
  EXPECT_LT(run.tokens.at(1).size(), 10u) << "choice 1 was aborted";
  EXPECT_EQ(run.tokens.at(0).size(), 10u);
  EXPECT_EQ(run.tokens.at(2).size(), 10u);
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ(run.finishes.at(i), 1) << "choice " << i;
  engine::Engine all(model, c);
  const int64_t id2 = all.add_request(r);
  const ChoiceRun gone = run_choices(all, id2, nullptr, [&](int64_t step) {
    if (step == 1) {
      EXPECT_TRUE(all.abort(id2));
    }
  });
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ(gone.finishes.at(i), 1) << "choice " << i;
  EXPECT_FALSE(all.abort(id2)) << "nothing left to abort";
  // Refused: more choices than the batch holds, or a static batch.
  Request wide = r;
  wide.sampling.n = 5;
  expect_invalid([&] { all.add_request(wide); }, {"n", "max_num_seqs"});
  EngineConfig fixed = c;
  fixed.policy = engine::BatchingPolicy::static_batch;
  engine::Engine batch(model, fixed);
  expect_invalid([&] { batch.add_request(r); }, {"n", "continuous"});
}

// A server reads the deltas only: each finish delta carries the timings the whole output would,
// and with keep_outputs off the engine keeps no outputs at all.
TEST(Ch07Engine, FinishDeltasCarryTheTimingsAndOutputsAreOptional) {
  SeededRng rng;
  const auto& model = tiny_model();
  std::vector<Request> requests;
  for (int64_t i = 0; i < 6; ++i) requests.push_back(random_request(rng, i, model.config().vocab_size, 5, 30, 12));
  EngineConfig kept = config_with(8, 64, 64, 16, 4);
  EngineConfig dropped = kept;
  dropped.keep_outputs = false;
  engine::Engine a(model, kept), b(model, dropped);
  for (const Request& r : requests) {
    a.add_request(r);
    b.add_request(r);
  }
  std::map<int64_t, engine::RequestMetrics> from_deltas;
  for (;;) {
    const engine::StepOutput out = b.step();
    for (const engine::RequestDelta& d : out.deltas)
      if (d.finish) from_deltas[d.id] = d.metrics;
    if (!out.more) break;
  }
  while (a.step()) {
  }
  EXPECT_TRUE(b.take_outputs().empty()) << "keep_outputs off: nothing kept";
  const std::vector<engine::RequestOutput> outputs = a.take_outputs();
  ASSERT_EQ(outputs.size(), requests.size());
  for (const engine::RequestOutput& o : outputs) {
    ASSERT_TRUE(from_deltas.contains(o.id));
    const engine::RequestMetrics& m = from_deltas.at(o.id);
    EXPECT_EQ(m.arrival, o.metrics.arrival);
    EXPECT_EQ(m.first_scheduled, o.metrics.first_scheduled);
    EXPECT_EQ(m.finish, o.metrics.finish);
    EXPECT_EQ(m.token_times, o.metrics.token_times) << "request " << o.id;
  }
}

// vLLM's cache_salt: a request shares prefix blocks only with requests of the same salt, so one
// tenant cannot time another's prompt; the tokens are the same either way.
TEST(Ch07Engine, CacheSaltKeepsPrefixBlocksApart) {
  SeededRng rng;
  const auto& model = tiny_model();
  Request a = random_request(rng, 1, model.config().vocab_size, 32, 32, 5);  // 4 blocks of 8
  a.sampling.max_new_tokens = 3;
  a.cache_salt = "tenant-a";
  Request other = a, same = a, none = a;
  other.id = 2, other.arrival = 1.0, other.cache_salt = "tenant-b";
  same.id = 3, same.arrival = 2.0;
  none.id = 4, none.arrival = 3.0, none.cache_salt = "";
  const auto served = serve(model, config_with(8, 32, 64, 64, 4), {a, other, same, none});
  EXPECT_EQ(served.at(2).metrics.cached_prompt_tokens, 0) << "another salt must not hit tenant-a's blocks";
  EXPECT_EQ(served.at(3).metrics.cached_prompt_tokens, 24) << "the same salt shares them";
  EXPECT_EQ(served.at(4).metrics.cached_prompt_tokens, 0) << "no salt is a salt of its own";
  for (const int64_t id : {2, 3, 4}) EXPECT_EQ(served.at(id).tokens, served.at(1).tokens) << "request " << id;
}

TEST(Ch07Engine, PrefixCacheHitOnAWholePromptStillComputesItsLastToken) {
  SeededRng rng;
  const auto& model = tiny_model();
  Request a = random_request(rng, 1, model.config().vocab_size, 32, 32, 5);  // exactly 4 blocks of 8
  a.sampling.max_new_tokens = 5;
  Request b = a;
  b.id = 2;
  b.arrival = 1.0;  // after a has finished: its blocks are cached
  engine::EngineStats stats;
  const auto served = serve(model, config_with(8, 32, 64, 64, 4), {a, b}, &stats);
  EXPECT_EQ(served.at(2).metrics.cached_prompt_tokens, 24) << "a hit stops before the last token's block";
  EXPECT_EQ(served.at(2).metrics.computed_tokens, 8 + 4) << "the last prompt block, then 4 decodes";
  EXPECT_EQ(served.at(1).tokens, served.at(2).tokens);
  expect_same_tokens(model, served, alone(model, {a, b}), "prefix-cache hit");
}

TEST(Ch07Engine, PrefixCacheSharesPromptsBetweenRunningRequests) {
  SeededRng rng;
  const auto& model = tiny_model();
  const Request base = random_request(rng, 0, model.config().vocab_size, 48, 48, 1);
  std::vector<Request> requests;
  for (int64_t i = 0; i < 6; ++i) {
    Request r = random_request(rng, i, model.config().vocab_size, 1, 20, 12);
    r.prompt.insert(r.prompt.begin(), base.prompt.begin(), base.prompt.end());  // a shared system prompt
    r.arrival = 0.01 * double(i);
    requests.push_back(r);
  }
  engine::EngineStats stats;
  const auto served = serve(model, config_with(16, 64, 64, 64, 8), requests, &stats);
  EXPECT_GE(stats.prefix_hit_tokens, 5 * 48) << "every later request should reuse the 3 shared blocks";
  expect_same_tokens(model, served, alone(model, requests), "shared prefix");
}

TEST(Ch07Engine, PreemptedRequestRecomputesFromZero) {
  // Two long requests in a pool that holds one: the newer is preempted; its computed count must
  // restart (nano-vllm shipped the stale count: an IndexError), and its tokens must not change.
  SeededRng rng;
  const auto& model = tiny_model();
  Request a = random_request(rng, 1, model.config().vocab_size, 30, 30, 1);
  a.sampling.max_new_tokens = 34;
  Request b = random_request(rng, 2, model.config().vocab_size, 30, 30, 1);
  b.sampling.max_new_tokens = 34;
  b.arrival = 0.0;
  EngineConfig c = config_with(8, 12, 64, 64, 4);  // 96 tokens: not both at 64
  c.prefix_caching = false;
  engine::EngineStats stats;
  const auto served = serve(model, c, {a, b}, &stats);
  EXPECT_GE(served.at(2).metrics.preemptions, 1) << "the newer request is the victim";
  EXPECT_EQ(served.at(1).metrics.preemptions, 0) << "the older one keeps running";
  EXPECT_GT(served.at(2).metrics.computed_tokens, 30 + 34 - 1) << "its tokens were computed again";
  expect_same_tokens(model, served, alone(model, {a, b}), "after preemption");
}

TEST(Ch07Engine, AbortFreesBlocksAtAnyTime) {
  SeededRng rng;
  const auto& model = tiny_model();
  EngineConfig c = config_with(4, 64, 16, 4, 4);
  c.check_invariants = true;
  engine::Engine e(model, c);
  std::vector<Request> requests;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 8; ++i) {
    requests.push_back(random_request(rng, 100 + i, model.config().vocab_size, 10, 30, 20));  // labels, not ids
    requests.back().sampling.max_new_tokens = 20;
    ids.push_back(e.add_request(requests.back()));
  }
  DeltaLog deltas;
  deltas.add(e.step());
  deltas.add(e.step());  // some running with chunks in flight, some waiting
  const int64_t blocks_before = e.blocks().num_free_blocks();
  const auto running_blocks = [&](int64_t id) { return int64_t(e.sequences().at(id).block_table.blocks.size()); };
  const int64_t held = running_blocks(ids[0]);
  ASSERT_GT(held, 0) << "request 0 should be running after two steps";
  EXPECT_TRUE(e.abort(ids[0]));
  EXPECT_EQ(e.blocks().num_free_blocks(), blocks_before + held) << "abort frees the blocks now, not at the next step";
  EXPECT_TRUE(e.abort(ids[7]));
  EXPECT_FALSE(e.abort(ids[0])) << "an aborted request has left";
  EXPECT_FALSE(e.abort(99));
  EXPECT_EQ(e.outputs().size(), 2u) << "an aborted request's output is there at once";
  while (true) {
    const engine::StepOutput step = e.step();
    deltas.add(step);
    if (!step) break;
  }
  const auto outputs = e.take_outputs();
  EXPECT_EQ(outputs.size(), 8u);
  for (size_t i = 0; i < requests.size(); ++i) requests[i].id = ids[i];  // the reference by engine id
  const auto reference = alone(model, requests);
  for (const auto& o : outputs) {
    deltas.expect_matches(o);
    if (o.id == ids[0] || o.id == ids[7]) {
      EXPECT_EQ(o.reason, engine::FinishReason::aborted);
    } else {
      EXPECT_EQ(o.tokens, reference.at(o.id)) << "request " << o.id;
    }
  }
  EXPECT_EQ(e.blocks().num_free_blocks(), c.num_blocks);
}

TEST(Ch07Engine, StepDeltasStreamEachTokenOnceAndTheFinishOnce) {
  SeededRng rng;
  const auto& model = tiny_model();
  EngineConfig c = config_with(4, 24, 24, 5, 6);  // 96 tokens of KV for 6 running: every seed preempts (1–150 checked)
  c.check_invariants = true;
  c.headroom_blocks_per_seq = 0;  // preemptions too: a recomputed token must not be streamed again
  engine::Engine e(model, c);
  std::vector<Request> requests;
  for (int64_t i = 0; i < 16; ++i) {
    requests.push_back(random_request(rng, i, model.config().vocab_size, 5, 30, 24));
    EXPECT_EQ(e.add_request(requests.back()), i);
  }
  DeltaLog deltas;
  std::map<int64_t, int64_t> first_step;  // when each request's first token came
  for (int64_t step = 0;; ++step) {
    const engine::StepOutput out = e.step();
    for (const engine::RequestDelta& d : out.deltas) {
      EXPECT_LE(d.new_tokens.size(), 1u) << "one step samples at most one token per request";
      EXPECT_TRUE(d.finish || !d.new_tokens.empty()) << "a delta without tokens must carry a finish";
      first_step.emplace(d.id, step);
    }
    deltas.add(out);
    if (step == 3) {
      EXPECT_TRUE(e.abort(15));  // waiting or running: reported by the next step, once
      EXPECT_TRUE(e.abort(14));
    }
    if (!out) break;
  }
  EXPECT_GT(e.stats().preemptions, 0) << "the pool was meant to run out";
  const auto outputs = e.take_outputs();
  ASSERT_EQ(outputs.size(), requests.size());
  for (const auto& o : outputs) deltas.expect_matches(o);
  EXPECT_EQ(deltas.finishes.at(15), std::vector<engine::FinishReason>{engine::FinishReason::aborted});
  EXPECT_EQ(deltas.finishes.at(14), std::vector<engine::FinishReason>{engine::FinishReason::aborted});
  EXPECT_EQ(e.step().deltas.size(), 0u) << "an empty engine reports nothing more";
}

TEST(Ch07Engine, EveryStepPlanIsWellFormed) {
  // An oracle independent of check_step_plan(): cu_seqlens_q from 0, non-decreasing, summing to
  // the token count; each table covers its context; each new token's slot lies in its own
  // sequence's table at its position; no slot twice in a step; a context never shrinks while a
  // request runs; the requests that sample are those whose chunk reaches their last token.
  SeededRng rng;
  const auto& model = tiny_model();
  for (const auto& [block_size, num_blocks, budget, chunk] :
       std::vector<std::array<int64_t, 4>>{{4, 40, 24, 5}, {1, 200, 9, 3}, {16, 12, 64, 64}}) {
    SCOPED_TRACE("block " + std::to_string(block_size));
    EngineConfig c = config_with(block_size, num_blocks, budget, chunk, 6);
    c.headroom_blocks_per_seq = 0;
    c.check_invariants = true;
    engine::Engine e(model, c);
    for (int64_t i = 0; i < 20; ++i) e.add_request(random_request(rng, i, model.config().vocab_size, 1, 40, 20));
    int64_t steps = 0, tokens = 0;
    while (e.step()) {
      const model::StepPlan& p = e.last_plan();
      const int64_t n = p.num_seqs();
      if (n == 0) continue;
      ++steps;
      ASSERT_EQ(int64_t(p.cu_seqlens_q.size()), n + 1);
      ASSERT_EQ(p.cu_seqlens_q.front(), 0);
      ASSERT_EQ(p.cu_seqlens_q.back(), int64_t(p.token_ids.size()));
      ASSERT_EQ(p.slot_mapping.size(), p.token_ids.size());
      ASSERT_EQ(int64_t(p.block_tables.size()), n);
      std::set<int64_t> slots;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t q = p.cu_seqlens_q[size_t(i) + 1] - p.cu_seqlens_q[size_t(i)];
        ASSERT_GE(q, 1) << "a scheduled sequence runs at least one token";
        const auto& table = p.block_tables[size_t(i)];
        const int64_t context = p.context_lens[size_t(i)];
        ASSERT_GE(int64_t(table.size()) * block_size, context) << "sequence " << i << "'s table does not cover it";
        for (int64_t t = p.cu_seqlens_q[size_t(i)]; t < p.cu_seqlens_q[size_t(i) + 1]; ++t) {
          const int64_t position = context - q + (t - p.cu_seqlens_q[size_t(i)]);
          ASSERT_EQ(p.positions[size_t(t)], position);
          const int64_t slot = p.slot_mapping[size_t(t)];
          ASSERT_EQ(slot / block_size, table[size_t(position / block_size)]) << "slot outside its own block";
          ASSERT_EQ(slot % block_size, position % block_size);
          ASSERT_TRUE(slots.insert(slot).second) << "slot " << slot << " written twice in one step";
        }
      }
      for (const int64_t k : p.logits_indices) ASSERT_TRUE(k >= 0 && k < int64_t(p.token_ids.size()));
      tokens += int64_t(p.token_ids.size());
    }
    EXPECT_EQ(tokens, e.stats().computed_tokens) << "the plans' tokens are what the engine computed";
    EXPECT_EQ(steps, e.stats().steps);
  }
}

TEST(Ch07Engine, StaticBatchingWaitsForItsSlowestRequest) {
  SeededRng rng;
  const auto& model = tiny_model();
  std::vector<Request> requests;
  for (int64_t i = 0; i < 8; ++i) {
    requests.push_back(random_request(rng, i, model.config().vocab_size, 4, 8, 1));
    requests.back().sampling.max_new_tokens = i == 0 ? 60 : 4;  // one slow request per batch of 4
    if (i == 4) requests.back().sampling.max_new_tokens = 60;
  }
  EngineConfig c = config_with(16, 32, 128, 128, 4);
  c.policy = engine::BatchingPolicy::static_batch;
  c.record_steps = true;
  c.check_invariants = true;
  engine::Engine e(model, c);
  for (const auto& r : requests) e.add_request(r);
  e.run();
  const auto outputs = e.take_outputs();
  std::map<int64_t, engine::RequestOutput> by_id;
  for (const auto& o : outputs) by_id[o.id] = o;
  // max_seq_len 128 = 8 blocks reserved each: 4 requests per batch in 32 blocks; the second batch
  // starts only after request 0's 60 tokens.
  EXPECT_GE(by_id.at(5).metrics.first_scheduled, by_id.at(0).metrics.finish);
  for (const auto& step : e.steps()) EXPECT_LE(step.ids.size(), 4u);
  expect_same_tokens(model, by_id, alone(model, requests), "static batching");
}

TEST(Ch07Engine, ContinuousBatchingLetsRequestsJoinAtAnyStep) {
  SeededRng rng;
  const auto& model = tiny_model();
  std::vector<Request> requests;
  for (int64_t i = 0; i < 8; ++i) {
    requests.push_back(random_request(rng, i, model.config().vocab_size, 4, 8, 1));
    requests.back().sampling.max_new_tokens = (i == 0 || i == 4) ? 60 : 4;
  }
  EngineConfig c = config_with(16, 32, 128, 128, 4);
  c.record_steps = true;
  engine::Engine e(model, c);
  for (const auto& r : requests) e.add_request(r);
  e.run();
  std::map<int64_t, engine::RequestOutput> by_id;
  for (auto& o : e.take_outputs()) by_id[o.id] = o;
  EXPECT_LT(by_id.at(5).metrics.first_scheduled, by_id.at(0).metrics.finish)
      << "request 5 should start as soon as a short request leaves";
}

// The engine on a quantized KV pool (EngineConfig::kv_format: INT8 per-token K scales with fp32
// and fp16 scales, FP8 E4M3): a shared system prompt (prefix-cache hits) and a pool too small for
// every request at once (preemption, recompute), continuous batching with prompt chunks.
// serve() checks that every request finishes exactly once and that the pool is free at the end;
// each greedy request's tokens must equal the request run alone on a contiguous cache of the
// same format — each token's rows are quantized on their own, so a chunked, shared or
// recomputed prompt stores the same codes and scales. (That the format changes the logits at
// all, and by how much, is test_model.cpp's QuantizedKv tests.)
TEST(Ch07Engine, QuantizedKvCachesGiveTheTokensOfRunningAloneInTheSameFormat) {
  SeededRng rng;
  const auto& model = tiny_model();
  const Request system = random_request(rng, 0, model.config().vocab_size, 24, 24, 1);  // 3 blocks of 8
  std::vector<Request> requests;
  for (int64_t i = 0; i < 10; ++i) {
    Request r = random_request(rng, i, model.config().vocab_size, 1, 20, 1);
    r.sampling.max_new_tokens = 32;  // 6 running requests outgrow the pool together
    if (i % 2 == 0) r.prompt.insert(r.prompt.begin(), system.prompt.begin(), system.prompt.end());
    r.arrival = 0.002 * double(i);
    requests.push_back(r);
  }
  for (const KvFormat& format :
       {KvFormat::int8(), KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16), KvFormat::fp8()}) {
    SCOPED_TRACE(format.name());
    EngineConfig c = config_with(8, 20, 24, 7, 6);  // 160 tokens of KV for 6 running; chunks of 7
    c.headroom_blocks_per_seq = 0;                  // admit while a prompt fits: decodes run out of blocks
    c.kv_format = format;
    EXPECT_EQ(engine::Engine(model, c).runner().kv_format(), format) << "the runner's pool is not in the format";
    engine::EngineStats stats;
    const auto served = serve(model, c, requests, &stats);
    EXPECT_GT(stats.preemptions, 0) << "the pool was meant to run out";
    EXPECT_GT(stats.prefix_hit_tokens, 0) << "the system prompt's blocks were meant to be shared";
    expect_same_tokens(model, served, alone(model, requests, format), "kv_format " + format.name(), format);
  }
}

TEST(Ch07Engine, KvFormatIsValidatedNamingIt) {
  const auto& model = tiny_model();
  EngineConfig c = config_with(4, 16, 32, 8, 4);
  EXPECT_EQ(c.kv_format, KvFormat::fp32()) << "the default KV format is fp32";
  EXPECT_EQ(engine::Engine(model, c).runner().kv_format(), KvFormat::fp32());
  // INT8 with per-channel K scales: calibrated on a whole prompt, which a chunked forward over a
  // shared paged pool never sees (model::check_kv_format()).
  for (const KvFormat format :
       {KvFormat::int8(KeyScaling::per_channel), KvFormat::int8(KeyScaling::per_channel, ScaleDtype::fp16)}) {
    c.kv_format = format;
    expect_invalid([&] { c.validate(); }, {"kv_format", format.name()});
    expect_invalid([&] { engine::Engine e(model, c); }, {"kv_format", format.name()});
    expect_invalid([&] { engine::make_model_runner(model, Backend::cpu, 4, 32, {4, 16}, format); },
                   {"kv_format", format.name()});
    Request r;
    r.prompt = {1, 2, 3};
    expect_invalid([&] { engine::generate_alone(model, r, format); }, {"kv_format", format.name()});
  }
  // The device runners keep an fp32 pool: any other format is refused there, before any upload
  // (sim is in every build; cuda is refused the same way before its availability is asked).
  for (const KvFormat format : {KvFormat::fp16(), KvFormat::int8(), KvFormat::fp8()}) {
    c.kv_format = format;
    c.backend = Backend::sim;
    EXPECT_NO_THROW(c.validate()) << format.name() << ": the backend's limit is the model runner's to name";
    expect_invalid([&] { engine::Engine e(model, c); }, {"kv_format", format.name(), "sim"});
    expect_invalid([&] { engine::make_model_runner(model, Backend::cuda, 4, 32, {4, 16}, format); },
                   {"kv_format", format.name(), "cuda"});
    c.backend = Backend::cpu;
    EXPECT_EQ(engine::Engine(model, c).runner().kv_format(), format) << "the cpu runner takes " << format.name();
  }
}

TEST(Ch07Engine, BadRequestsAreRefusedWithTheirReason) {
  const auto& model = tiny_model();
  engine::Engine e(model, config_with(4, 16, 32, 8, 4));
  Request ok;
  ok.id = 1;
  ok.prompt = {1, 2, 3};
  EXPECT_EQ(e.add_request(ok), 0);
  const auto refused = [&](Request r, const std::string& needle) {
    try {
      e.add_request(r);
      ADD_FAILURE() << "accepted a request that should be refused for " << needle;
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
  };
  Request r = ok;
  r.id = 1;  // a label may repeat: the engine does not read it
  EXPECT_EQ(e.add_request(r), 1) << "the engine assigns ids 0, 1, …";
  r.prompt = {};
  refused(r, "prompt.size()");
  r.prompt = {1, 64};
  refused(r, "prompt[1]");
  r.prompt = {1};
  r.sampling.max_new_tokens = 0;
  refused(r, "max_new_tokens");
  r.sampling.max_new_tokens = 100;  // 101 tokens > 16 blocks × 4 = 64
  refused(r, "blocks needed");
  r.sampling.max_new_tokens = 200;
  refused(r, "max_seq_len");
  r.sampling.max_new_tokens = 4;
  r.sampling.temperature = 1.0f;
  r.sampling.top_p = 0.0f;
  refused(r, "top_p");
  r.sampling.top_p = 1.0f;
  EXPECT_EQ(e.add_request(r), 2) << "a refused request uses no id";
}

}  // namespace
}  // namespace inferlab::testing

namespace inferlab::testing {
namespace {

// 10 000 requests with Poisson arrivals, random lengths, random aborts and a pool far too small
// for them all: every request leaves exactly once (finished or aborted), the block manager's
// invariants hold after every step, the pool is entirely free at the end, and every finished
// request's tokens equal the same request run alone.
TEST(Ch07Engine, StressTenThousandRequestsWithAbortsAndATinyPool) {
  SeededRng rng;
  const auto& model = tiny_model();
  constexpr int64_t kRequests = 10000;
  EngineConfig c = config_with(4, 48, 32, 8, 12);  // 192 tokens of KV for up to 12 sequences
  c.check_invariants = true;
  c.headroom_blocks_per_seq = 0;  // admit while a prompt fits: the pool runs out, preemption follows
  engine::Engine e(model, c);
  std::vector<Request> requests;
  double t = 0.0;
  for (int64_t i = 0; i < kRequests; ++i) {
    Request r = random_request(rng, i, model.config().vocab_size, 1, 24, 12, /*sampled=*/i % 5 == 0);
    t += -std::log(1.0 - rng.uniform(0.0f, 0.999f)) * 0.0015;  // Poisson, ~670 requests per simulated second
    r.arrival = t;
    requests.push_back(r);
    ASSERT_EQ(e.add_request(r), i) << "the engine's ids are 0, 1, … in the order requests are added";
  }
  std::set<int64_t> aborted;
  int64_t steps = 0;
  DeltaLog deltas;
  while (true) {
    const engine::StepOutput step = e.step();
    deltas.add(step);
    if (!step) break;
    if (++steps % 7 == 0) {  // abort a random request now and then: pending, waiting or running
      const int64_t id = rng.integer(0, kRequests - 1);
      if (e.abort(id)) aborted.insert(id);
    }
  }
  EXPECT_GT(e.stats().preemptions, 0) << "the pool was meant to run out";
  EXPECT_EQ(e.blocks().num_free_blocks(), c.num_blocks);
  const auto outputs = e.take_outputs();
  ASSERT_EQ(int64_t(outputs.size()), kRequests);
  std::set<int64_t> seen;
  int64_t checked = 0;
  for (const auto& o : outputs) {
    ASSERT_TRUE(seen.insert(o.id).second) << "request " << o.id << " left twice";
    deltas.expect_matches(o);
    const Request& r = requests[size_t(o.id)];
    if (aborted.contains(o.id)) {
      EXPECT_EQ(o.reason, engine::FinishReason::aborted) << "request " << o.id;
      continue;
    }
    ASSERT_NE(o.reason, engine::FinishReason::aborted) << "request " << o.id << " was never aborted";
    ASSERT_EQ(o.tokens, engine::generate_alone(model, r).tokens) << "request " << o.id << " differs from running alone";
    ++checked;
  }
  EXPECT_GT(checked, kRequests / 2);
}

}  // namespace
}  // namespace inferlab::testing
