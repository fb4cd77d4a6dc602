// Chapter 12 exercises, graded: the student's prompt lookup (12.1), rejection sampler (12.2) and
// block-table rollback (12.3), each compared with the engine's own function (runtime/engine/
// speculative.h: propose_ngram, verify_rejection; runtime/paged/block_manager.h:
// BlockManager::truncate) — on hand cases that each teach one rule, then on fresh random inputs
// (the seed is printed on failure; INFERLAB_SEED replays it); 12.2 also by the distribution test
// (distribution_check.h: chi-square and binomial tests at significance 1e-6). The checks live in
// student_check.h, shared with the wrong fixtures of tests/wrong/wrong_ch12_exercises.cpp that they
// must reject. Each TEST is one grading unit.
//
// Student code never runs in this process: an adapter below runs the student's function on a whole
// batch of inputs in ONE sandboxed child process (tests/support/isolated_batch.h), which sends back
// what it answered as bytes; only then does this process compute the expected answers and compare.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "12-speculative-decoding/ch12.h"
#include "tests/12-speculative-decoding/distribution_check.h"
#include "tests/12-speculative-decoding/student_check.h"
#include "tests/support/isolated_batch.h"
#include "tests/support/seeded.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch12PromptLookup", "propose_ngram"},
    {"Ch12RejectionSampler", "verify_rejection"},
    {"Ch12Rollback", "rollback"},
});

namespace ch12 = testing::ch12;
using testing::AnswerReader;
using testing::AnswerWriter;
using testing::isolated_batch;

// A vector of int32 as bytes, and back.
std::string int32_bytes(const std::vector<int32_t>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int32_t));
}
std::vector<int32_t> int32_values(const std::string& bytes) {
  std::vector<int32_t> values(bytes.size() / sizeof(int32_t));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(int32_t));
  return values;
}

// Exercise 12.1 on a batch: each answer is the guesses.
ch12::Answers<std::vector<int32_t>> student_ngrams(std::span<const ch12::NgramCase> cases) {
  const testing::BatchAnswers flat = isolated_batch(cases.size(), [&](size_t k) {
    const ch12::NgramCase& c = cases[k];
    return int32_bytes(student::propose_ngram(c.tokens, c.num_tokens, c.max_ngram, c.min_ngram));
  });
  ch12::Answers<std::vector<int32_t>> got{{}, flat.error};
  for (const std::string& bytes : flat.answers) got.answers.push_back(int32_values(bytes));
  return got;
}

// Exercise 12.2 on a batch: each answer is [accepted, state, tokens …].
ch12::Answers<ch12::RejectionAnswer> student_rejections(std::span<const ch12::RejectionCase> cases) {
  const testing::BatchAnswers flat = isolated_batch(cases.size(), [&](size_t k) {
    const ch12::RejectionCase& c = cases[k];
    uint64_t state = c.state;
    const student::Verification v = student::verify_rejection(c.p, c.q, c.draft, state);
    AnswerWriter out;
    out.number(v.accepted);
    out.number(int64_t(state));
    out.text(int32_bytes(v.tokens));
    return std::move(out).str();
  });
  ch12::Answers<ch12::RejectionAnswer> got{{}, flat.error};
  for (const std::string& bytes : flat.answers) {
    AnswerReader in(bytes);
    ch12::RejectionAnswer& a = got.answers.emplace_back();
    a.accepted = in.number();
    a.state = uint64_t(in.number());
    a.tokens = int32_values(in.text());
  }
  return got;
}

// Exercise 12.2 on the distribution test's jobs: per job, [accepted, size, tokens …] per trial.
ch12::Answers<std::vector<int32_t>> student_distribution(std::span<const ch12::DistributionJob> jobs) {
  const testing::BatchAnswers flat = isolated_batch(jobs.size(), [&](size_t k) {
    const ch12::DistributionJob& job = jobs[k];
    const int64_t gamma = job.target->gamma();
    std::vector<int32_t> out;
    for (int64_t n = 0; n < job.trials.count; ++n) {
      uint64_t state = job.trials.states[size_t(n)];
      const std::span<const int32_t> draft(job.trials.drafts.data() + n * gamma, size_t(gamma));
      const student::Verification v = student::verify_rejection(job.target->p, job.target->q, draft, state);
      out.push_back(int32_t(v.accepted));
      out.push_back(int32_t(v.tokens.size()));
      out.insert(out.end(), v.tokens.begin(), v.tokens.end());
    }
    return int32_bytes(out);
  });
  ch12::Answers<std::vector<int32_t>> got{{}, flat.error};
  for (const std::string& bytes : flat.answers) got.answers.push_back(int32_values(bytes));
  return got;
}

// Exercise 12.3 on a batch: each answer is [num_tokens, freed, blocks, hashes].
ch12::Answers<ch12::RollbackAnswer> student_rollbacks(std::span<const ch12::RollbackCase> cases) {
  const testing::BatchAnswers flat = isolated_batch(cases.size(), [&](size_t k) {
    const ch12::RollbackCase& c = cases[k];
    const paged::BlockTable& table = c.tables[c.target];
    std::vector<int32_t> blocks = table.blocks;
    std::vector<uint64_t> hashes = table.hashes;
    int64_t num_tokens = table.num_tokens;
    const std::vector<int32_t> freed = student::rollback(blocks, hashes, num_tokens, c.keep, c.manager.block_size(),
                                                         table.num_registered);
    AnswerWriter out;
    out.number(num_tokens);
    out.text(int32_bytes(freed));
    out.text(int32_bytes(blocks));
    out.text(std::string(reinterpret_cast<const char*>(hashes.data()), hashes.size() * sizeof(uint64_t)));
    return std::move(out).str();
  });
  ch12::Answers<ch12::RollbackAnswer> got{{}, flat.error};
  for (const std::string& bytes : flat.answers) {
    AnswerReader in(bytes);
    ch12::RollbackAnswer& a = got.answers.emplace_back();
    a.num_tokens = in.number();
    a.freed = int32_values(in.text());
    a.blocks = int32_values(in.text());
    const std::string hashes = in.text();
    a.hashes.resize(hashes.size() / sizeof(uint64_t));
    if (!a.hashes.empty()) std::memcpy(a.hashes.data(), hashes.data(), a.hashes.size() * sizeof(uint64_t));
  }
  return got;
}

// ---- 12.1 prompt lookup ----

TEST(Ch12PromptLookup, HandCasesTeachEachRule) {
  // The longest n first, the most recent occurrence, overlaps, the cut at the end and at
  // num_tokens, no match.
  EXPECT_TRUE(ch12::ngrams_match(student_ngrams, ch12::hand_ngram_questions()));
}

TEST(Ch12PromptLookup, RandomSequencesEqualTheEngine) {
  testing::SeededRng rng;
  EXPECT_TRUE(ch12::ngrams_match(student_ngrams, ch12::random_ngram_questions(rng, 3000)));
}

// ---- 12.2 the rejection sampler ----

TEST(Ch12RejectionSampler, HandCasesTeachEachRule) {
  // ch12.h's worked example accepted and rejected, deterministic guesses, a guess the target
  // excludes, p = q, γ = 0.
  EXPECT_TRUE(ch12::rejections_match(student_rejections, ch12::hand_rejection_questions()));
}

TEST(Ch12RejectionSampler, RandomCasesEqualTheEnginesDraws) {
  // The same rng_state gives the engine's tokens, count and final state: the contract's draws.
  testing::SeededRng rng;
  EXPECT_TRUE(ch12::rejections_match(student_rejections, ch12::random_rejection_questions(rng, 3000)));
}

TEST(Ch12RejectionSampler, TokensFollowTheTargetsDistribution) {
  // The distribution test (distribution_check.h): tens of thousands of steps with guesses drawn
  // from q; each position's token against p[k] (chi-square), each guess's acceptance rate against
  // Σ min(p, q) (binomial), at significance 1e-6.
  testing::SeededRng rng;
  EXPECT_TRUE(ch12::distribution_matches(student_distribution, rng, 30000, "your verify_rejection"));
}

// ---- 12.3 the rollback ----

TEST(Ch12Rollback, HandCasesTeachEachRule) {
  EXPECT_TRUE(ch12::rollbacks_match(student_rollbacks, ch12::hand_rollback_cases()));
}

TEST(Ch12Rollback, RandomTablesEqualTheBlockManagersTruncate) {
  // Tables made by the lab's BlockManager (forks, prefix-cache hits, block sizes 1 … 16), γ
  // guesses appended, then rolled back; the pool's invariants checked with the student's result.
  testing::SeededRng rng;
  EXPECT_TRUE(ch12::rollbacks_match(student_rollbacks, ch12::random_rollback_cases(rng, 1000)));
}

}  // namespace
}  // namespace inferlab
