// Chapter 12: speculative decoding in the engine. With either drafter, every greedy request's
// tokens equal the request run alone without speculation (generate_alone) — under any block
// size, budget, tiny pools that preempt, mixed batches of greedy and sampled requests, prefix
// caching and aborts — with the pool's invariants checked after every step (check_invariants:
// the tables, refcounts and hashes; a rejected guess's block hash registered would fail them) and
// the pool entirely free at the end. The counters say guesses were made and accepted (so the
// equality is not vacuous), and a draft model equal to the target has every guess accepted.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "runtime/engine/drafter.h"
#include "runtime/engine/engine.h"
#include "tests/07-continuous-batching/engine_fixture.h"
#include "tests/support/seeded.h"

namespace inferlab::testing {
namespace {

using engine::EngineConfig;
using engine::Request;
using engine::SpeculativeMethod;

const model::LlamaModel& target_model() {
  static const model::LlamaModel m(model::random_llama(model::parse_random_spec("random:tiny,seq_len=256").config, 7));
  return m;
}

// The target's matrices rounded to Q4_1: a cheaper model over the same vocabulary, as the real
// model's Q4_1 file drafts for its widened fp32 matrices.
const model::LlamaModel& draft_model() {
  static const model::LlamaModel m(model::convert_weights(
      model::random_llama(model::parse_random_spec("random:tiny,seq_len=256").config, 7), WeightFormat::q4_1));
  return m;
}

// Prompts that repeat a short pattern with noise, so that prompt lookup finds n-grams to copy.
Request repetitive_request(Rng& rng, int64_t id, int64_t vocab, bool sampled) {
  Request r = random_request(rng, id, vocab, 1, 1, 24, sampled);
  r.prompt.clear();
  std::vector<int32_t> pattern;
  for (int64_t i = rng.integer(2, 6); i > 0; --i) pattern.push_back(int32_t(rng.integer(0, vocab - 1)));
  for (int64_t i = rng.integer(8, 50); i > 0; --i) {
    r.prompt.push_back(pattern[size_t(i) % pattern.size()]);
    if (rng.integer(0, 9) == 0) r.prompt.back() = int32_t(rng.integer(0, vocab - 1));
  }
  return r;
}

EngineConfig speculative_config(SpeculativeMethod method, int64_t gamma, int64_t block_size, int64_t num_blocks,
                                int64_t budget, int64_t max_seqs) {
  EngineConfig c;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  c.max_num_batched_tokens = budget;
  c.chunk_size = std::min<int64_t>(budget, 16);
  c.max_num_seqs = max_seqs;
  c.max_seq_len = 128;
  c.clock = engine::ClockMode::simulated;
  // A pool this small admits without headroom, so that decodes (and their guesses) run it out and
  // preempt: recomputation mid-speculation is exercised on every seed.
  if (num_blocks < 32) c.headroom_blocks_per_seq = 0;
  c.speculative.method = method;
  c.speculative.num_speculative_tokens = gamma;
  c.speculative.ngram_min = 1;  // one-token matches too: a tiny random model's text gives many guesses
  if (method == SpeculativeMethod::draft) c.speculative.draft_model = &draft_model();
  return c;
}

std::vector<Request> mixed_requests(Rng& rng, int64_t count, double sampled_share) {
  std::vector<Request> requests;
  for (int64_t i = 0; i < count; ++i) {
    requests.push_back(repetitive_request(rng, i, target_model().config().vocab_size,
                                          rng.uniform(0.0f, 1.0f) < float(sampled_share)));
    requests.back().arrival = rng.uniform(0.0f, 0.03f);
  }
  return requests;
}

void expect_greedy_unchanged(const std::vector<Request>& requests,
                             const std::map<int64_t, engine::RequestOutput>& served, const std::string& where) {
  for (const Request& r : requests) {
    if (!r.sampling.greedy()) continue;
    const auto alone = engine::generate_alone(target_model(), r).tokens;
    EXPECT_EQ(served.at(r.id).tokens, alone) << where << ": request " << r.id << " changed by speculation";
  }
}

struct Case {
  int64_t gamma, block_size, num_blocks, budget, max_seqs;
};

const Case kCases[] = {{4, 16, 128, 256, 8}, {1, 1, 600, 9, 5}, {8, 4, 200, 40, 16}, {3, 7, 60, 64, 12},
                       {5, 4, 24, 48, 6} /* a pool this small preempts */};

std::string describe(SpeculativeMethod method, const Case& c) {
  return std::string(engine::to_string(method)) + " γ " + std::to_string(c.gamma) + ", block " +
         std::to_string(c.block_size) + ", " + std::to_string(c.num_blocks) + " blocks, budget " +
         std::to_string(c.budget) + ", " + std::to_string(c.max_seqs) + " seqs";
}

TEST(Ch12Engine, GreedyTokensAreUnchangedByPromptLookupUnderAnyScheduling) {
  SeededRng rng;
  const auto requests = mixed_requests(rng, 24, 0.3);
  int64_t preemptions = 0;
  for (const Case& c : kCases) {
    engine::EngineStats stats;
    const auto served = serve(target_model(), speculative_config(SpeculativeMethod::ngram, c.gamma, c.block_size,
                                                                 c.num_blocks, c.budget, c.max_seqs),
                              requests, &stats);
    expect_greedy_unchanged(requests, served, describe(SpeculativeMethod::ngram, c));
    EXPECT_GT(stats.spec_drafts, 0) << describe(SpeculativeMethod::ngram, c) << ": no guess was ever verified";
    EXPECT_GT(stats.spec_accepted_tokens, 0) << describe(SpeculativeMethod::ngram, c);
    EXPECT_LE(stats.spec_accepted_tokens, stats.spec_draft_tokens);
    preemptions += stats.preemptions;
  }
  EXPECT_GT(preemptions, 0) << "no case preempted: the small pool no longer exercises preemption mid-speculation";
}

TEST(Ch12Engine, GreedyTokensAreUnchangedByADraftModelUnderAnyScheduling) {
  SeededRng rng;
  const auto requests = mixed_requests(rng, 16, 0.3);
  for (const Case& c : kCases) {
    engine::EngineStats stats;
    const auto served = serve(target_model(), speculative_config(SpeculativeMethod::draft, c.gamma, c.block_size,
                                                                 c.num_blocks, c.budget, c.max_seqs),
                              requests, &stats);
    expect_greedy_unchanged(requests, served, describe(SpeculativeMethod::draft, c));
    EXPECT_GT(stats.spec_accepted_tokens, 0) << describe(SpeculativeMethod::draft, c);
    EXPECT_LT(stats.spec_accepted_tokens, stats.spec_draft_tokens)
        << describe(SpeculativeMethod::draft, c) << ": a Q4_1 draft never disagreeing is implausible";
  }
}

TEST(Ch12Engine, ADraftModelEqualToTheTargetHasEveryGreedyGuessAccepted) {
  SeededRng rng;
  std::vector<Request> requests;
  for (int64_t i = 0; i < 6; ++i) {
    requests.push_back(random_request(rng, i, target_model().config().vocab_size, 3, 30, 30));
    requests.back().sampling.max_new_tokens = 30;
  }
  EngineConfig c = speculative_config(SpeculativeMethod::draft, 4, 8, 200, 256, 8);
  c.speculative.draft_model = &target_model();
  engine::EngineStats stats;
  const auto served = serve(target_model(), c, requests, &stats);
  expect_greedy_unchanged(requests, served, "draft = target");
  EXPECT_GT(stats.spec_draft_tokens, 0);
  EXPECT_EQ(stats.spec_accepted_tokens, stats.spec_draft_tokens) << "the target rejected its own greedy guesses";
  // 30 tokens each: the first from the prompt's step, then 29 from steps of up to γ + 1 = 5.
  EXPECT_LE(stats.steps, 6 * (1 + 6) + 6) << "speculation with every guess accepted should take ~7 steps a request";
  ASSERT_EQ(stats.spec_accepted_per_position.size(), 4u);
  EXPECT_GE(stats.spec_accepted_per_position[0], stats.spec_accepted_per_position[3]);
}

TEST(Ch12Engine, SampledRequestsAreReproducibleAndFinish) {
  SeededRng rng;
  const auto requests = mixed_requests(rng, 10, 1.0);
  for (const SpeculativeMethod method : {SpeculativeMethod::ngram, SpeculativeMethod::draft}) {
    const EngineConfig c = speculative_config(method, 4, 4, 200, 64, 8);
    engine::EngineStats stats;
    const auto first = serve(target_model(), c, requests, &stats);
    const auto again = serve(target_model(), c, requests);
    for (const Request& r : requests) {
      EXPECT_EQ(first.at(r.id).tokens, again.at(r.id).tokens) << to_string(method) << ": request " << r.id;
      EXPECT_LE(int64_t(first.at(r.id).tokens.size()), r.sampling.max_new_tokens);
    }
    EXPECT_GT(stats.spec_draft_tokens, 0) << to_string(method);
  }
}

TEST(Ch12Engine, AbortsMidSpeculationLoseNothing) {
  SeededRng rng;
  const auto requests = mixed_requests(rng, 12, 0.5);
  for (const SpeculativeMethod method : {SpeculativeMethod::ngram, SpeculativeMethod::draft}) {
    EngineConfig c = speculative_config(method, 4, 4, 40, 64, 6);
    c.check_invariants = true;
    engine::Engine e(target_model(), c);
    for (const Request& r : requests) e.add_request(r);
    DeltaLog log;
    int64_t steps = 0, aborted = 0;
    while (true) {
      const engine::StepOutput out = e.step();
      log.add(out);
      if (!out) break;
      if (++steps % 3 == 0) {  // abort a running request between steps, while it speculates
        for (const auto& [id, s] : e.sequences())
          if (s.status == engine::SequenceStatus::running && !s.generated().empty()) {
            EXPECT_TRUE(e.abort(s.request_id));
            ++aborted;
            break;
          }
      }
    }
    const auto outputs = e.take_outputs();
    EXPECT_EQ(outputs.size(), requests.size()) << to_string(method);
    for (const auto& o : outputs) log.expect_matches(o);
    EXPECT_GT(aborted, 0);
    EXPECT_EQ(e.blocks().num_free_blocks(), c.num_blocks) << to_string(method) << ": blocks still held";
  }
}

// The draft model's state — K/V kept across steps, rolled back to the verified tokens, caught up
// on the new ones — must not change its guesses: each round's guesses equal those of a fresh
// drafter that sees the same tokens for the first time (batched with another sequence or alone).
TEST(Ch12Drafter, ADraftModelRolledBackGuessesAsAFreshOne) {
  SeededRng rng;
  engine::SpeculativeConfig config;
  config.method = SpeculativeMethod::draft;
  config.draft_model = &draft_model();
  const KvPaging paging{4, 200};
  const auto stateful = engine::make_drafter(config, target_model(), Backend::cpu, 4, 128, paging);
  const int64_t vocab = target_model().config().vocab_size;
  engine::SamplingParams greedy;
  uint64_t unused = 0;
  std::vector<std::vector<int32_t>> tokens = {random_tokens(rng, 9, vocab), random_tokens(rng, 4, vocab)};
  for (int round = 0; round < 12; ++round) {
    std::vector<engine::DraftRequest> requests;
    for (size_t s = 0; s < tokens.size(); ++s)
      requests.push_back({int64_t(s) + 10, tokens[s], rng.integer(1, 5), &greedy, &unused});
    const auto guessed = stateful->propose(requests);
    for (size_t s = 0; s < tokens.size(); ++s) {
      const auto fresh = engine::make_drafter(config, target_model(), Backend::cpu, 4, 128, paging);
      const auto alone = fresh->propose(std::span(requests).subspan(s, 1));
      ASSERT_EQ(guessed[s].tokens, alone[0].tokens) << "round " << round << ", sequence " << s;
      EXPECT_EQ(int64_t(guessed[s].tokens.size()), requests[s].num_tokens);
      // Verification accepts a random number of guesses, then the target adds a token of its own.
      const int64_t accepted = rng.integer(0, int64_t(guessed[s].tokens.size()));
      tokens[s].insert(tokens[s].end(), guessed[s].tokens.begin(), guessed[s].tokens.begin() + accepted);
      tokens[s].push_back(int32_t(rng.integer(0, vocab - 1)));
      stateful->rollback(int64_t(s) + 10, int64_t(tokens[s].size()) - 1);
    }
  }
  stateful->forget(10);  // a preempted sequence starts over: still the same guesses
  const engine::DraftRequest again{10, tokens[0], 3, &greedy, &unused};
  const auto fresh = engine::make_drafter(config, target_model(), Backend::cpu, 4, 128, paging);
  EXPECT_EQ(stateful->propose({&again, 1})[0].tokens, fresh->propose({&again, 1})[0].tokens);
}

TEST(Ch12Engine, BadSpeculativeSettingsAreRefused) {
  EngineConfig c = speculative_config(SpeculativeMethod::ngram, 0, 16, 64, 64, 4);
  expect_invalid([&] { engine::Engine e(target_model(), c); }, {"num_speculative_tokens"});
  c = speculative_config(SpeculativeMethod::draft, 4, 16, 64, 64, 4);
  c.speculative.draft_model = nullptr;
  expect_invalid([&] { engine::Engine e(target_model(), c); }, {"draft_model"});
  c = speculative_config(SpeculativeMethod::ngram, 4, 16, 64, 64, 4);
  c.policy = engine::BatchingPolicy::static_batch;
  c.max_seq_len = 64;
  expect_invalid([&] { engine::Engine e(target_model(), c); }, {"speculative", "continuous"});
  static const model::LlamaModel other(
      model::random_llama(model::parse_random_spec("random:tiny,vocab=80,seq_len=256").config, 3));
  c = speculative_config(SpeculativeMethod::draft, 4, 16, 64, 64, 4);
  c.speculative.draft_model = &other;
  expect_invalid([&] { engine::Engine e(target_model(), c); }, {"vocab_size", "80", "64"});
  EXPECT_EQ(engine::parse_speculative_method("ngram"), SpeculativeMethod::ngram);
  expect_invalid([] { engine::parse_speculative_method("medusa"); }, {"medusa", "ngram", "draft"});
}

}  // namespace
}  // namespace inferlab::testing
