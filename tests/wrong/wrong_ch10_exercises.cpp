// Wrong answers to chapter 10's exercises, run through the very checks that grade the students
// (tests/10-parallelism/student_check.h), on the same thread world (thread_world.h): each mistake
// must be rejected with a message that names it, and the same sketch without the mistake must
// pass. The mistakes:
//   10.1 a column-parallel shard that returns a block of columns (Megatron's "columns" taken for
//        W's); a row-parallel shard of the next rank's columns;
//   10.2 a ring that only reduce-scatters (no all-gather); one that gathers everything at rank 0
//        and sends the sums back (right sums, the same bits everywhere, (p − 1) · n floats from
//        rank 0: only the traffic check catches it); one whose chunks are ⌊n/p⌋ long (the last
//        n mod p elements never reduced); one where every rank sends first (a deadlock with
//        rendezvous sends: it must be reported, naming the ranks, never hang); one where every
//        rank adds the others' data up itself in its own order (right sums, different bits).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "10-parallelism/ch10.h"
#include "tests/10-parallelism/student_check.h"
#include "tests/10-parallelism/thread_world.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

namespace ch10 = testing::ch10;
using ::testing::HasSubstr;

// A wrong answer must fail its check, and the failure must say which mistake it is.
void expect_rejected(const ::testing::AssertionResult& result, const std::string& mistake) {
  EXPECT_FALSE(result) << "a wrong answer (" << mistake << ") passed";
  if (!result) std::cout << result.message() << "\n\n";  // what a student would read
  EXPECT_THAT(std::string(result.message()), HasSubstr(mistake)) << result.message();
}

// ---- 10.1 ----

using ShardFn = std::vector<float> (*)(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks);

std::vector<float> block_of_rows(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks) {
  const int64_t rows = out / ranks;
  return {w.begin() + rank * rows * in, w.begin() + (rank + 1) * rows * in};
}

std::vector<float> block_of_columns(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks) {
  const int64_t cols = in / ranks;
  std::vector<float> shard;
  for (int64_t o = 0; o < out; ++o)
    shard.insert(shard.end(), w.begin() + o * in + rank * cols, w.begin() + o * in + (rank + 1) * cols);
  return shard;
}

// Column-parallel taken for W's columns: the row-parallel block.
std::vector<float> columns_for_rows(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks) {
  return block_of_columns(w, out, in, rank, ranks);
}

// The next rank's columns.
std::vector<float> next_ranks_columns(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks) {
  return block_of_columns(w, out, in, (rank + 1) % ranks, ranks);
}

// Runs a batch of shard cases through @p column and @p row, in this process.
ch10::ShardRunFn shard_runner(ShardFn column, ShardFn row) {
  return [column, row](std::span<const ch10::ShardCase> cases) {
    ch10::Answers<ch10::Shards> out;
    for (const ch10::ShardCase& c : cases) {
      ch10::Shards& shards = out.answers.emplace_back();
      for (int r = 0; r < c.ranks; ++r)
        shards.push_back((c.kind == ch10::ShardKind::column_parallel ? column : row)(c.w, c.out, c.in, r, c.ranks));
    }
    return out;
  };
}

std::vector<::testing::AssertionResult> shard_checks(const ch10::ShardRunFn& run) {
  testing::SeededRng rng;
  return {ch10::shards_match(run, ch10::worked_example_shards()),
          ch10::shards_match(run, ch10::random_shards(rng, ch10::ShardKind::column_parallel)),
          ch10::shards_match(run, ch10::random_shards(rng, ch10::ShardKind::row_parallel))};
}

TEST(WrongCh10Shard, TheRightBlocksPass) {
  for (const auto& result : shard_checks(shard_runner(block_of_rows, block_of_columns))) EXPECT_TRUE(result);
}

TEST(WrongCh10Shard, AColumnParallelShardOfColumnsIsRejected) {
  const auto results = shard_checks(shard_runner(columns_for_rows, block_of_columns));
  expect_rejected(results[0], "the block of COLUMNS of W");
  EXPECT_FALSE(results[1]) << "the random matrices must catch it too";
  EXPECT_TRUE(results[2]) << "the row-parallel shard is right";
}

TEST(WrongCh10Shard, ARowParallelShardOfTheNextRankIsRejected) {
  const auto results = shard_checks(shard_runner(block_of_rows, next_ranks_columns));
  expect_rejected(results[0], "rank 1's block of columns, not rank 0's");
  EXPECT_FALSE(results[2]) << "the random matrices must catch it too";
}

// ---- 10.2 ----

int64_t mod(int64_t x, int64_t p) { return ((x % p) + p) % p; }

// A ring after the contract, with the mistakes it can be given.
struct RingOptions {
  bool all_gather = true;      // false: the reduce-scatter only
  bool floor_chunks = false;   // chunks of ⌊n/p⌋: [c · (n/p), (c + 1) · (n/p))
  bool everyone_sends_first = false;
};

void ring(student::Link& link, std::span<float> data, const RingOptions& o) {
  const int64_t p = link.size(), r = link.rank(), n = int64_t(data.size());
  if (p == 1) return;
  const int next = int((r + 1) % p), prev = int((r + p - 1) % p);
  const auto chunk = [&](int64_t c) {
    const int64_t begin = o.floor_chunks ? c * (n / p) : c * n / p;
    const int64_t end = o.floor_chunks ? (c + 1) * (n / p) : (c + 1) * n / p;
    return data.subspan(size_t(begin), size_t(end - begin));
  };
  const auto step = [&](std::span<const float> out, std::span<float> in) {
    if (r % 2 == 0 || o.everyone_sends_first) {
      link.send(out, next);
      link.recv(in, prev);
    } else {
      link.recv(in, prev);
      link.send(out, next);
    }
  };
  std::vector<float> scratch(size_t((n + p - 1) / p));
  for (int64_t s = 0; s + 1 < p; ++s) {
    const std::span<float> mine = chunk(mod(r - s - 1, p));
    const std::span<float> received(scratch.data(), mine.size());
    step(chunk(mod(r - s, p)), received);
    for (size_t i = 0; i < mine.size(); ++i) mine[i] += received[i];
  }
  if (!o.all_gather) return;
  for (int64_t s = 0; s + 1 < p; ++s) step(chunk(mod(r + 1 - s, p)), chunk(mod(r - s, p)));
}

ch10::RingRunFn ring_with(const RingOptions& o) {
  return ch10::ring_runner([o](student::Link& link, std::span<float> data) { ring(link, data, o); });
}

// Everything gathered at rank 0, added there, and sent back to every rank.
void gather_at_root(student::Link& link, std::span<float> data) {
  const int p = link.size(), r = link.rank();
  if (p == 1) return;
  if (r == 0) {
    std::vector<float> theirs(data.size());
    for (int q = 1; q < p; ++q) {
      link.recv(theirs, q);
      for (size_t i = 0; i < data.size(); ++i) data[i] += theirs[i];
    }
    for (int q = 1; q < p; ++q) link.send(data, q);
  } else {
    link.send(data, 0);
    link.recv(data, 0);
  }
}

// Every rank's whole data passed around the ring; each rank adds what arrives to its own, in the
// order it arrives (starting from its own: every rank rounds in its own order).
void everyone_adds_up(student::Link& link, std::span<float> data) {
  const int p = link.size(), r = link.rank();
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  std::vector<float> passing(data.begin(), data.end()), arriving(data.size());
  for (int s = 0; s + 1 < p; ++s) {
    if (r % 2 == 0) {
      link.send(passing, next);
      link.recv(arriving, prev);
    } else {
      link.recv(arriving, prev);
      link.send(passing, next);
    }
    for (size_t i = 0; i < data.size(); ++i) data[i] += arriving[i];
    passing.swap(arriving);
  }
}

// Every check of the graded ring tests, on @p run.
std::vector<::testing::AssertionResult> ring_checks(const ch10::RingRunFn& run) {
  testing::SeededRng rng;
  return {ch10::ring_sums_match(run, ch10::worked_example_rings()), ch10::ring_sums_match(run, ch10::small_rings(rng)),
          ch10::ring_sums_match(run, ch10::random_rings(rng)),
          ch10::ring_ranks_agree(run, ch10::random_rings(rng, false)),
          ch10::ring_traffic_within(run, ch10::every_ring(rng))};
}

TEST(WrongCh10Ring, TheContractsRingPasses) {
  for (const auto& result : ring_checks(ring_with({}))) EXPECT_TRUE(result);
}

TEST(WrongCh10Ring, AReduceScatterWithoutTheAllGatherIsRejected) {
  const auto results = ring_checks(ring_with({.all_gather = false}));
  expect_rejected(results[0], "the all-gather is missing");
  EXPECT_FALSE(results[2]) << "the random data must catch it too";
}

TEST(WrongCh10Ring, ChunksThatLeaveTheTailOutAreRejected) {
  const auto results = ring_checks(ring_with({.floor_chunks = true}));
  expect_rejected(results[0], "chunks of ⌊n/p⌋ = 2 leave them out");
  EXPECT_FALSE(results[2]) << "the random data (n = 7, 1000, 65537 over 3) must catch it too";
}

TEST(WrongCh10Ring, GatheringEverythingAtRankZeroIsRejectedByTheTraffic) {
  const ch10::RingRunFn run = ch10::ring_runner(gather_at_root);
  const auto results = ring_checks(run);
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(results[i]) << "its sums are right and every rank has rank 0's bits";
  testing::SeededRng rng;
  expect_rejected(ch10::ring_traffic_within(run, {ch10::random_ring(rng, 4, 65537, "fresh data")}),
                  "everything gathered at one rank and sent back");
  EXPECT_FALSE(results[4]) << "the graded traffic test must catch it";
}

TEST(WrongCh10Ring, EveryRankSendingFirstIsAReportedDeadlock) {
  // With rendezvous sends nothing moves; the world must say so (not hang), naming the ranks.
  const auto results = ring_checks(ring_with({.everyone_sends_first = true}));
  expect_rejected(results[0], "deadlock: every rank that has not returned waits for another");
  EXPECT_THAT(std::string(results[0].message()), HasSubstr("rank 1 waits in send(")) << results[0].message();
  EXPECT_THAT(std::string(results[0].message()), HasSubstr("let even ranks send first"));
}

TEST(WrongCh10Ring, EveryRankAddingUpInItsOwnOrderIsRejected) {
  const ch10::RingRunFn run = ch10::ring_runner(everyone_adds_up);
  const auto results = ring_checks(run);
  EXPECT_TRUE(results[2]) << "its sums are right, within the rounding";
  expect_rejected(results[3], "end with different bits");
  expect_rejected(results[4], "floats from each rank");
}

TEST(WrongCh10Ring, AMessageOfTheWrongSizeIsReportedNamingBothRanks) {
  // Rank 1 receives one float more than rank 0 sends.
  const ch10::RingRunFn run = ch10::ring_runner([](student::Link& link, std::span<float> data) {
    std::vector<float> buffer(data.size() + (link.rank() == 1 ? 1 : 0));
    if (link.rank() == 0) link.send(data, 1);
    if (link.rank() == 1) link.recv(buffer, 0);
  });
  testing::SeededRng rng;
  expect_rejected(ch10::ring_sums_match(run, {ch10::random_ring(rng, 2, 5, "fresh data")}),
                  "rank 1 called recv(6 floats, from rank 0), but rank 0 sent it 5 floats");
}

}  // namespace
}  // namespace inferlab
