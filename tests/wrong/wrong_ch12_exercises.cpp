// Wrong answers to chapter 12's exercises, run through the very checks that grade the students
// (tests/12-speculative-decoding/student_check.h and distribution_check.h): each mistake must be
// rejected with a message that names it, and the same sketch without the mistake must pass. The
// mistakes:
//   12.1 prompt lookup that takes the oldest occurrence, one that tries the shortest n-gram first,
//        one that ignores num_tokens;
//   12.2 the naive samplers: accept the guess when it equals a token drawn from p (and emit that
//        token otherwise — exact in distribution, but accepting at the rate Σ p·q instead of
//        Σ min(p, q): the acceptance test rejects it), the same resampling from p on a mismatch,
//        accept when p(d) ≥ q(d) and resample from p otherwise, the right acceptance with the
//        replacement drawn from p instead of the residual max(0, p − q), no bonus token,
//        verification that goes on after a rejection;
//   12.3 a rollback that frees the blocks first to last, one that keeps the hash of a block no
//        longer full, one that keeps ⌊keep / block_size⌋ blocks (the partial last one freed).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine/sampling.h"
#include "tests/12-speculative-decoding/distribution_check.h"
#include "tests/12-speculative-decoding/student_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

namespace ch12 = testing::ch12;
using ::testing::HasSubstr;

// A wrong answer must fail its check, and the failure must say which mistake it is.
void expect_rejected(const ::testing::AssertionResult& result, const std::string& mistake) {
  EXPECT_FALSE(result) << "a wrong answer (" << mistake << ") passed";
  if (!result) std::cout << result.message() << "\n\n";  // what a student would read
  EXPECT_THAT(std::string(result.message()), HasSubstr(mistake)) << result.message();
}

// ---- 12.1 ----

enum class NgramMistake { none, oldest_occurrence, shortest_first, no_num_tokens_cut };

std::vector<int32_t> ngram(const ch12::NgramCase& c, NgramMistake mistake) {
  const int64_t size = int64_t(c.tokens.size());
  if (c.num_tokens == 0) return {};
  const int64_t longest = std::min(c.max_ngram, size - 1);
  for (int64_t k = 0; k <= longest - c.min_ngram; ++k) {
    const int64_t n = mistake == NgramMistake::shortest_first ? c.min_ngram + k : longest - k;
    for (int64_t step = 0; step < size - n; ++step) {
      const int64_t j = mistake == NgramMistake::oldest_occurrence ? step : size - n - 1 - step;
      if (!std::equal(c.tokens.end() - n, c.tokens.end(), c.tokens.begin() + j)) continue;
      const int64_t to = mistake == NgramMistake::no_num_tokens_cut ? size : std::min(j + n + c.num_tokens, size);
      return {c.tokens.begin() + j + n, c.tokens.begin() + to};
    }
  }
  return {};
}

ch12::NgramRunFn ngram_with(NgramMistake mistake) {
  return [mistake](std::span<const ch12::NgramCase> cases) {
    return ch12::answer_each<std::vector<int32_t>>(cases, [&](const ch12::NgramCase& c) { return ngram(c, mistake); });
  };
}

TEST(WrongCh12PromptLookup, TheRightSketchPasses) {
  testing::SeededRng rng;
  EXPECT_TRUE(ch12::ngrams_match(ngram_with(NgramMistake::none), ch12::hand_ngram_questions()));
  EXPECT_TRUE(ch12::ngrams_match(ngram_with(NgramMistake::none), ch12::random_ngram_questions(rng, 3000)));
}

TEST(WrongCh12PromptLookup, TheOldestOccurrenceIsRejected) {
  expect_rejected(ch12::ngrams_match(ngram_with(NgramMistake::oldest_occurrence), ch12::hand_ngram_questions()),
                  "take the most recent");
}

TEST(WrongCh12PromptLookup, TheShortestNgramFirstIsRejected) {
  expect_rejected(ch12::ngrams_match(ngram_with(NgramMistake::shortest_first), ch12::hand_ngram_questions()),
                  "the longest n first");
}

TEST(WrongCh12PromptLookup, GuessesNotCutAtNumTokensAreRejected) {
  expect_rejected(ch12::ngrams_match(ngram_with(NgramMistake::no_num_tokens_cut), ch12::hand_ngram_questions()),
                  "more than num_tokens");
}

// ---- 12.2 ----

enum class SamplerMistake {
  none,
  equal_to_draw_emit_draw,      // x ~ p; accept d when d == x, else emit x
  equal_to_draw_resample,       // x ~ p; accept d when d == x, else emit a new draw from p
  accept_if_p_at_least_q,       // accept when p(d) ≥ q(d), else a draw from p
  replacement_from_p,           // the right acceptance, the replacement from p (not the residual)
  no_bonus,                     // all accepted: no token from p[γ]
  continue_after_rejection,     // a rejected guess replaced, then the next guesses checked
};

ch12::RejectionAnswer sketch_verify(std::span<const std::vector<double>> p, std::span<const std::vector<double>> q,
                             std::span<const int32_t> draft, uint64_t state, SamplerMistake mistake) {
  ch12::RejectionAnswer out;
  const size_t vocab = p[0].size();
  bool rejected = false;
  for (size_t i = 0; i < draft.size(); ++i) {
    const int32_t d = draft[i];
    const double qd = q[i].empty() ? 1.0 : q[i][size_t(d)];
    const double u = engine::next_uniform(state);
    bool accept = false;
    int32_t replacement = -1;
    switch (mistake) {
      case SamplerMistake::equal_to_draw_emit_draw:
      case SamplerMistake::equal_to_draw_resample: {
        const int32_t x = engine::sample_distribution(p[i], u);
        accept = x == d;
        if (!accept)
          replacement = mistake == SamplerMistake::equal_to_draw_emit_draw
                            ? x
                            : engine::sample_distribution(p[i], engine::next_uniform(state));
        break;
      }
      case SamplerMistake::accept_if_p_at_least_q:
        accept = p[i][size_t(d)] >= qd;
        if (!accept) replacement = engine::sample_distribution(p[i], engine::next_uniform(state));
        break;
      default: {
        accept = u * qd < p[i][size_t(d)];
        if (accept) break;
        std::vector<double> residual(vocab);
        double mass = 0.0;
        for (size_t t = 0; t < vocab; ++t) {
          const double qt = q[i].empty() ? (t == size_t(d) ? 1.0 : 0.0) : q[i][t];
          mass += residual[t] = std::max(0.0, p[i][t] - qt);
        }
        const bool from_p = mistake == SamplerMistake::replacement_from_p || mass <= 0.0;
        replacement = engine::sample_distribution(from_p ? std::span<const double>(p[i]) : residual,
                                                  engine::next_uniform(state));
      }
    }
    if (accept) {
      out.tokens.push_back(d);
      if (!rejected) ++out.accepted;
      continue;
    }
    out.tokens.push_back(replacement);
    rejected = true;
    if (mistake != SamplerMistake::continue_after_rejection) {
      out.state = state;
      return out;
    }
  }
  if (mistake != SamplerMistake::no_bonus && !rejected)
    out.tokens.push_back(engine::sample_distribution(p[draft.size()], engine::next_uniform(state)));
  if (mistake == SamplerMistake::continue_after_rejection) out.accepted = int64_t(out.tokens.size()) - 1;
  out.state = state;
  return out;
}

ch12::RejectionRunFn sampler_with(SamplerMistake mistake) {
  return [mistake](std::span<const ch12::RejectionCase> cases) {
    return ch12::answer_each<ch12::RejectionAnswer>(
        cases, [&](const ch12::RejectionCase& c) { return sketch_verify(c.p, c.q, c.draft, c.state, mistake); });
  };
}

ch12::DistributionRunFn distribution_with(SamplerMistake mistake) {
  return [mistake](std::span<const ch12::DistributionJob> jobs) {
    return ch12::answer_each<std::vector<int32_t>>(jobs, [&](const ch12::DistributionJob& job) {
      const int64_t gamma = job.target->gamma();
      std::vector<int32_t> out;
      for (int64_t n = 0; n < job.trials.count; ++n) {
        const ch12::RejectionAnswer a =
            sketch_verify(job.target->p, job.target->q,
                   std::span<const int32_t>(job.trials.drafts.data() + n * gamma, size_t(gamma)),
                   job.trials.states[size_t(n)], mistake);
        out.push_back(int32_t(a.accepted));
        out.push_back(int32_t(a.tokens.size()));
        out.insert(out.end(), a.tokens.begin(), a.tokens.end());
      }
      return out;
    });
  };
}

TEST(WrongCh12RejectionSampler, TheRightSketchPasses) {
  testing::SeededRng rng;
  EXPECT_TRUE(ch12::rejections_match(sampler_with(SamplerMistake::none), ch12::hand_rejection_questions()));
  EXPECT_TRUE(ch12::rejections_match(sampler_with(SamplerMistake::none), ch12::random_rejection_questions(rng, 2000)));
  EXPECT_TRUE(ch12::distribution_matches(distribution_with(SamplerMistake::none), rng, 30000, "the right sketch"));
}

TEST(WrongCh12RejectionSampler, AcceptingOnlyAGuessEqualToADrawFromPIsRejected) {
  // Exact in distribution (the emitted token is always the draw from p), but a guess is accepted
  // at the rate Σ p·q, below Σ min(p, q): the acceptance test catches it — and the draws differ.
  testing::SeededRng rng;
  expect_rejected(ch12::distribution_matches(distribution_with(SamplerMistake::equal_to_draw_emit_draw), rng, 30000,
                                             "accept-if-equal"),
                  "the contract's rate is");
  expect_rejected(ch12::rejections_match(sampler_with(SamplerMistake::equal_to_draw_emit_draw),
                                         ch12::hand_rejection_questions()),
                  "expected");
}

TEST(WrongCh12RejectionSampler, AcceptIfEqualThenResampleFromPIsRejected) {
  testing::SeededRng rng;
  expect_rejected(ch12::distribution_matches(distribution_with(SamplerMistake::equal_to_draw_resample), rng, 30000,
                                             "accept-if-equal, resample"),
                  "does not follow the target's");
}

TEST(WrongCh12RejectionSampler, AcceptIfPAtLeastQIsRejected) {
  testing::SeededRng rng;
  expect_rejected(ch12::distribution_matches(distribution_with(SamplerMistake::accept_if_p_at_least_q), rng, 30000,
                                             "accept-if-p≥q"),
                  "does not follow the target's");
}

TEST(WrongCh12RejectionSampler, AReplacementDrawnFromPIsRejected) {
  testing::SeededRng rng;
  expect_rejected(ch12::distribution_matches(distribution_with(SamplerMistake::replacement_from_p), rng, 30000,
                                             "replacement-from-p"),
                  "does not follow the target's");
}

TEST(WrongCh12RejectionSampler, NoBonusTokenIsRejected) {
  testing::SeededRng rng;
  expect_rejected(ch12::rejections_match(sampler_with(SamplerMistake::no_bonus), ch12::hand_rejection_questions()),
                  "the bonus");
  expect_rejected(ch12::distribution_matches(distribution_with(SamplerMistake::no_bonus), rng, 2000, "no-bonus"),
                  "accepted = tokens − 1");
}

TEST(WrongCh12RejectionSampler, GoingOnAfterARejectionIsRejected) {
  testing::SeededRng rng;
  expect_rejected(ch12::rejections_match(sampler_with(SamplerMistake::continue_after_rejection),
                                         ch12::random_rejection_questions(rng, 2000)),
                  "must stop at the first rejected guess");
}

// ---- 12.3 ----

enum class RollbackMistake { none, first_to_last, stale_hash, floor_blocks };

ch12::RollbackAnswer rollback(const ch12::RollbackCase& c, RollbackMistake mistake) {
  const paged::BlockTable& table = c.tables[c.target];
  const int64_t bs = c.manager.block_size();
  const size_t kept = size_t(mistake == RollbackMistake::floor_blocks ? c.keep / bs : (c.keep + bs - 1) / bs);
  ch12::RollbackAnswer a{{}, {table.blocks.begin(), table.blocks.begin() + std::ptrdiff_t(kept)}, table.hashes, c.keep};
  for (size_t i = table.blocks.size(); i-- > kept;) a.freed.push_back(table.blocks[i]);
  if (mistake == RollbackMistake::first_to_last) std::reverse(a.freed.begin(), a.freed.end());
  const size_t hashes = mistake == RollbackMistake::stale_hash ? kept : size_t(c.keep / bs);
  a.hashes.resize(std::min(a.hashes.size(), hashes));
  return a;
}

ch12::RollbackRunFn rollback_with(RollbackMistake mistake) {
  return [mistake](std::span<const ch12::RollbackCase> cases) {
    return ch12::answer_each<ch12::RollbackAnswer>(cases,
                                                   [&](const ch12::RollbackCase& c) { return rollback(c, mistake); });
  };
}

TEST(WrongCh12Rollback, TheRightSketchPasses) {
  testing::SeededRng rng;
  EXPECT_TRUE(ch12::rollbacks_match(rollback_with(RollbackMistake::none), ch12::hand_rollback_cases()));
  EXPECT_TRUE(ch12::rollbacks_match(rollback_with(RollbackMistake::none), ch12::random_rollback_cases(rng, 1000)));
}

TEST(WrongCh12Rollback, FreeingFirstToLastIsRejected) {
  expect_rejected(ch12::rollbacks_match(rollback_with(RollbackMistake::first_to_last), ch12::hand_rollback_cases()),
                  "free them last to first");
}

TEST(WrongCh12Rollback, TheHashOfABlockNoLongerFullIsRejected) {
  expect_rejected(ch12::rollbacks_match(rollback_with(RollbackMistake::stale_hash), ch12::hand_rollback_cases()),
                  "keep ⌊keep / block_size⌋ hashes at most");
}

TEST(WrongCh12Rollback, FreeingThePartialLastBlockIsRejected) {
  expect_rejected(ch12::rollbacks_match(rollback_with(RollbackMistake::floor_blocks), ch12::hand_rollback_cases()),
                  "keep ⌈keep / block_size⌉ blocks");
}

}  // namespace
}  // namespace inferlab
