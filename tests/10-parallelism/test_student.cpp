// Chapter 10 exercises, graded: the student's column- and row-parallel shards of a weight matrix
// (10.1), compared bit for bit with the lab's Weight::take_rows / take_columns
// (kernels/layers/weight.h) and their products with W · x in float64, and the student's ring
// all-reduce (10.2) on p = 1 … 5 ranks that are threads (thread_world.h), against a float64 sum,
// rank against rank, and the traffic its Link counted — on hand-worked cases that each teach one
// rule and, beside them, fresh random inputs (the seed is printed on failure; INFERLAB_SEED
// replays it). The checks live in student_check.h, shared with the wrong fixtures of
// tests/wrong/wrong_ch10_exercises.cpp that they must reject. Each TEST is one grading unit.
//
// Student code never runs in this process. A check draws all its inputs here and hands them to an
// adapter below, which runs the student's functions on every one of them in ONE sandboxed child
// process (tests/support/isolated_batch.h) — the ring's p threads too, with the Link between
// them —; the child sends back what they answered as bytes, and only then does this process
// compute the expected answers and compare.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "10-parallelism/ch10.h"
#include "tests/10-parallelism/student_check.h"
#include "tests/10-parallelism/thread_world.h"
#include "tests/support/isolated_batch.h"
#include "tests/support/seeded.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch10Shard", "column_parallel_shard"},
    {"Ch10Shard.RowParallelShardsSumToTheWholeProduct", "row_parallel_shard"},
    {"Ch10Ring", "ring_all_reduce"},
});

namespace ch10 = testing::ch10;
using testing::AnswerReader;
using testing::AnswerWriter;
using testing::isolated_batch;

// ---- adapters: the student's functions in the sandbox, their answers as bytes ----

std::string float_bytes(std::span<const float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size_bytes());
}

std::vector<float> floats_of(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

// Exercise 10.1 on a batch: each answer is every rank's shard.
ch10::Answers<ch10::Shards> student_shards(std::span<const ch10::ShardCase> cases) {
  const testing::BatchAnswers flat = isolated_batch(cases.size(), [&](size_t k) {
    const ch10::ShardCase& c = cases[k];
    AnswerWriter out;
    for (int r = 0; r < c.ranks; ++r)
      out.text(float_bytes(c.kind == ch10::ShardKind::column_parallel
                               ? student::column_parallel_shard(c.w, c.out, c.in, r, c.ranks)
                               : student::row_parallel_shard(c.w, c.out, c.in, r, c.ranks)));
    return std::move(out).str();
  });
  ch10::Answers<ch10::Shards> shards{{}, flat.error};
  for (size_t k = 0; k < flat.answers.size(); ++k) {
    AnswerReader in(flat.answers[k]);
    ch10::Shards& mine = shards.answers.emplace_back();
    for (int r = 0; r < cases[k].ranks; ++r) {
      std::vector<float> one = floats_of(in.text());
      if (in.ok()) mine.push_back(std::move(one));
    }
  }
  return shards;
}

// Exercise 10.1's refusals on a batch: each answer is "returned" or "refused: <message>".
ch10::Answers<std::string> student_refusals(std::span<const ch10::BadShardCall> calls) {
  const testing::BatchAnswers flat = isolated_batch(calls.size(), [&](size_t k) {
    const ch10::BadShardCall& c = calls[k];
    const std::vector<float> w(size_t(std::max<int64_t>(c.w_size, 0)), 1.0f);
    try {
      if (c.kind == ch10::ShardKind::column_parallel)
        student::column_parallel_shard(w, c.out, c.in, c.rank, c.ranks);
      else
        student::row_parallel_shard(w, c.out, c.in, c.rank, c.ranks);
    } catch (const std::invalid_argument& e) {
      return std::string(ch10::kRefused) + e.what();
    }
    return std::string(ch10::kReturned);
  });
  return {flat.answers, flat.error};
}

// Exercise 10.2 on a batch: each case's ranks run as threads of the child, on the Link of
// thread_world.h; each answer is every rank's data after the call and its traffic.
ch10::Answers<ch10::WorldResult> student_rings(std::span<const ch10::RingCase> cases) {
  const testing::BatchAnswers flat = isolated_batch(cases.size(), [&](size_t k) {
    const ch10::WorldResult result = ch10::run_ring_world(cases[k].inputs, student::ring_all_reduce);
    AnswerWriter out;
    for (const std::vector<float>& data : result.data) out.text(float_bytes(data));
    for (const ch10::RankTraffic& t : result.traffic)
      out.text(std::string(reinterpret_cast<const char*>(&t), sizeof t));
    return std::move(out).str();
  });
  ch10::Answers<ch10::WorldResult> results{{}, flat.error};
  for (size_t k = 0; k < flat.answers.size(); ++k) {
    AnswerReader in(flat.answers[k]);
    ch10::WorldResult& r = results.answers.emplace_back();
    const int p = cases[k].ranks();
    for (int rank = 0; rank < p; ++rank) r.data.push_back(floats_of(in.text()));
    for (int rank = 0; rank < p; ++rank) {
      const std::string bytes = in.text();
      ch10::RankTraffic t;
      if (bytes.size() == sizeof t) std::memcpy(&t, bytes.data(), sizeof t);
      r.traffic.push_back(t);
    }
    if (!in.ok()) r.data.clear();  // garbled: reported as the wrong number of ranks
  }
  return results;
}

// ---- 10.1 sharding a weight matrix ----

TEST(Ch10Shard, WorkedExample) {
  // W [4][6], W[o][i] = 10 · o + i, over 2 ranks: rows 2 and 3, columns 3 to 5 for rank 1.
  EXPECT_TRUE(ch10::shards_match(student_shards, ch10::worked_example_shards()));
}

TEST(Ch10Shard, ColumnParallelShardsHoldWholeOutputs) {
  // 20 random matrices over p = 1 … 5 (out a multiple of p, in odd or not): every rank's rows
  // equal to Weight::take_rows', and the shards' outputs side by side equal to W · x.
  testing::SeededRng rng;
  EXPECT_TRUE(ch10::shards_match(student_shards, ch10::random_shards(rng, ch10::ShardKind::column_parallel)));
}

TEST(Ch10Shard, RowParallelShardsSumToTheWholeProduct) {
  // 20 random matrices over p = 1 … 5 (in a multiple of p, out odd or not): every rank's columns
  // equal to Weight::take_columns', and the partials, each on its slice of x, summed equal to W · x.
  testing::SeededRng rng;
  EXPECT_TRUE(ch10::shards_match(student_shards, ch10::random_shards(rng, ch10::ShardKind::row_parallel)));
}

TEST(Ch10Shard, BadArgumentsAreRefusedByName) {
  // No ranks, a rank outside [0, ranks), empty or negative dimensions, the cut dimension not
  // divisible by ranks, W of the wrong size: std::invalid_argument naming "<name> = <value>"; the
  // dimension that is not cut need not be divisible.
  EXPECT_TRUE(ch10::refusals_match(student_refusals, ch10::bad_shard_calls()));
}

// ---- 10.2 the ring all-reduce ----

TEST(Ch10Ring, WorkedExample) {
  // ch10.h's p = 3, n = 7 (chunks of 2, 2 and 3) and p = 2, n = 4, in small integers: exact sums.
  EXPECT_TRUE(ch10::ring_sums_match(student_rings, ch10::worked_example_rings()));
}

TEST(Ch10Ring, FewerFloatsThanRanks) {
  // n = 0, 1 and p − 1 over p = 1 … 5: empty chunks must still make their steps (or none on
  // every rank alike), without a deadlock.
  testing::SeededRng rng;
  EXPECT_TRUE(ch10::ring_sums_match(student_rings, ch10::small_rings(rng)));
}

TEST(Ch10Ring, SumsEveryRanksDataAsFloat64Does) {
  // n = 7, 1000, 65537 and a random size over p = 1 … 5, magnitudes 10⁻³ … 10³: every rank's every
  // element within (p − 1) · 2⁻²⁴ · Σ|x| of the float64 sum.
  testing::SeededRng rng;
  EXPECT_TRUE(ch10::ring_sums_match(student_rings, ch10::random_rings(rng)));
}

TEST(Ch10Ring, EveryRankEndsWithTheSameBits) {
  // The same sizes over p = 2 … 5: the all-gather copies each complete chunk, so every rank's
  // result is rank 0's, bit for bit.
  testing::SeededRng rng;
  EXPECT_TRUE(ch10::ring_ranks_agree(student_rings, ch10::random_rings(rng, /*with_one=*/false)));
}

TEST(Ch10Ring, EachRankSendsTwoChunksAStepAroundTheRing) {
  // n = 0, 1, p − 1, 7, 1000, 65537 and a random size over p = 1 … 5, the sums right: each rank
  // sent at most 2 (p − 1) messages of at most 2 (p − 1) · ⌈n/p⌉ floats in all, only to the next
  // rank, and received only from the previous — gathering everything at one rank is caught here.
  testing::SeededRng rng;
  EXPECT_TRUE(ch10::ring_traffic_within(student_rings, ch10::every_ring(rng)));
}

}  // namespace
}  // namespace inferlab
