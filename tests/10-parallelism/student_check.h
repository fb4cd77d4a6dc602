#pragma once
// The checks of chapter 10's exercises (exercises/10-parallelism/ch10.h): the graded tests
// (test_student.cpp) run them on the student's functions, and
// tests/wrong/wrong_ch10_exercises.cpp on deliberately wrong versions that they must reject.
//
// Each check draws its questions first (hand-worked cases that each teach one rule, or fresh
// random inputs from a SeededRng: the seed is printed on failure), hands ALL of them at once to
// the code under test (the graded test runs the batch in one sandboxed child process, the wrong
// fixtures in this one), and only then computes the expected answers and compares, answer by
// answer:
//   10.1 each rank's shard bit for bit against the lab's Weight::take_rows / take_columns
//        (kernels/layers/weight.h) and a copy loop written here, which must agree (a lab bug
//        otherwise), and the shards' products — side by side, or summed — against W · x in float64;
//   10.2 every rank's result against the float64 sum of every rank's input, every rank's bits
//        against every other's, and the traffic the thread world's Link counted (thread_world.h:
//        the ranks are threads, in the sandboxed child for the graded test).
// The first wrong answer fails the check with the input, the expected and the returned answer and
// — where it recognises one — the usual mistake behind it.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/tensor.h"
#include "kernels/layers/weight.h"
#include "tests/10-parallelism/thread_world.h"
#include "tests/support/seeded.h"
#include "tests/support/student_answers.h"

namespace inferlab::testing::ch10 {

// A batch's answers, and why they stop early: tests/support/student_answers.h.
using testing::Answers;
using testing::missing_answer;

/// A number for a message: the shortest text that reads back to the same double.
inline std::string show(double x) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, result.ptr);
}

/// A float for a message: the shortest text that reads back to the same float.
inline std::string show(float x) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, result.ptr);
}

/// @p n fresh normal floats times @p scale.
inline std::vector<float> normal_floats(SeededRng& rng, int64_t n, float scale = 1.0f) {
  std::vector<float> v(size_t(std::max<int64_t>(n, 0)));
  rng.fill_normal(v, 0.0f, scale);
  return v;
}

/// Whether @p a and @p b hold the same bits.
inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

// ==== 10.1 sharding a weight matrix ===========================================================

/// Which shard a case asks for.
enum class ShardKind { column_parallel, row_parallel };

inline const char* name_of(ShardKind kind) {
  return kind == ShardKind::column_parallel ? "column_parallel_shard" : "row_parallel_shard";
}

/// One matrix to shard over @p ranks ranks (every rank's shard is asked for), and an input x to
/// multiply the shards by; a hand case also gives each rank's shard worked out by hand.
struct ShardCase {
  ShardKind kind = ShardKind::column_parallel;
  int64_t out = 0, in = 0;
  int ranks = 1;
  std::vector<float> w;  ///< [out][in], row-major
  std::vector<float> x;  ///< [in]
  std::string lesson;
  std::vector<std::vector<float>> hand;  ///< empty: no hand answer; else one shard per rank
};

/// Every rank's shard, rank 0 first.
using Shards = std::vector<std::vector<float>>;
/// Runs a batch of cases through the code under test.
using ShardRunFn = std::function<Answers<Shards>(std::span<const ShardCase> cases)>;

/// The rows [begin, end) of @p w — the contract's column-parallel block of rank @p rank, written
/// here (a loop, element by element).
inline std::vector<float> rows_of(const ShardCase& c, int rank) {
  std::vector<float> out;
  const int64_t rows = c.out / c.ranks;
  for (int64_t o = rank * rows; o < (rank + 1) * rows; ++o)
    for (int64_t i = 0; i < c.in; ++i) out.push_back(c.w[size_t(o * c.in + i)]);
  return out;
}

/// The columns of rank @p rank's block of every row, as [out][in/ranks] (the row-parallel block).
inline std::vector<float> columns_of(const ShardCase& c, int rank) {
  std::vector<float> out;
  const int64_t cols = c.in / c.ranks;
  for (int64_t o = 0; o < c.out; ++o)
    for (int64_t i = rank * cols; i < (rank + 1) * cols; ++i) out.push_back(c.w[size_t(o * c.in + i)]);
  return out;
}

/// The lab's copy of the same block: Weight::take_rows or take_columns on an fp32 Weight.
inline std::vector<float> lab_shard(const ShardCase& c, int rank) {
  const Weight w(Tensor<float>({c.out, c.in}, c.w));
  Weight shard;
  if (c.kind == ShardKind::column_parallel) {
    const int64_t rows = c.out / c.ranks;
    const std::pair<int64_t, int64_t> range{rank * rows, (rank + 1) * rows};
    shard = w.take_rows(std::span(&range, 1));
  } else {
    const int64_t cols = c.in / c.ranks;
    shard = w.take_columns(rank * cols, (rank + 1) * cols);
  }
  const std::span<const float> f = shard.f32().span();
  return std::vector<float>(f.begin(), f.end());
}

/// The shard the contract asks for (the lab's and the loop's, checked equal).
inline std::vector<float> expected_shard(const ShardCase& c, int rank) {
  std::vector<float> lab = lab_shard(c, rank);
  const std::vector<float> model = c.kind == ShardKind::column_parallel ? rows_of(c, rank) : columns_of(c, rank);
  if (!same_bits(lab, model))
    ADD_FAILURE() << "the lab's Weight::" << (c.kind == ShardKind::column_parallel ? "take_rows" : "take_columns")
                  << " disagrees with the check's copy loop (" << c.out << " × " << c.in << ", rank " << rank << " of "
                  << c.ranks << "): a lab bug";
  return lab;
}

/// What a wrong shard is, when it is exactly one of the classic slips ("" when none).
inline std::string shard_mistake(const ShardCase& c, int rank, std::span<const float> got) {
  const int p = c.ranks;
  if (c.kind == ShardKind::column_parallel) {
    if (c.in % p == 0 && same_bits(got, columns_of(c, rank)))
      return "the block of COLUMNS of W (input features): that is the row-parallel shard. A column-parallel layer "
             "gives each rank some OUTPUTS whole; with W stored [out][in] (y = W · x) they are W's ROWS — "
             "Megatron's \"columns\" are those of A = Wᵀ in Y = X · A";
    for (const int other : {rank + 1, rank - 1})
      if (other >= 0 && other < p && same_bits(got, rows_of(c, other)))
        return "rank " + std::to_string(other) + "'s block of rows, not rank " + std::to_string(rank) +
               "'s: rank r holds the rows [r · out/p, (r + 1) · out/p)";
  } else {
    if (c.out % p == 0 && same_bits(got, rows_of(c, rank)))
      return "the block of ROWS of W (whole outputs): that is the column-parallel shard. A row-parallel layer "
             "gives each rank a slice of the INPUTS, W's columns [r · in/p, (r + 1) · in/p) of every row";
    for (const int other : {rank + 1, rank - 1})
      if (other >= 0 && other < p && same_bits(got, columns_of(c, other)))
        return "rank " + std::to_string(other) + "'s block of columns, not rank " + std::to_string(rank) +
               "'s: rank r holds the columns [r · in/p, (r + 1) · in/p)";
    // The right block, stored column by column ([in/p][out]).
    const std::vector<float> right = columns_of(c, rank);
    const int64_t cols = c.in / p;
    if (got.size() == right.size() && cols > 1 && c.out > 1) {
      bool transposed = true;
      for (int64_t o = 0; o < c.out && transposed; ++o)
        for (int64_t i = 0; i < cols && transposed; ++i)
          transposed = got[size_t(i * c.out + o)] == right[size_t(o * cols + i)];
      if (transposed)
        return "the right block stored transposed, [in/p][out]: the shard is a matrix [out][in/p], row-major like "
               "W — each output's in/p weights contiguous";
    }
  }
  return "";
}

/// y = W · x in float64, and Σ |W[o][i] · x[i]| per output (the scale of its rounding).
inline std::pair<std::vector<double>, std::vector<double>> product(std::span<const float> w, int64_t out, int64_t in,
                                                                   std::span<const float> x) {
  std::vector<double> y(size_t(out), 0.0), scale(size_t(out), 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      const double term = double(w[size_t(o * in + i)]) * double(x[size_t(i)]);
      y[size_t(o)] += term;
      scale[size_t(o)] += std::fabs(term);
    }
  return {y, scale};
}

/// The shards' products put together as the layer does — side by side (column-parallel), or each
/// on its slice of x and summed (row-parallel) — in float64: what the ranks compute of y.
inline std::vector<double> product_of_shards(const ShardCase& c, const Shards& shards) {
  const int p = c.ranks;
  std::vector<double> y;
  if (c.kind == ShardKind::column_parallel) {
    const int64_t rows = c.out / p;
    for (int r = 0; r < p; ++r) {
      const std::vector<double> part = product(shards[size_t(r)], rows, c.in, c.x).first;
      y.insert(y.end(), part.begin(), part.end());
    }
  } else {
    const int64_t cols = c.in / p;
    y.assign(size_t(c.out), 0.0);
    for (int r = 0; r < p; ++r) {
      const std::span<const float> slice = std::span(c.x).subspan(size_t(r * cols), size_t(cols));
      const std::vector<double> part = product(shards[size_t(r)], c.out, cols, slice).first;
      for (int64_t o = 0; o < c.out; ++o) y[size_t(o)] += part[size_t(o)];
    }
  }
  return y;
}

inline std::string show_case(const ShardCase& c) {
  return std::string(name_of(c.kind)) + " of W [" + std::to_string(c.out) + "][" + std::to_string(c.in) + "] over " +
         std::to_string(c.ranks) + (c.ranks == 1 ? " rank" : " ranks") + " (" + c.lesson + ")";
}

/// Every rank's shard of every case is the contract's block — the hand answer, the lab's copy —
/// and the shards' products make y = W · x.
inline ::testing::AssertionResult shards_match(const ShardRunFn& run, const std::vector<ShardCase>& cases) {
  const Answers<Shards> got = run(cases);
  for (size_t k = 0; k < cases.size(); ++k) {
    const ShardCase& c = cases[k];
    const std::string where = show_case(c);
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << where << "\n  no answer: " << missing;
    const Shards& shards = got.answers[k];
    if (shards.size() != size_t(c.ranks))
      return ::testing::AssertionFailure() << where << ": " << shards.size() << " shards came back, expected one per rank";
    const int64_t shard_size = c.kind == ShardKind::column_parallel ? (c.out / c.ranks) * c.in : c.out * (c.in / c.ranks);
    for (int r = 0; r < c.ranks; ++r) {
      const std::vector<float>& mine = shards[size_t(r)];
      const std::string rank = where + ", rank " + std::to_string(r);
      if (int64_t(mine.size()) != shard_size)
        return ::testing::AssertionFailure()
               << rank << ": returned " << mine.size() << " floats, expected " << shard_size << " ("
               << (c.kind == ShardKind::column_parallel ? "out/p · in = " + std::to_string(c.out / c.ranks) + " · " +
                                                              std::to_string(c.in)
                                                        : "out · in/p = " + std::to_string(c.out) + " · " +
                                                              std::to_string(c.in / c.ranks))
               << ")";
      const std::vector<float> want = c.hand.empty() ? expected_shard(c, r) : c.hand[size_t(r)];
      if (!c.hand.empty() && !same_bits(want, expected_shard(c, r)))
        ADD_FAILURE() << rank << ": the hand answer disagrees with the lab's copy (a bug of the check)";
      if (same_bits(mine, want)) continue;
      size_t first = 0;
      while (first < want.size() && std::memcmp(&mine[first], &want[first], sizeof(float)) == 0) ++first;
      const int64_t width = c.kind == ShardKind::column_parallel ? c.in : c.in / c.ranks;
      ::testing::AssertionResult failure = ::testing::AssertionFailure();
      failure << rank << ": element " << first << " (shard row " << int64_t(first) / width << ", column "
              << int64_t(first) % width << ") is " << show(mine[first]) << ", expected " << show(want[first])
              << " — " << (c.kind == ShardKind::column_parallel ? "Weight::take_rows" : "Weight::take_columns")
              << " of the same block gives it";
      if (const std::string mistake = shard_mistake(c, r, mine); !mistake.empty())
        failure << "\n  your shard is exactly " << mistake;
      return failure;
    }
    // The shards are the lab's blocks; what the ranks compute of y with them is W · x.
    const auto [y, scale] = product(c.w, c.out, c.in, c.x);
    const std::vector<double> ranks_y = product_of_shards(c, shards);
    for (int64_t o = 0; o < c.out; ++o)
      if (!(std::fabs(ranks_y[size_t(o)] - y[size_t(o)]) <= 1e-12 * scale[size_t(o)] + 1e-300))
        return ::testing::AssertionFailure()
               << where << ": the shards' outputs " << (c.kind == ShardKind::column_parallel ? "side by side" : "summed")
               << " give y[" << o << "] = " << show(ranks_y[size_t(o)]) << ", W · x gives " << show(y[size_t(o)]);
  }
  return ::testing::AssertionSuccess();
}

/// ch10.h's worked example: W [4][6], W[o][i] = 10 · o + i, over 2 ranks, both shards.
inline std::vector<ShardCase> worked_example_shards() {
  ShardCase c;
  c.out = 4, c.in = 6, c.ranks = 2;
  for (int64_t o = 0; o < 4; ++o)
    for (int64_t i = 0; i < 6; ++i) c.w.push_back(float(10 * o + i));
  c.x = {1, -2, 3, 0.5f, -1, 2};
  c.lesson = "ch10.h's worked example";
  ShardCase column = c, row = c;
  column.kind = ShardKind::column_parallel;
  column.hand = {{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}, {20, 21, 22, 23, 24, 25, 30, 31, 32, 33, 34, 35}};
  row.kind = ShardKind::row_parallel;
  row.hand = {{0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, {3, 4, 5, 13, 14, 15, 23, 24, 25, 33, 34, 35}};
  return {column, row};
}

/// Random fp32 matrices of odd shapes for @p kind over p = 1 … 5: the dimension cut a multiple of
/// p (odd blocks), the other one odd — divisible by p or not —, @p per_p matrices each.
inline std::vector<ShardCase> random_shards(SeededRng& rng, ShardKind kind, int per_p = 4) {
  std::vector<ShardCase> cases;
  for (int p = 1; p <= 5; ++p)
    for (int m = 0; m < per_p; ++m) {
      ShardCase c;
      c.kind = kind;
      c.ranks = p;
      const int64_t cut = p * (2 * rng.integer(0, 9) + 1);                  // p · an odd block
      const int64_t other = m % 2 == 0 ? 2 * rng.integer(0, 33) + 1 : p * (2 * rng.integer(0, 6) + 1);
      (kind == ShardKind::column_parallel ? c.out : c.in) = cut;
      (kind == ShardKind::column_parallel ? c.in : c.out) = other;
      c.w = normal_floats(rng, c.out * c.in);
      c.x = normal_floats(rng, c.in);
      c.lesson = "a random matrix (" + std::to_string(m + 1) + " of " + std::to_string(per_p) + " over " +
                 std::to_string(p) + ")";
      cases.push_back(std::move(c));
    }
  return cases;
}

/// A call that must be refused — naming @ref name and @ref value — or, when name is empty, must
/// not be (the dimension that is not cut need not be divisible).
struct BadShardCall {
  ShardKind kind;
  int64_t out, in;
  int rank, ranks;
  int64_t w_size;     ///< the size of the span passed (out · in when right)
  std::string name;   ///< the argument the message must name ("" : the call must succeed)
  std::string value;  ///< its value as the message prints it
  std::string lesson;
};

/// What the code under test did with a call: "" when it returned, else the message of its
/// std::invalid_argument (anything else it throws stops the batch).
using RefusalRunFn = std::function<Answers<std::string>(std::span<const BadShardCall> calls)>;

/// Refused prefix: a returned call is answered "returned", a refused one "refused: <message>".
inline const char* kReturned = "returned";
inline const char* kRefused = "refused: ";

/// The refusals of ch10.h's rules, each naming its argument and value, and the calls to allow.
inline std::vector<BadShardCall> bad_shard_calls() {
  using K = ShardKind;
  std::vector<BadShardCall> calls;
  for (const K k : {K::column_parallel, K::row_parallel}) {
    calls.push_back({k, 6, 6, 0, 0, 36, "ranks", "0", "no ranks"});
    calls.push_back({k, 6, 6, 0, -2, 36, "ranks", "-2", "a negative number of ranks"});
    calls.push_back({k, 6, 6, 3, 3, 36, "rank", "3", "rank = ranks: the ranks are 0 … ranks − 1"});
    calls.push_back({k, 6, 6, -1, 3, 36, "rank", "-1", "a negative rank"});
    calls.push_back({k, 0, 6, 0, 1, 0, "out", "0", "no outputs"});
    calls.push_back({k, 6, -3, 0, 1, 0, "in", "-3", "a negative number of inputs"});
    calls.push_back({k, 6, 6, 1, 2, 35, "w.size()", "35", "W one float short"});
    calls.push_back({k, 6, 6, 1, 2, 37, "w.size()", "37", "W one float too long"});
  }
  calls.push_back({K::column_parallel, 10, 9, 0, 3, 90, "out", "10", "column-parallel cuts the outputs: 3 ∤ 10"});
  calls.push_back({K::row_parallel, 9, 10, 0, 3, 90, "in", "10", "row-parallel cuts the inputs: 3 ∤ 10"});
  calls.push_back({K::column_parallel, 9, 10, 2, 3, 90, "", "", "column-parallel: the inputs (10) need not divide by 3"});
  calls.push_back({K::row_parallel, 10, 9, 2, 3, 90, "", "", "row-parallel: the outputs (10) need not divide by 3"});
  calls.push_back({K::row_parallel, 7, 1, 0, 1, 7, "", "", "one rank, one input column"});
  return calls;
}

/// Every call of @p calls refused (or not) as the contract says, naming "<name> = <value>".
inline ::testing::AssertionResult refusals_match(const RefusalRunFn& run, const std::vector<BadShardCall>& calls) {
  const Answers<std::string> got = run(calls);
  for (size_t k = 0; k < calls.size(); ++k) {
    const BadShardCall& c = calls[k];
    const std::string where = std::string(name_of(c.kind)) + "(w of " + std::to_string(c.w_size) + " floats, out " +
                              std::to_string(c.out) + ", in " + std::to_string(c.in) + ", rank " +
                              std::to_string(c.rank) + ", ranks " + std::to_string(c.ranks) + ") — " + c.lesson;
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << where << "\n  no answer: " << missing;
    const std::string& answer = got.answers[k];
    if (c.name.empty()) {
      if (answer != kReturned)
        return ::testing::AssertionFailure() << where << ": must return its shard, but it was " << answer;
      continue;
    }
    if (answer == kReturned)
      return ::testing::AssertionFailure() << where << ": returned, expected std::invalid_argument naming \"" << c.name
                                           << " = " << c.value << "\" (common/check.h's require())";
    const std::string needle = c.name + " = " + c.value;
    if (answer.find(needle) == std::string::npos)
      return ::testing::AssertionFailure() << where << ": " << answer << "\n  the message must name the argument and its "
                                           << "value, \"" << needle << ": <rule>\" (require(ok, \"" << c.name
                                           << "\", value, rule)), the first bad one in ch10.h's order";
  }
  return ::testing::AssertionSuccess();
}

// ==== 10.2 the ring all-reduce ================================================================

/// Every rank's input to one all-reduce; a hand case also gives the sum worked out by hand.
struct RingCase {
  std::vector<std::vector<float>> inputs;  ///< per rank, n floats each
  std::string lesson;
  std::vector<float> hand;  ///< empty: no hand answer; else the sum (exact in fp32)
  int ranks() const { return int(inputs.size()); }
  int64_t n() const { return inputs.empty() ? 0 : int64_t(inputs[0].size()); }
};

/// Runs a batch of cases through the code under test (each on a thread world of its ranks).
using RingRunFn = std::function<Answers<WorldResult>(std::span<const RingCase> cases)>;

/// Runs a batch through @p ring in this process (what the wrong fixtures pass to the checks).
inline RingRunFn ring_runner(const RingFn& ring) {
  return [ring](std::span<const RingCase> cases) {
    Answers<WorldResult> out;
    for (const RingCase& c : cases) {
      try {
        out.answers.push_back(run_ring_world(c.inputs, ring));
      } catch (const std::exception& e) {
        out.error = std::string("it threw: ") + e.what();
        break;
      }
    }
    return out;
  };
}

/// ⌈n/p⌉.
inline int64_t chunk_bound(int64_t n, int p) { return (n + p - 1) / p; }

inline std::string show_ring(const RingCase& c) {
  return "n = " + std::to_string(c.n()) + " over p = " + std::to_string(c.ranks()) + " (" + c.lesson + ")";
}

/// Why got's sums are wrong (with the usual mistake when it shows), or "" when every rank's every
/// element is within the rounding of p − 1 fp32 additions of the float64 sum.
inline std::string ring_sum_problem(const RingCase& c, const WorldResult& got) {
  const int p = c.ranks();
  const int64_t n = c.n();
  if (got.data.size() != size_t(p)) return std::to_string(got.data.size()) + " ranks' data came back";
  std::vector<double> exact(size_t(n), 0.0), magnitude(size_t(n), 0.0);
  for (const std::vector<float>& x : c.inputs)
    for (int64_t i = 0; i < n; ++i) exact[size_t(i)] += x[size_t(i)], magnitude[size_t(i)] += std::fabs(x[size_t(i)]);
  // p − 1 fp32 additions in any order: each rounds by at most 2⁻²⁴ of a partial sum ≤ Σ|x|.
  const auto tolerance = [&](int64_t i) { return 1.01 * double(p - 1) * 0x1p-24 * magnitude[size_t(i)] + 1e-37; };
  const auto right = [&](float v, int64_t i) {
    if (!c.hand.empty()) return v == c.hand[size_t(i)];
    return std::fabs(double(v) - exact[size_t(i)]) <= tolerance(i);
  };
  bool tail_only = n % p != 0, one_chunk_each = n >= p && p > 1;
  std::string first;
  for (int r = 0; r < p; ++r) {
    const std::vector<float>& mine = got.data[size_t(r)];
    if (int64_t(mine.size()) != n) return "rank " + std::to_string(r) + "'s data changed size";
    int64_t wrong = 0, own = 0, good = 0, first_wrong = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (right(mine[size_t(i)], i)) {
        ++good;
        continue;
      }
      ++wrong;
      if (first_wrong < 0) first_wrong = i;
      if (mine[size_t(i)] == c.inputs[size_t(r)][size_t(i)]) ++own;
      if (i < p * (n / p)) tail_only = false;
    }
    if (good > chunk_bound(n, p)) one_chunk_each = false;
    if (wrong == 0 || !first.empty()) continue;
    const int64_t i = first_wrong;
    int64_t c_of_i = 0;  // the contract's chunk c holds [c · n / p, (c + 1) · n / p)
    while ((c_of_i + 1) * n / p <= i) ++c_of_i;
    first = "rank " + std::to_string(r) + ", element " + std::to_string(i) + " (in chunk " + std::to_string(c_of_i) +
            " = [" + std::to_string(c_of_i * n / p) + ", " + std::to_string((c_of_i + 1) * n / p) + ")): got " +
            show(mine[size_t(i)]) + ", the sum over the ranks is " +
            (c.hand.empty() ? show(exact[size_t(i)]) + " (float64; fp32 rounding allows ±" + show(tolerance(i)) + ")"
                            : show(c.hand[size_t(i)]) + " (exact)") +
            "; on this rank " + std::to_string(good) + " of " + std::to_string(n) + " elements are the sum, " +
            std::to_string(own) + " are still its own input" +
            (mine[size_t(i)] == c.inputs[size_t(r)][size_t(i)] ? " (this one does)" : "");
  }
  if (first.empty()) return "";
  if (tail_only)
    first += "\n  only the last n mod p = " + std::to_string(n % p) + " elements are wrong: chunks of ⌊n/p⌋ = " +
             std::to_string(n / p) + " leave them out. Chunk c is [c · n / p, (c + 1) · n / p): the chunks cover "
             "[0, n), the last one ends at n";
  else if (one_chunk_each)
    first += "\n  each rank holds the complete sum on at most one chunk (⌈n/p⌉ = " + std::to_string(chunk_bound(n, p)) +
             " elements): that is where a reduce-scatter leaves the sums — the all-gather is missing (p − 1 more "
             "steps, each rank sending the complete chunk it holds, or last received, to the next, which COPIES it)";
  return first;
}

/// Every rank ends with the sum of every rank's input (within p − 1 fp32 roundings).
inline ::testing::AssertionResult ring_sums_match(const RingRunFn& run, const std::vector<RingCase>& cases) {
  const Answers<WorldResult> got = run(cases);
  for (size_t k = 0; k < cases.size(); ++k) {
    const std::string where = show_ring(cases[k]);
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << where << "\n  no answer: " << missing;
    if (const std::string problem = ring_sum_problem(cases[k], got.answers[k]); !problem.empty())
      return ::testing::AssertionFailure() << where << ": " << problem;
  }
  return ::testing::AssertionSuccess();
}

/// The sums are right and every rank holds the same bits as rank 0.
inline ::testing::AssertionResult ring_ranks_agree(const RingRunFn& run, const std::vector<RingCase>& cases) {
  const Answers<WorldResult> got = run(cases);
  for (size_t k = 0; k < cases.size(); ++k) {
    const RingCase& c = cases[k];
    const std::string where = show_ring(c);
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << where << "\n  no answer: " << missing;
    const WorldResult& w = got.answers[k];
    if (const std::string problem = ring_sum_problem(c, w); !problem.empty())
      return ::testing::AssertionFailure() << where << ": " << problem;
    for (int r = 1; r < c.ranks(); ++r) {
      if (same_bits(w.data[size_t(r)], w.data[0])) continue;
      size_t i = 0;
      while (std::memcmp(&w.data[size_t(r)][i], &w.data[0][i], sizeof(float)) == 0) ++i;
      return ::testing::AssertionFailure()
             << where << ": rank " << r << " and rank 0 end with different bits at element " << i << " ("
             << show(w.data[size_t(r)][i]) << " and " << show(w.data[0][i])
             << ", both within the rounding of the sum)\n  an all-gather COPIES each complete chunk around the ring, "
                "so every rank holds the same bits; a rank that adds the inputs up itself, in its own order, rounds "
                "its own way — and the split model's ranks, which must stay in step, drift apart";
    }
  }
  return ::testing::AssertionSuccess();
}

/// The sums are right and each rank sent what a ring sends: at most 2 (p − 1) messages of at most
/// 2 (p − 1) · ⌈n/p⌉ floats in all, only to the next rank, and received only from the previous.
inline ::testing::AssertionResult ring_traffic_within(const RingRunFn& run, const std::vector<RingCase>& cases) {
  const Answers<WorldResult> got = run(cases);
  for (size_t k = 0; k < cases.size(); ++k) {
    const RingCase& c = cases[k];
    const int p = c.ranks();
    const int64_t n = c.n();
    const std::string where = show_ring(c);
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << where << "\n  no answer: " << missing;
    const WorldResult& w = got.answers[k];
    if (const std::string problem = ring_sum_problem(c, w); !problem.empty())
      return ::testing::AssertionFailure() << where << ": " << problem;
    if (w.traffic.size() != size_t(p))
      return ::testing::AssertionFailure() << where << ": the traffic of " << w.traffic.size() << " ranks came back";
    const int64_t steps = 2 * int64_t(p - 1), bound = steps * chunk_bound(n, p);
    for (int r = 0; r < p; ++r) {
      const RankTraffic& t = w.traffic[size_t(r)];
      const std::string sent = "rank " + std::to_string(r) + " sent " + std::to_string(t.messages_sent) +
                               " messages of " + std::to_string(t.floats_sent) + " floats in all (the largest " +
                               std::to_string(t.largest_message) + ")";
      if (t.floats_sent > bound) {
        ::testing::AssertionResult failure = ::testing::AssertionFailure();
        failure << where << ": " << sent << "; a ring sends at most 2 (p − 1) · ⌈n/p⌉ = " << bound
                << " floats from each rank (2 (p − 1)/p · n, whatever p)";
        if (p >= 3 && t.sends_off_ring > 0 && t.floats_sent >= int64_t(p - 1) * n)
          failure << "\n  that is everything gathered at one rank and sent back from it: its link carries "
                     "(p − 1) · n floats each way, and more ranks make it worse — the ring's point is that no rank "
                     "sends more than its 2 (p − 1) chunks";
        else if (t.largest_message > chunk_bound(n, p))
          failure << "\n  a message larger than one chunk (⌈n/p⌉ = " << chunk_bound(n, p)
                  << "): each step sends one chunk, not the whole data — passing everything around the ring costs "
                     "every rank (p − 1) · n";
        return failure;
      }
      if (t.messages_sent > steps)
        return ::testing::AssertionFailure()
               << where << ": " << sent << "; a ring makes 2 (p − 1) = " << steps
               << " steps of one message each — every message costs the link's latency (the lesson's α), so send "
                  "each chunk whole, once a step";
      if (t.sends_off_ring > 0 || t.recvs_off_ring > 0)
        return ::testing::AssertionFailure()
               << where << ": rank " << r
               << (t.sends_off_ring > 0 ? " sent to rank " + std::to_string(t.first_off_ring_to)
                                        : " received from rank " + std::to_string(t.first_off_ring_from))
               << "; in a ring rank r sends only to (r + 1) % p = " << (r + 1) % p
               << " and receives only from (r − 1 + p) % p = " << (r + p - 1) % p;
    }
  }
  return ::testing::AssertionSuccess();
}

/// One case: every rank's input, fresh normal floats of one magnitude per case (10⁻³ … 10³).
inline RingCase random_ring(SeededRng& rng, int p, int64_t n, const std::string& lesson) {
  RingCase c;
  const float scale = float(std::pow(10.0, double(rng.integer(-3, 3))));
  for (int r = 0; r < p; ++r) c.inputs.push_back(normal_floats(rng, n, scale));
  c.lesson = lesson;
  return c;
}

/// ch10.h's worked example (p = 3, n = 7) and p = 2, n = 4, small integers: the sums are exact.
inline std::vector<RingCase> worked_example_rings() {
  RingCase three;
  three.inputs = {{1, 2, 3, 4, 5, 6, 7}, {10, 20, 30, 40, 50, 60, 70}, {100, 200, 300, 400, 500, 600, 700}};
  three.hand = {111, 222, 333, 444, 555, 666, 777};
  three.lesson = "ch10.h's worked example: chunks [0, 2), [2, 4), [4, 7)";
  RingCase two;
  two.inputs = {{1, -2, 3, -4}, {8, 16, -32, 64}};
  two.hand = {9, 14, -29, 60};
  two.lesson = "two ranks: two steps, one chunk each way each step";
  return {three, two};
}

/// n = 0, 1 and p − 1 over p = 1 … 5: empty chunks (each distinct size once).
inline std::vector<RingCase> small_rings(SeededRng& rng) {
  std::vector<RingCase> cases;
  for (int p = 1; p <= 5; ++p) {
    std::vector<int64_t> sizes = {0, 1, p - 1};
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    for (const int64_t n : sizes)
      cases.push_back(random_ring(rng, p, n, n == 0 ? "no data: every chunk empty" : "fewer floats than ranks"));
  }
  return cases;
}

/// n = 7, 1000, 65537 and one random size in [p, 3000] over p = 1 … 5 (@p with_one: p = 1 too).
inline std::vector<RingCase> random_rings(SeededRng& rng, bool with_one = true) {
  std::vector<RingCase> cases;
  for (int p = with_one ? 1 : 2; p <= 5; ++p) {
    for (const int64_t n : {int64_t(7), int64_t(1000), int64_t(65537)}) cases.push_back(random_ring(rng, p, n, "fresh data"));
    cases.push_back(random_ring(rng, p, rng.integer(p, 3000), "fresh data of a random size"));
  }
  return cases;
}

/// Every size the brief names — 0, 1, p − 1, 7, 1000, 65537 — over p = 1 … 5 (the traffic test's).
inline std::vector<RingCase> every_ring(SeededRng& rng) {
  std::vector<RingCase> cases = small_rings(rng);
  for (RingCase& c : random_rings(rng)) cases.push_back(std::move(c));
  return cases;
}

}  // namespace inferlab::testing::ch10
