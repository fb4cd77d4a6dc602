// Chapter 12's pure functions, tested: prompt lookup (engine::propose_ngram) against the
// contract's hand cases and a brute-force reference; greedy verification (verify_greedy) against
// the target's own greedy continuation, one step and a whole generation with a toy target model;
// the rejection sampler (verify_rejection) by the distribution test of distribution_check.h;
// sampling_distribution() against sample_top_p() and sample_distribution()'s inverse CDF; the
// expected tokens per step; BlockManager::truncate, the rollback (the blocks freed last to first,
// the hashes of blocks no longer full dropped, registered blocks refused, the pool's invariants,
// no prefix-cache hit on a block filled by rejected guesses). Odd shapes and fresh random data
// (the seed is printed on failure; INFERLAB_SEED replays it); every error named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/engine/request.h"
#include "runtime/engine/sampling.h"
#include "runtime/engine/speculative.h"
#include "runtime/paged/block_manager.h"
#include "tests/12-speculative-decoding/distribution_check.h"
#include "tests/12-speculative-decoding/student_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

namespace ch12 = testing::ch12;
using engine::expected_tokens_per_step;
using engine::propose_ngram;
using engine::sample_distribution;
using engine::sampling_distribution;
using engine::verify_greedy;
using engine::verify_rejection;
using engine::Verification;

// The engine's functions through the checks that grade the students: answers in this process.
ch12::Answers<std::vector<int32_t>> engine_ngrams(std::span<const ch12::NgramCase> cases) {
  return ch12::answer_each<std::vector<int32_t>>(cases, [](const ch12::NgramCase& c) {
    return propose_ngram(c.tokens, c.num_tokens, c.max_ngram, c.min_ngram);
  });
}

ch12::Answers<std::vector<int32_t>> engine_distribution(std::span<const ch12::DistributionJob> jobs) {
  return ch12::answer_each<std::vector<int32_t>>(jobs, [](const ch12::DistributionJob& job) {
    const int64_t gamma = job.target->gamma();
    std::vector<int32_t> out;
    for (int64_t n = 0; n < job.trials.count; ++n) {
      uint64_t state = job.trials.states[size_t(n)];
      const Verification v = verify_rejection(
          job.target->p, job.target->q,
          std::span<const int32_t>(job.trials.drafts.data() + n * gamma, size_t(gamma)), state);
      out.push_back(int32_t(v.accepted));
      out.push_back(int32_t(v.tokens.size()));
      out.insert(out.end(), v.tokens.begin(), v.tokens.end());
    }
    return out;
  });
}

// ---- propose_ngram ----

// The contract, by brute force: every (n, j) pair, the largest n, then the largest j.
std::vector<int32_t> brute_force_ngram(const std::vector<int32_t>& tokens, int64_t num_tokens, int64_t max_ngram,
                                       int64_t min_ngram) {
  const int64_t size = int64_t(tokens.size());
  int64_t best_n = 0, best_j = -1;
  for (int64_t n = min_ngram; n <= max_ngram && n < size; ++n)
    for (int64_t j = 0; j + n < size; ++j) {
      bool same = true;
      for (int64_t i = 0; i < n; ++i) same = same && tokens[size_t(j + i)] == tokens[size_t(size - n + i)];
      if (same && (n > best_n || (n == best_n && j > best_j))) best_n = n, best_j = j;
    }
  std::vector<int32_t> guesses;
  if (best_j < 0) return guesses;
  for (int64_t t = best_j + best_n; t < size && int64_t(guesses.size()) < num_tokens; ++t)
    guesses.push_back(tokens[size_t(t)]);
  return guesses;
}

TEST(ProposeNgram, TheContractsHandCases) {
  EXPECT_TRUE(ch12::ngrams_match(engine_ngrams, ch12::hand_ngram_questions()));
}

TEST(ProposeNgram, RandomSequencesEqualABruteForceReference) {
  testing::SeededRng rng;
  for (const ch12::NgramQuestion& q : ch12::random_ngram_questions(rng, 5000)) {
    const ch12::NgramCase& c = q.input;
    ASSERT_EQ(propose_ngram(c.tokens, c.num_tokens, c.max_ngram, c.min_ngram),
              brute_force_ngram(c.tokens, c.num_tokens, c.max_ngram, c.min_ngram))
        << ch12::describe(c);
  }
}

TEST(ProposeNgram, AtMostNumTokensAtLeastOneWhenAMatchExists) {
  testing::SeededRng rng;
  for (const ch12::NgramQuestion& q : ch12::random_ngram_questions(rng, 2000)) {
    const ch12::NgramCase& c = q.input;
    const std::vector<int32_t> guesses = propose_ngram(c.tokens, c.num_tokens, c.max_ngram, c.min_ngram);
    ASSERT_LE(int64_t(guesses.size()), c.num_tokens) << ch12::describe(c);
    // A match of min_ngram tokens anywhere earlier means at least one guess.
    bool match = false;
    const int64_t size = int64_t(c.tokens.size()), n = c.min_ngram;
    for (int64_t j = 0; n < size && j + n < size; ++j)
      match = match || std::equal(c.tokens.end() - n, c.tokens.end(), c.tokens.begin() + j);
    ASSERT_EQ(!guesses.empty(), match && c.num_tokens > 0) << ch12::describe(c);
  }
}

TEST(ProposeNgram, BadArgumentsAreNamed) {
  const std::vector<int32_t> tokens = {1, 2, 1};
  const auto message = [&](int64_t num, int64_t max_n, int64_t min_n) {
    try {
      propose_ngram(tokens, num, max_n, min_n);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(-1, 3, 1).find("num_tokens = -1"), std::string::npos) << message(-1, 3, 1);
  EXPECT_NE(message(2, 3, 0).find("min_ngram = 0"), std::string::npos) << message(2, 3, 0);
  EXPECT_NE(message(2, 1, 2).find("max_ngram = 1"), std::string::npos) << message(2, 1, 2);
}

// ---- verify_greedy ----

// Random logits of `rows` rows of `vocab`, with ties now and then (the first maximum wins).
std::vector<float> random_logits(Rng& rng, int64_t rows, int64_t vocab) {
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  for (float& x : logits) x = rng.integer(0, 5) == 0 ? float(rng.integer(-2, 2)) : rng.normal(0.0f, 3.0f);
  return logits;
}

int32_t first_max(std::span<const float> row) {
  return int32_t(std::max_element(row.begin(), row.end()) - row.begin());
}

TEST(VerifyGreedy, EqualsTheTargetsGreedyContinuation) {
  testing::SeededRng rng;
  for (const int64_t vocab : {1, 2, 7, 33, 257})
    for (int trial = 0; trial < 200; ++trial) {
      const int64_t gamma = rng.integer(0, 6);
      const std::vector<float> logits = random_logits(rng, gamma + 1, vocab);
      // The guesses agree with the target's argmax for a random prefix, then anything.
      const int64_t agree = rng.integer(0, gamma);
      std::vector<int32_t> draft;
      for (int64_t i = 0; i < gamma; ++i)
        draft.push_back(i < agree ? first_max(std::span(logits).subspan(size_t(i * vocab), size_t(vocab)))
                                  : int32_t(rng.integer(0, vocab - 1)));
      const Verification v = verify_greedy(logits, vocab, draft);
      std::vector<int32_t> expected;
      for (int64_t i = 0; i <= gamma; ++i) {
        const int32_t best = first_max(std::span(logits).subspan(size_t(i * vocab), size_t(vocab)));
        expected.push_back(best);
        if (i == gamma || draft[size_t(i)] != best) break;
      }
      ASSERT_EQ(v.tokens, expected) << "vocab " << vocab << ", draft " << ch12::show_list(draft);
      ASSERT_EQ(v.accepted, int64_t(expected.size()) - 1);
      ASSERT_GE(v.accepted, std::min(agree, gamma));
    }
}

// A toy target model: deterministic logits for any context (a hash of its tokens), so greedy
// decoding has a definite answer that speculation must reproduce.
std::vector<float> toy_logits(std::span<const int32_t> context, int64_t vocab, uint64_t salt) {
  uint64_t h = salt;
  for (const int32_t t : context.last(std::min<size_t>(context.size(), 3))) h = (h ^ uint64_t(t)) * 0x100000001B3ull;
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& x : logits) x = float(engine::next_uniform(h));
  return logits;
}

TEST(VerifyGreedy, SpeculativeGenerationIsTokenForTokenPlainGreedy) {
  // A whole generation: plain greedy decoding of the toy model, then the same with prompt-lookup
  // guesses (and random ones) verified by verify_greedy — the same tokens, in fewer steps when the
  // guesses are good (the toy model's context of 3 tokens makes its output repeat).
  testing::SeededRng rng;
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t vocab = rng.integer(3, 12), gamma = rng.integer(1, 6), length = 60;
    const uint64_t salt = rng.engine()();
    std::vector<int32_t> prompt;
    for (int64_t t = 0, n = rng.integer(1, 8); t < n; ++t) prompt.push_back(int32_t(rng.integer(0, vocab - 1)));
    std::vector<int32_t> plain = prompt;
    while (int64_t(plain.size()) < int64_t(prompt.size()) + length) plain.push_back(first_max(toy_logits(plain, vocab, salt)));
    for (const bool lookup : {true, false}) {
      std::vector<int32_t> sequence = prompt;
      int64_t steps = 0;
      while (int64_t(sequence.size()) < int64_t(prompt.size()) + length) {
        std::vector<int32_t> draft = lookup ? propose_ngram(sequence, gamma, 3, 1) : std::vector<int32_t>{};
        if (!lookup)
          for (int64_t i = 0; i < gamma; ++i) draft.push_back(int32_t(rng.integer(0, vocab - 1)));
        std::vector<float> rows;  // the target's rows for the context, then after each guess
        std::vector<int32_t> context = sequence;
        for (size_t i = 0; i <= draft.size(); ++i) {
          const std::vector<float> row = toy_logits(context, vocab, salt);
          rows.insert(rows.end(), row.begin(), row.end());
          if (i < draft.size()) context.push_back(draft[i]);
        }
        const Verification v = verify_greedy(rows, vocab, draft);
        sequence.insert(sequence.end(), v.tokens.begin(), v.tokens.end());
        ++steps;
      }
      sequence.resize(plain.size());
      ASSERT_EQ(sequence, plain) << (lookup ? "prompt lookup" : "random guesses") << ", vocab " << vocab << ", γ " << gamma;
      if (lookup) EXPECT_LE(steps, length);
    }
  }
}

TEST(VerifyGreedy, BadSizesIdsAndNaNAreRefused) {
  const std::vector<float> logits(12, 0.5f);
  const std::vector<int32_t> two = {1, 2};
  EXPECT_THROW(verify_greedy(logits, 0, {}), std::invalid_argument);
  EXPECT_THROW(verify_greedy(logits, 5, two), std::invalid_argument);  // 12 ≠ 3 · 5
  EXPECT_THROW(verify_greedy(std::vector<float>(9), 4, two), std::invalid_argument);
  EXPECT_NO_THROW(verify_greedy(logits, 4, two));
  EXPECT_THROW(verify_greedy(logits, 4, std::vector<int32_t>{0, 4}), std::invalid_argument);
  EXPECT_THROW(verify_greedy(logits, 4, std::vector<int32_t>{-1, 0}), std::invalid_argument);
  std::vector<float> nan = logits;
  nan[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(verify_greedy(nan, 4, std::vector<int32_t>{0, 0}), std::invalid_argument);  // row 1 is read
  // Every guess and every row is checked, not only those verification reaches: a guess after a
  // rejected one, and a row past it, are still the caller's mistake.
  std::vector<float> rows(12, 0.0f);
  rows[1] = 1.0f;  // row 0's argmax is 1: the guess 0 is rejected at once
  EXPECT_THROW(verify_greedy(rows, 4, std::vector<int32_t>{0, 4}), std::invalid_argument);
  rows[9] = std::numeric_limits<float>::quiet_NaN();  // row 2, never reached
  EXPECT_THROW(verify_greedy(rows, 4, std::vector<int32_t>{0, 1}), std::invalid_argument);
  try {
    verify_greedy(logits, 5, two);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("target_logits.size() = 12"), std::string::npos) << e.what();
  }
}

// ---- verify_rejection ----

TEST(ChiSquare, PValuesOfTheDistributionTestAreRight) {
  // The regularized upper gamma behind the distribution test, against closed forms: 2 degrees of
  // freedom give exp(−x/2), 1 gives erfc(√(x/2)), 4 give (1 + x/2)·exp(−x/2) — into the tails the
  // test decides in (1e-6 and far below) — and two tabulated quantiles.
  for (const double x : {0.01, 0.5, 1.0, 3.0, 7.5, 20.0, 27.6, 40.0, 80.0, 200.0}) {
    EXPECT_NEAR(ch12::chi_square_p_value(x, 2) / std::exp(-x / 2.0), 1.0, 1e-10) << x;
    EXPECT_NEAR(ch12::chi_square_p_value(x, 1) / std::erfc(std::sqrt(x / 2.0)), 1.0, 1e-10) << x;
    EXPECT_NEAR(ch12::chi_square_p_value(x, 4) / ((1.0 + x / 2.0) * std::exp(-x / 2.0)), 1.0, 1e-10) << x;
  }
  EXPECT_NEAR(ch12::chi_square_p_value(11.0705, 5), 0.05, 1e-5);  // χ²(5) at 95%
  EXPECT_NEAR(ch12::chi_square_p_value(18.4753, 7), 0.01, 1e-5);  // χ²(7) at 99%
  EXPECT_EQ(ch12::chi_square_p_value(0.0, 3), 1.0);
}

TEST(VerifyRejection, TokensFollowTheTargetsDistribution) {
  testing::SeededRng rng;
  EXPECT_TRUE(ch12::distribution_matches(engine_distribution, rng, 30000, "engine::verify_rejection"));
}

TEST(VerifyRejection, TheContractsHandCases) {
  // The hand cases of the exercise's check, worked out from the contract's draws.
  const auto run = [](std::span<const ch12::RejectionCase> cases) {
    return ch12::answer_each<ch12::RejectionAnswer>(cases, ch12::engine_rejection);
  };
  EXPECT_TRUE(ch12::rejections_match(run, ch12::hand_rejection_questions()));
}

TEST(VerifyRejection, TheSameStateGivesTheSameTokensAndOneDrawPerDecision) {
  testing::SeededRng rng;
  for (const ch12::RejectionQuestion& q : ch12::random_rejection_questions(rng, 2000)) {
    const ch12::RejectionAnswer a = ch12::engine_rejection(q.input), b = ch12::engine_rejection(q.input);
    ASSERT_EQ(a, b) << ch12::describe(q.input);
    // One uniform per guess checked, plus one for the replacement or the bonus.
    uint64_t state = q.input.state;
    for (int64_t i = 0; i < int64_t(a.tokens.size()) + (a.accepted < int64_t(q.input.draft.size()) ? 1 : 0); ++i)
      engine::next_uniform(state);
    ASSERT_EQ(a.state, state) << ch12::describe(q.input);
    ASSERT_EQ(a.accepted, int64_t(a.tokens.size()) - 1);
    for (int64_t i = 0; i < a.accepted; ++i) ASSERT_EQ(a.tokens[size_t(i)], q.input.draft[size_t(i)]);
    for (const int32_t t : a.tokens) ASSERT_GT(q.input.p[0].size(), size_t(t));
    // Never a token its target row excludes.
    ASSERT_GT(q.input.p[size_t(a.tokens.size() - 1)][size_t(a.tokens.back())], 0.0) << ch12::describe(q.input);
  }
}

TEST(VerifyRejection, BadShapesAndGuessesAreRefused) {
  uint64_t state = 1;
  using Rows = std::vector<std::vector<double>>;
  const Rows p2 = {{0.5, 0.5}, {0.5, 0.5}};
  const std::vector<int32_t> one = {0};
  EXPECT_NO_THROW(verify_rejection(p2, Rows{{0.5, 0.5}}, one, state));
  EXPECT_NO_THROW(verify_rejection(p2, Rows{{}}, one, state));
  EXPECT_THROW(verify_rejection(Rows{{0.5, 0.5}}, Rows{{0.5, 0.5}}, one, state), std::invalid_argument);  // p rows
  EXPECT_THROW(verify_rejection(p2, Rows{}, one, state), std::invalid_argument);                          // q rows
  EXPECT_THROW(verify_rejection(Rows{{0.5, 0.5}, {1.0}}, Rows{{0.5, 0.5}}, one, state), std::invalid_argument);
  EXPECT_THROW(verify_rejection(p2, Rows{{0.2, 0.3, 0.5}}, one, state), std::invalid_argument);  // q's size
  EXPECT_THROW(verify_rejection(p2, Rows{{0.0, 1.0}}, one, state), std::invalid_argument);       // q(d) = 0
  EXPECT_THROW(verify_rejection(p2, Rows{{0.5, 0.5}}, std::vector<int32_t>{2}, state), std::invalid_argument);
  EXPECT_THROW(verify_rejection(p2, Rows{{0.5, 0.5}}, std::vector<int32_t>{-1}, state), std::invalid_argument);
  EXPECT_THROW(verify_rejection(Rows{{}}, Rows{}, {}, state), std::invalid_argument);  // an empty vocabulary
  try {
    verify_rejection(p2, Rows{{0.0, 1.0}}, one, state);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("q[0][draft]"), std::string::npos) << e.what();
  }
}

// ---- sampling_distribution and sample_distribution ----

TEST(SamplingDistribution, IsWhatSampleTopPDrawsFrom) {
  // For random rows, temperatures and top_p: the distribution sums to 1; every token sample_top_p
  // returns has positive mass; and the token for u is the first, in the nucleus order (decreasing
  // probability, ties by id), whose cumulative mass exceeds u (u within 1e-9 of a boundary skipped).
  testing::SeededRng rng;
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t vocab = rng.integer(1, 70);
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& x : logits) x = rng.integer(0, 4) == 0 ? float(rng.integer(-1, 1)) : rng.normal(0.0f, 2.0f);
    engine::SamplingParams params;
    params.temperature = float(rng.integer(1, 20)) / 10.0f;
    params.top_p = rng.integer(0, 3) == 0 ? 1.0f : float(rng.integer(1, 100)) / 100.0f;
    const std::vector<double> p = sampling_distribution(logits, params);
    ASSERT_EQ(p.size(), size_t(vocab));
    ASSERT_NEAR(std::accumulate(p.begin(), p.end(), 0.0), 1.0, 1e-12);
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
    for (int k = 0; k < 50; ++k) {
      const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng.engine());
      const int32_t token = engine::sample_top_p(logits, params.temperature, params.top_p, u);
      ASSERT_GT(p[size_t(token)], 0.0) << "vocab " << vocab << ", T " << params.temperature << ", top_p " << params.top_p;
      double cumulative = 0.0;
      bool near_boundary = false;
      int32_t expected = -1;
      for (const int32_t t : order) {
        if (p[size_t(t)] == 0.0) break;
        cumulative += p[size_t(t)];
        near_boundary = near_boundary || std::fabs(cumulative - u) < 1e-9;
        if (expected < 0 && cumulative > u) expected = t;
      }
      if (expected < 0)  // rounding left u above every cumulative sum: the last token with mass
        for (const int32_t t : order)
          if (p[size_t(t)] > 0.0) expected = t;
      if (near_boundary) continue;
      ASSERT_EQ(token, expected) << "u " << u << ", vocab " << vocab << ", T " << params.temperature << ", top_p "
                                 << params.top_p;
    }
  }
}

TEST(SamplingDistribution, GreedyParamsAreOneHotAtTheGreedyToken) {
  testing::SeededRng rng;
  for (const int64_t vocab : {1, 5, 64, 129}) {
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& x : logits) x = float(rng.integer(-3, 3));  // many ties: the first maximum
    const std::vector<double> p = sampling_distribution(logits, engine::SamplingParams{});
    const int32_t best = engine::greedy_token(logits);
    for (int64_t t = 0; t < vocab; ++t) ASSERT_EQ(p[size_t(t)], t == best ? 1.0 : 0.0) << "token " << t;
  }
}

TEST(SamplingDistribution, TinyTopPKeepsOneTokenAndErrorsAreNamed) {
  engine::SamplingParams params;
  params.temperature = 0.7f;
  params.top_p = 1e-6f;
  const std::vector<double> p = sampling_distribution(std::vector<float>{0.1f, 2.0f, 2.0f, -1.0f}, params);
  EXPECT_EQ(p, (std::vector<double>{0.0, 1.0, 0.0, 0.0}));  // the tie goes to the smaller id
  EXPECT_THROW(sampling_distribution(std::vector<float>{}, params), std::invalid_argument);
  EXPECT_THROW(sampling_distribution(std::vector<float>{1.0f, std::numeric_limits<float>::quiet_NaN()}, params),
               std::invalid_argument);
}

TEST(SampleDistribution, TheInverseCdfInIdOrder) {
  const std::vector<double> w = {0.0, 2.0, 0.0, 1.0, 1.0};  // not normalised: Σ = 4
  EXPECT_EQ(sample_distribution(w, 0.0), 1);                // a zero weight is never drawn, even at u = 0
  EXPECT_EQ(sample_distribution(w, 0.49), 1);
  EXPECT_EQ(sample_distribution(w, 0.5), 3);                // 2/4 is not above 0.5: the next
  EXPECT_EQ(sample_distribution(w, 0.74), 3);
  EXPECT_EQ(sample_distribution(w, 0.76), 4);
  EXPECT_EQ(sample_distribution(w, std::nextafter(1.0, 0.0)), 4);
  EXPECT_EQ(sample_distribution(std::vector<double>{0.0, 0.0, 5.0, 0.0}, 0.999), 2);  // after the last weight: zeros
  testing::SeededRng rng;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<double> weights(static_cast<size_t>(rng.integer(1, 20)));
    for (double& x : weights) x = rng.integer(0, 3) == 0 ? 0.0 : double(rng.uniform(0.0f, 3.0f));
    weights[size_t(rng.integer(0, int64_t(weights.size()) - 1))] = 1.0;
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng.engine());
    long double total = 0, cumulative = 0;
    for (const double x : weights) total += x;
    int32_t expected = -1;
    bool near = false;
    for (size_t t = 0; t < weights.size(); ++t) {
      cumulative += weights[t];
      near = near || std::fabs(double(cumulative - total * u)) < 1e-9;
      if (expected < 0 && weights[t] > 0.0 && cumulative > total * u) expected = int32_t(t);
    }
    if (near) continue;
    ASSERT_EQ(sample_distribution(weights, u), expected) << "u " << u << ", weights " << ch12::show_list(weights);
  }
}

TEST(SampleDistribution, BadWeightsAndUAreRefused) {
  const std::vector<double> ok = {0.5, 0.5};
  EXPECT_THROW(sample_distribution(std::vector<double>{}, 0.5), std::invalid_argument);
  EXPECT_THROW(sample_distribution(std::vector<double>{0.5, -0.1}, 0.5), std::invalid_argument);
  EXPECT_THROW(sample_distribution(std::vector<double>{0.5, std::numeric_limits<double>::quiet_NaN()}, 0.5),
               std::invalid_argument);
  EXPECT_THROW(sample_distribution(std::vector<double>{0.5, std::numeric_limits<double>::infinity()}, 0.5),
               std::invalid_argument);
  EXPECT_THROW(sample_distribution(std::vector<double>{0.0, 0.0}, 0.5), std::invalid_argument);
  EXPECT_THROW(sample_distribution(ok, 1.0), std::invalid_argument);
  EXPECT_THROW(sample_distribution(ok, -0.01), std::invalid_argument);
  try {
    sample_distribution(std::vector<double>{0.5, -0.1}, 0.5);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("p[1]"), std::string::npos) << e.what();
  }
}

// ---- expected_tokens_per_step ----

TEST(ExpectedTokensPerStep, TheGeometricSeriesAndItsEnds) {
  testing::SeededRng rng;
  for (int trial = 0; trial < 200; ++trial) {
    const double alpha = double(rng.integer(0, 1000)) / 1000.0;
    const int64_t gamma = rng.integer(0, 16);
    double sum = 0.0, reach = 1.0;  // P(the step gets past guess k) = α^k, k = 0 … γ
    for (int64_t k = 0; k <= gamma; ++k, reach *= alpha) sum += reach;
    ASSERT_NEAR(expected_tokens_per_step(alpha, gamma), sum, 1e-12 * sum) << "α " << alpha << ", γ " << gamma;
  }
  EXPECT_EQ(expected_tokens_per_step(1.0, 4), 5.0);
  EXPECT_EQ(expected_tokens_per_step(0.0, 4), 1.0);
  EXPECT_EQ(expected_tokens_per_step(0.7, 0), 1.0);
  EXPECT_NEAR(expected_tokens_per_step(0.8, 4), 3.3616, 1e-12);  // 1 + .8 + .64 + .512 + .4096
  EXPECT_THROW(expected_tokens_per_step(-0.1, 2), std::invalid_argument);
  EXPECT_THROW(expected_tokens_per_step(1.1, 2), std::invalid_argument);
  EXPECT_THROW(expected_tokens_per_step(std::numeric_limits<double>::quiet_NaN(), 2), std::invalid_argument);
  EXPECT_THROW(expected_tokens_per_step(0.5, -1), std::invalid_argument);
}

// ---- BlockManager::truncate ----

TEST(Truncate, TheContractsHandCasesAndRandomTablesKeepThePoolsInvariants) {
  // The hand cases and random tables of the exercise's check (forks, prefix-cache hits, block
  // sizes 1 … 16), truncate() against the contract, check_invariants() after.
  const auto run = [](std::span<const ch12::RollbackCase> cases) {
    return ch12::answer_each<ch12::RollbackAnswer>(cases, [](const ch12::RollbackCase& c) {
      paged::BlockManager manager = c.manager;
      paged::BlockTable table = c.tables[c.target];
      manager.truncate(table, c.keep);
      ch12::RollbackAnswer a{{}, table.blocks, table.hashes, table.num_tokens};
      const paged::BlockTable& before = c.tables[c.target];
      for (size_t i = before.blocks.size(); i-- > table.blocks.size();) a.freed.push_back(before.blocks[i]);
      // The contract, apart from the engine: ⌈keep / bs⌉ blocks, ⌊keep / bs⌋ hashes at most.
      const int64_t bs = manager.block_size();
      if (int64_t(table.blocks.size()) != (c.keep + bs - 1) / bs ||
          int64_t(table.hashes.size()) != std::min<int64_t>(int64_t(before.hashes.size()), c.keep / bs) ||
          !std::equal(table.blocks.begin(), table.blocks.end(), before.blocks.begin()))
        throw std::logic_error("truncate kept the wrong blocks or hashes: " + ch12::describe(c));
      std::vector<paged::BlockTable> tables = c.tables;
      tables[c.target] = table;
      std::vector<paged::SequenceBlocks> live;
      for (size_t s = 0; s < tables.size(); ++s)
        if (!tables[s].blocks.empty()) live.push_back({int64_t(s), &tables[s], c.tokens[s]});
      manager.check_invariants(live);
      return a;
    });
  };
  testing::SeededRng rng;
  EXPECT_TRUE(ch12::rollbacks_match(run, ch12::hand_rollback_cases()));
  EXPECT_TRUE(ch12::rollbacks_match(run, ch12::random_rollback_cases(rng, 2000)));
}

// A table of `prompt` tokens (block size 4), `registered` blocks marked computed, then guesses.
struct Scenario {
  paged::BlockManager manager{16, 4};
  paged::BlockTable table;
  std::vector<int32_t> tokens;
};

Scenario scenario(int64_t prompt, int64_t registered_tokens, std::vector<int32_t> guesses) {
  Scenario s;
  for (int64_t t = 0; t < prompt; ++t) s.tokens.push_back(int32_t(10 + t));
  s.manager.allocate(s.table, s.tokens);
  s.manager.mark_computed(s.table, registered_tokens);
  for (const int32_t g : guesses) ch12::append_tokens(s.manager, s.table, s.tokens, g, false);
  return s;
}

TEST(Truncate, FreesTheBlocksPastTheKeptTokensLastToFirst) {
  // 5 prompt tokens + 7 guesses = 12 tokens in 3 blocks; keep 3 → blocks 1 and 2 freed, 2 first.
  Scenario s = scenario(5, 0, {1, 2, 3, 4, 5, 6, 7});
  ASSERT_EQ(s.table.blocks.size(), 3u);
  const std::vector<int32_t> before = s.table.blocks;
  const int64_t free_before = s.manager.num_free_blocks();
  s.manager.truncate(s.table, 3);
  EXPECT_EQ(s.table.blocks, std::vector<int32_t>{before[0]});
  EXPECT_EQ(s.table.num_tokens, 3);
  EXPECT_TRUE(s.table.hashes.empty());
  EXPECT_EQ(s.manager.num_free_blocks(), free_before + 2);
  // Unhashed blocks go back to the free list, a stack: released last to first, the first freed
  // logical block (block 1) is on top and is the next one handed out.
  s.tokens.resize(3);
  for (int32_t t = 0; t < 2; ++t) ch12::append_tokens(s.manager, s.table, s.tokens, 50 + t, false);
  EXPECT_EQ(s.table.blocks.size(), 2u);
  EXPECT_EQ(s.table.blocks[1], before[1]) << "the blocks were not released last to first";
  std::vector<paged::SequenceBlocks> live = {{0, &s.table, s.tokens}};
  EXPECT_NO_THROW(s.manager.check_invariants(live));
}

TEST(Truncate, DropsTheHashesOfBlocksNoLongerFullAndRefusesRegisteredOnes) {
  Scenario s = scenario(6, 4, {1, 2, 3, 4});  // 10 tokens, blocks 0 and 1 full, block 0 registered
  ASSERT_EQ(s.table.hashes.size(), 2u);
  ASSERT_EQ(s.table.num_registered, 1);
  EXPECT_THROW(s.manager.truncate(s.table, 3), std::invalid_argument);   // below the registered block
  EXPECT_THROW(s.manager.truncate(s.table, 11), std::invalid_argument);  // past the slotted tokens
  EXPECT_EQ(s.table.num_tokens, 10);                                     // refused: nothing changed
  s.manager.truncate(s.table, 10);                                       // everything accepted: a no-op
  EXPECT_EQ(s.table.hashes.size(), 2u);
  s.manager.truncate(s.table, 7);
  EXPECT_EQ(s.table.blocks.size(), 2u);
  EXPECT_EQ(s.table.hashes.size(), 1u);
  s.manager.truncate(s.table, 4);
  EXPECT_EQ(s.table.blocks.size(), 1u);
  std::vector<paged::SequenceBlocks> live = {{0, &s.table, s.tokens}};
  EXPECT_NO_THROW(s.manager.check_invariants(live));
}

TEST(Truncate, ABlockFilledByRejectedGuessesIsNeverAPrefixCacheHit) {
  // Prompt [10 … 14] (block 0 registered), guesses 1 2 3 fill block 1: all rejected, rolled back
  // to 5 tokens. The target's own tokens 7 8 9 then fill block 1 and are registered. A later
  // prompt that starts with the rejected guesses hits block 0 only; one with the real tokens hits
  // both.
  Scenario s = scenario(5, 4, {1, 2, 3});
  ASSERT_EQ(s.table.hashes.size(), 2u);  // block 1 full of guesses: hashed in the table
  s.manager.truncate(s.table, 5);
  s.tokens.resize(5);
  for (const int32_t t : {7, 8, 9}) ch12::append_tokens(s.manager, s.table, s.tokens, t, true);
  ASSERT_EQ(s.table.num_registered, 2);
  const std::vector<int32_t> with_guesses = {10, 11, 12, 13, 14, 1, 2, 3, 99};
  const std::vector<int32_t> with_real = {10, 11, 12, 13, 14, 7, 8, 9, 99};
  paged::BlockTable a, b;
  EXPECT_EQ(s.manager.allocate(a, with_guesses).cached_tokens, 4);
  EXPECT_EQ(s.manager.allocate(b, with_real).cached_tokens, 8);
  std::vector<int32_t> real_tokens = s.tokens;
  std::vector<paged::SequenceBlocks> live = {{0, &s.table, real_tokens}, {1, &a, with_guesses}, {2, &b, with_real}};
  EXPECT_NO_THROW(s.manager.check_invariants(live));
}

TEST(Truncate, ACutBlockOfGuessesIsNotRegisteredByALaterMarkComputed) {
  // Rolled back before mark_computed: the guesses' full block was hashed in the table but never
  // registered; once cut its hash is gone, so a later mark_computed of the kept tokens registers
  // nothing new and the pool holds no hash of rejected tokens.
  Scenario s = scenario(4, 4, {1, 2, 3, 4});  // block 1 = the 4 guesses, full, hashed, unregistered
  const int32_t guess_block = s.table.blocks[1];
  s.manager.truncate(s.table, 6);
  s.manager.mark_computed(s.table, 6);
  EXPECT_FALSE(s.manager.pool().hash_of(guess_block).has_value());
  EXPECT_EQ(s.table.num_registered, 1);
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// The kept last block of a rollback is rewritten by the next appends: truncate() refuses to leave
// a block partly filled while another table shares it (a fork) or the prefix cache holds it.
TEST(Truncate, RefusesToLeaveASharedOrCachedBlockPartlyFilled) {
  paged::BlockManager manager(16, 4);
  paged::BlockTable table;
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6};
  ASSERT_EQ(manager.allocate(table, tokens).status, paged::BlockStatus::ok);
  for (const int32_t g : {7, 8}) testing::ch12::append_tokens(manager, table, tokens, g, false);
  paged::BlockTable other = manager.fork(table);  // block 1 (tokens 5 … 8) now shared
  EXPECT_THROW(manager.truncate(table, 6), std::invalid_argument);
  EXPECT_EQ(table.num_tokens, 8) << "a refused truncate changed the table";
  manager.free(other);
  manager.mark_computed(table, 8);  // block 1 full and registered
  EXPECT_THROW(manager.truncate(table, 6), std::invalid_argument);
  manager.truncate(table, 8);  // whole blocks: nothing to rewrite
  EXPECT_EQ(table.num_tokens, 8);
  manager.free(table);
}

}  // namespace
}  // namespace inferlab
