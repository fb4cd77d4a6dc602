#pragma once
// The checks of chapter 12's exercises (exercises/12-speculative-decoding/ch12.h), on the engine's
// own types: the graded tests (test_student.cpp) run them on the student's functions, and
// tests/wrong/wrong_ch12_exercises.cpp on deliberately wrong versions that they must reject.
//
// Every check draws its questions first — hand cases that each teach one rule of the contract, or
// fresh random inputs from the caller's Rng (a SeededRng: the seed is printed on failure) — hands
// ALL of them at once to the code under test (the graded test runs the batch in one sandboxed
// child process, the wrong fixtures in this one), and only then computes the engine's answers
// (runtime/engine/speculative.h: propose_ngram, verify_rejection; runtime/paged/block_manager.h:
// BlockManager::truncate), checks that they give each answer written by hand (a lab bug
// otherwise), and compares. The first wrong answer fails the check with the input, the expected
// and the returned answer, and — where it recognises one — the usual mistake behind it.
// 12.2 is also graded by the distribution test of distribution_check.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "common/rng.h"
#include "runtime/engine/sampling.h"
#include "runtime/engine/speculative.h"
#include "runtime/paged/block_manager.h"
#include "tests/12-speculative-decoding/distribution_check.h"
#include "tests/support/student_answers.h"

namespace inferlab::paged {
// The pool behind a manager, to release the blocks a rollback under test says it freed (a friend
// of BlockManager; tests/06-paged-attention defines its own in its own programs).
struct BlockManagerTestAccess {
  static BlockPool& pool(BlockManager& manager) { return manager.pool_; }
};
}  // namespace inferlab::paged

namespace inferlab::testing::ch12 {

/// A list of ids for a message: "[4 5 7]".
template <class T>
std::string show_list(std::span<const T> values, size_t limit = 48) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < values.size() && i < limit; ++i) s << (i ? " " : "") << values[i];
  if (values.size() > limit) s << " … (" << values.size() << " in all)";
  s << "]";
  return s.str();
}
template <class T>
std::string show_list(const std::vector<T>& values) {
  return show_list(std::span<const T>(values));
}

using testing::answer_each;  // tests/support/student_answers.h: the wrong fixtures' in-process runner

// ==== 12.1 prompt lookup =======================================================================

/// One prompt-lookup question.
struct NgramCase {
  std::vector<int32_t> tokens;
  int64_t num_tokens = 3, max_ngram = 3, min_ngram = 1;
};

/// A question, what it teaches and — for a hand case — the guesses worked out by hand.
struct NgramQuestion {
  NgramCase input;
  std::string lesson;
  std::optional<std::vector<int32_t>> hand;
};

/// Runs a batch through the code under test: each answer is the guesses.
using NgramRunFn = std::function<Answers<std::vector<int32_t>>(std::span<const NgramCase>)>;

inline std::string describe(const NgramCase& c) {
  return "tokens " + show_list(c.tokens) + " (" + std::to_string(c.tokens.size()) + "), num_tokens " +
         std::to_string(c.num_tokens) + ", max_ngram " + std::to_string(c.max_ngram) + ", min_ngram " +
         std::to_string(c.min_ngram);
}

// Where the engine's answer comes from, in words: the n and the start j of the occurrence.
inline std::string ngram_reason(const NgramCase& c) {
  const int64_t size = int64_t(c.tokens.size());
  if (c.num_tokens == 0) return "num_tokens is 0: nothing to guess";
  for (int64_t n = std::min(c.max_ngram, size - 1); n >= c.min_ngram; --n)
    for (int64_t j = size - n - 1; j >= 0; --j)
      if (std::equal(c.tokens.end() - n, c.tokens.end(), c.tokens.begin() + j))
        return "the last " + std::to_string(n) + " tokens " +
               show_list(std::span<const int32_t>(c.tokens).last(size_t(n))) + " occur most recently at j = " +
               std::to_string(j) + " (no longer n-gram occurs earlier): the guesses are tokens[" +
               std::to_string(j + n) + ", " + std::to_string(std::min(j + n + c.num_tokens, size)) + ")";
  return "no n-gram of length " + std::to_string(c.min_ngram) + " … " +
         std::to_string(std::min(c.max_ngram, size - 1)) + " occurs earlier: no guess";
}

// The usual mistake behind @p got, when recognisable.
inline std::string ngram_mistake(const NgramCase& c, const std::vector<int32_t>& got) {
  const int64_t size = int64_t(c.tokens.size());
  for (int64_t n = std::min(c.max_ngram, size - 1); n >= c.min_ngram; --n)
    for (int64_t j = 0; j < size - n; ++j) {
      if (!std::equal(c.tokens.end() - n, c.tokens.end(), c.tokens.begin() + j)) continue;
      const int64_t from = j + n, to = std::min(from + c.num_tokens, size);
      const std::vector<int32_t> there(c.tokens.begin() + from, c.tokens.begin() + to);
      if (there == got) {
        for (int64_t later = j + 1; later < size - n; ++later)
          if (std::equal(c.tokens.end() - n, c.tokens.end(), c.tokens.begin() + later))
            return "\n  your guesses follow the occurrence at j = " + std::to_string(j) +
                   ", but a more recent one starts at j = " + std::to_string(later) + ": take the most recent";
        for (int64_t longer = std::min(c.max_ngram, size - 1); longer > n; --longer)
          for (int64_t k = 0; k < size - longer; ++k)
            if (std::equal(c.tokens.end() - longer, c.tokens.end(), c.tokens.begin() + k))
              return "\n  your guesses follow a " + std::to_string(n) + "-gram, but the last " + std::to_string(longer) +
                     " tokens occur earlier too: the longest n first";
      }
    }
  if (!got.empty() && int64_t(got.size()) > c.num_tokens)
    return "\n  more than num_tokens = " + std::to_string(c.num_tokens) + " guesses";
  return "";
}

/// @p run answers every question as the engine's propose_ngram() does.
inline ::testing::AssertionResult ngrams_match(const NgramRunFn& run, const std::vector<NgramQuestion>& questions) {
  std::vector<NgramCase> inputs;
  for (const NgramQuestion& q : questions) inputs.push_back(q.input);
  const Answers<std::vector<int32_t>> got = run(inputs);
  for (size_t k = 0; k < questions.size(); ++k) {
    const NgramQuestion& q = questions[k];
    const std::vector<int32_t> expected =
        engine::propose_ngram(q.input.tokens, q.input.num_tokens, q.input.max_ngram, q.input.min_ngram);
    if (q.hand && expected != *q.hand)
      return ::testing::AssertionFailure() << "lab bug: engine::propose_ngram gives " << show_list(expected)
                                           << " for the hand case \"" << q.lesson << "\", not " << show_list(*q.hand);
    const std::string input = (q.lesson.empty() ? "" : q.lesson + ":") + "\n  " + describe(q.input);
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << "no answer from propose_ngram: " << missing << "\n" << input;
    if (got.answers[k] == expected) continue;
    return ::testing::AssertionFailure() << "propose_ngram: " << input << "\n  expected " << show_list(expected)
                                         << "\n  got      " << show_list(got.answers[k]) << "\n  why: "
                                         << ngram_reason(q.input) << ngram_mistake(q.input, got.answers[k]);
  }
  return ::testing::AssertionSuccess();
}

inline NgramQuestion hand_ngram(std::vector<int32_t> tokens, int64_t num_tokens, int64_t max_ngram, int64_t min_ngram,
                                std::vector<int32_t> guesses, std::string lesson) {
  return {{std::move(tokens), num_tokens, max_ngram, min_ngram}, std::move(lesson), std::move(guesses)};
}

/// The hand cases: each rule of ch12.h's 12.1.
inline std::vector<NgramQuestion> hand_ngram_questions() {
  return {
      hand_ngram({5, 7, 9, 2, 5, 7, 9, 4, 5, 7, 9}, 3, 3, 1, {4, 5, 7},
                 "ch12.h's worked example: [5 7 9] occurs at 0 and 4, the most recent (4) decides"),
      hand_ngram({1, 2, 3, 1, 2}, 3, 3, 1, {3, 1, 2}, "ch12.h's worked example: no 3-gram match, the 2-gram [1 2] at 0"),
      hand_ngram({8, 8, 8}, 5, 3, 1, {8}, "an occurrence overlapping the suffix counts; the guesses stop at the end"),
      hand_ngram({4, 6, 1, 9, 9, 6, 4, 6}, 4, 3, 1, {1, 9, 9, 6},
                 "the 1-gram [6] occurs most recently at 5, but the 2-gram [4 6] occurs at 0: the longest n first"),
      hand_ngram({3, 1, 4, 1, 5, 9, 2, 6, 1}, 2, 3, 1, {5, 9},
                 "only the 1-gram [1] matches, most recently at 3: the guesses are cut at num_tokens = 2"),
      hand_ngram({3, 1, 4, 1, 5}, 3, 3, 1, {}, "the last token 5 never occurred before: no guess"),
      hand_ngram({2, 7, 2, 7}, 3, 3, 2, {2, 7}, "min_ngram 2: [2 7] occurs at 0"),
      hand_ngram({1, 2, 3, 9, 2, 3}, 3, 3, 3, {}, "min_ngram 3: only [9 2 3] may match, and it does not"),
      hand_ngram({1, 2, 1, 2, 1, 2}, 3, 1, 1, {1, 2},
                 "max_ngram 1: the 1-gram [2] occurs most recently at 3, the guesses cut at the end"),
      hand_ngram({6, 6, 6, 6}, 0, 3, 1, {}, "num_tokens 0: no guess"),
      hand_ngram({7}, 3, 3, 1, {}, "one token: nothing before it to match"),
      hand_ngram({}, 3, 3, 1, {}, "no tokens: no guess"),
  };
}

/// Random sequences over small vocabularies (2 … 8 tokens, so that matches happen), lengths 0 … 40,
/// num_tokens 0 … 6, max_ngram 1 … 5, min_ngram 1 … max_ngram; some sequences repeat a stretch.
inline std::vector<NgramQuestion> random_ngram_questions(Rng& rng, int count) {
  std::vector<NgramQuestion> questions;
  for (int i = 0; i < count; ++i) {
    NgramCase c;
    const int64_t vocab = rng.integer(2, 8), length = rng.integer(0, 40);
    for (int64_t t = 0; t < length; ++t) c.tokens.push_back(int32_t(rng.integer(0, vocab - 1)));
    if (length > 6 && rng.integer(0, 2) == 0) {  // quote an earlier stretch at the end
      const int64_t from = rng.integer(0, length - 4), span = rng.integer(2, 6);
      for (int64_t t = from; t < std::min(from + span, length); ++t) c.tokens.push_back(c.tokens[size_t(t)]);
    }
    c.num_tokens = rng.integer(0, 6);
    c.max_ngram = rng.integer(1, 5);
    c.min_ngram = rng.integer(1, c.max_ngram);
    questions.push_back({std::move(c), "random case " + std::to_string(i + 1) + " of " + std::to_string(count), {}});
  }
  return questions;
}

// ==== 12.2 the rejection sampler: equal to the engine's draws ===================================

/// One verification to run: p, q, the guesses and the rng_state before.
struct RejectionCase {
  std::vector<std::vector<double>> p, q;
  std::vector<int32_t> draft;
  uint64_t state = 0;
};

/// What a rejection sampler answered: its verification and the rng_state after.
struct RejectionAnswer {
  std::vector<int32_t> tokens;
  int64_t accepted = 0;
  uint64_t state = 0;
  bool operator==(const RejectionAnswer&) const = default;
};

/// A question, what it teaches, and — for a hand case — the tokens worked out by hand.
struct RejectionQuestion {
  RejectionCase input;
  std::string lesson;
  std::optional<std::vector<int32_t>> hand;
};

/// Runs a batch through the code under test.
using RejectionRunFn = std::function<Answers<RejectionAnswer>(std::span<const RejectionCase>)>;

inline std::string show_row(const std::vector<double>& row) {
  if (row.empty()) return "{} (a deterministic guess)";
  std::ostringstream s;
  s.precision(6);
  s << "{";
  for (size_t t = 0; t < row.size(); ++t) s << (t ? ", " : "") << row[t];
  s << "}";
  return s.str();
}

inline std::string describe(const RejectionCase& c) {
  std::ostringstream s;
  for (size_t i = 0; i < c.p.size(); ++i) s << "\n  p[" << i << "] " << show_row(c.p[i]);
  for (size_t i = 0; i < c.q.size(); ++i) s << "\n  q[" << i << "] " << show_row(c.q[i]);
  s << "\n  draft " << show_list(c.draft) << ", rng_state " << c.state << " (its uniforms: ";
  uint64_t state = c.state;
  for (size_t i = 0; i <= c.draft.size(); ++i) s << (i ? ", " : "") << engine::next_uniform(state);
  s << ")";
  return s.str();
}

inline std::string describe(const RejectionAnswer& a) {
  return "tokens " + show_list(a.tokens) + ", accepted " + std::to_string(a.accepted) + ", rng_state after " +
         std::to_string(a.state);
}

/// The engine's answer.
inline RejectionAnswer engine_rejection(const RejectionCase& c) {
  RejectionAnswer a;
  a.state = c.state;
  const engine::Verification v = engine::verify_rejection(c.p, c.q, c.draft, a.state);
  a.tokens = v.tokens;
  a.accepted = v.accepted;
  return a;
}

// The usual mistake behind @p got, when recognisable.
inline std::string rejection_mistake(const RejectionCase& c, const RejectionAnswer& expected, const RejectionAnswer& got) {
  if (got.tokens == expected.tokens && got.accepted == expected.accepted && got.state != expected.state) {
    uint64_t s = c.state;
    int draws = 0;
    while (s != got.state && draws < 64) engine::next_uniform(s), ++draws;
    return "\n  the tokens are right but rng_state is not where the engine leaves it" +
           (s == got.state ? " (" + std::to_string(draws) + " draws instead of the contract's " +
                                 std::to_string(expected.tokens.size() + (expected.accepted < int64_t(c.draft.size()))) + ")"
                           : std::string()) +
           ": one uniform per guess checked, one for the replacement or the bonus";
  }
  if (got.tokens.size() > expected.tokens.size() && expected.accepted < int64_t(c.draft.size()))
    return "\n  verification must stop at the first rejected guess (the later guesses were conditioned on a "
           "token that is not there)";
  if (expected.accepted == int64_t(c.draft.size()) && int64_t(got.tokens.size()) == expected.accepted)
    return "\n  every guess was accepted: p[γ] gives one more token, the bonus";
  return "";
}

/// @p run answers every question as the engine's verify_rejection() does: the tokens, the count
/// and the rng_state after.
inline ::testing::AssertionResult rejections_match(const RejectionRunFn& run,
                                                   const std::vector<RejectionQuestion>& questions) {
  std::vector<RejectionCase> inputs;
  for (const RejectionQuestion& q : questions) inputs.push_back(q.input);
  const Answers<RejectionAnswer> got = run(inputs);
  for (size_t k = 0; k < questions.size(); ++k) {
    const RejectionQuestion& q = questions[k];
    const RejectionAnswer expected = engine_rejection(q.input);
    if (q.hand && expected.tokens != *q.hand)
      return ::testing::AssertionFailure() << "lab bug: engine::verify_rejection gives " << describe(expected)
                                           << " for the hand case \"" << q.lesson << "\", not " << show_list(*q.hand);
    const std::string input = (q.lesson.empty() ? "" : q.lesson + ":") + describe(q.input);
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << "no answer from verify_rejection: " << missing << "\n" << input;
    if (got.answers[k] == expected) continue;
    return ::testing::AssertionFailure() << "verify_rejection: " << input << "\n  expected " << describe(expected)
                                         << "\n  got      " << describe(got.answers[k])
                                         << rejection_mistake(q.input, expected, got.answers[k]);
  }
  return ::testing::AssertionSuccess();
}

/// The first rng_state from 1 up whose first uniforms satisfy @p wanted (hand cases: "a state whose
/// first uniform is below 0.5").
inline uint64_t state_where(const std::function<bool(double, double)>& wanted) {
  for (uint64_t seed = 1;; ++seed) {
    uint64_t s = seed;
    const double u1 = engine::next_uniform(s), u2 = engine::next_uniform(s);
    if (wanted(u1, u2)) return seed;
  }
}

inline RejectionQuestion hand_rejection(std::vector<std::vector<double>> p, std::vector<std::vector<double>> q,
                                        std::vector<int32_t> draft, uint64_t state, std::vector<int32_t> tokens,
                                        std::string lesson) {
  return {{std::move(p), std::move(q), std::move(draft), state}, std::move(lesson), std::move(tokens)};
}

/// The hand cases: ch12.h's worked example both ways, deterministic guesses, a guess the target
/// excludes, p = q, γ = 0, zero weights in the bonus draw.
inline std::vector<RejectionQuestion> hand_rejection_questions() {
  const std::vector<std::vector<double>> p = {{0.5, 0.3, 0.2}, {0.1, 0.6, 0.3}};
  const std::vector<std::vector<double>> q = {{0.2, 0.6, 0.2}};
  return {
      hand_rejection(p, q, {1}, state_where([](double u1, double u2) { return u1 < 0.5 && u2 < 0.1; }), {1, 0},
                     "ch12.h's worked example, accepted (u · 0.6 < 0.3), then the bonus from p[1] with u < 0.1"),
      hand_rejection(p, q, {1}, state_where([](double u1, double) { return u1 > 0.5; }), {0},
                     "ch12.h's worked example, rejected (u · 0.6 ≥ 0.3): the residual max(0, p − q) = {0.3, 0, 0}"),
      hand_rejection({{0.1, 0.7, 0.2}, {0.0, 0.0, 1.0}}, {{}}, {1},
                     state_where([](double u1, double) { return u1 < 0.7; }), {1, 2},
                     "a deterministic guess (empty q row) is accepted with probability p(d) = 0.7"),
      hand_rejection({{0.1, 0.7, 0.2}, {0.0, 0.0, 1.0}}, {{}}, {1},
                     state_where([](double u1, double u2) { return u1 > 0.7 && u2 > 0.5; }), {2},
                     "a rejected deterministic guess: the replacement is drawn from p without d = {0.1, 0, 0.2} "
                     "(u · 0.3 > 0.15 → token 2)"),
      hand_rejection({{0.0, 0.6, 0.4}, {0.5, 0.5, 0.0}}, {{0.9, 0.05, 0.05}}, {0},
                     state_where([](double u1, double u2) { return u1 < 0.01 && u2 < 0.5; }), {1},
                     "a guess the target excludes (p = 0) is rejected whatever u, even u < 0.01"),
      hand_rejection({{0.25, 0.75}, {0.5, 0.5}}, {{0.25, 0.75}}, {1},
                     state_where([](double u1, double u2) { return u1 > 0.99 && u2 > 0.9; }), {1, 1},
                     "p = q: the guess is accepted whatever u (u · q < p for u < 1, here u > 0.99); then the bonus "
                     "from p[1]"),
      hand_rejection({{0.0, 0.5, 0.0, 0.5}}, {}, {}, state_where([](double u1, double) { return u1 < 0.4; }), {1},
                     "γ = 0: only the bonus token, drawn from p[0]; a zero weight is never drawn"),
      hand_rejection({{0.0, 0.5, 0.0, 0.5}}, {}, {}, state_where([](double u1, double) { return u1 > 0.6; }), {3},
                     "γ = 0, u > 0.5: the second token with weight"),
  };
}

/// A random verification: vocabularies of 1 … 12, γ = 0 … 5; p rows with zeros now and then (a
/// nucleus cut); q rows drawn, with zeros, or empty (a deterministic guess: the target's argmax
/// half the time); the guesses drawn from q; any rng_state.
inline RejectionCase random_rejection_case(Rng& rng) {
  RejectionCase c;
  const int64_t vocab = rng.integer(1, 12), gamma = rng.integer(0, 5);
  const auto row = [&] {
    const int64_t zeros = vocab > 1 && rng.integer(0, 2) == 0 ? rng.integer(1, vocab - 1) : 0;
    return random_row(rng, vocab, double(rng.integer(1, 25)) / 10.0, zeros);
  };
  for (int64_t i = 0; i <= gamma; ++i) c.p.push_back(row());
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int64_t i = 0; i < gamma; ++i) {
    if (rng.integer(0, 2) == 0) {
      c.q.emplace_back();
      const auto& p = c.p[size_t(i)];
      c.draft.push_back(rng.integer(0, 1) ? int32_t(std::max_element(p.begin(), p.end()) - p.begin())
                                          : int32_t(rng.integer(0, vocab - 1)));
      continue;
    }
    c.q.push_back(row());
    const double u = uniform(rng.engine());
    double cumulative = 0.0;
    int32_t guess = -1;
    for (size_t t = 0; t < size_t(vocab); ++t) {
      if (c.q.back()[t] <= 0.0) continue;
      guess = int32_t(t);
      cumulative += c.q.back()[t];
      if (cumulative > u) break;
    }
    c.draft.push_back(guess);
  }
  c.state = rng.engine()();
  return c;
}

inline std::vector<RejectionQuestion> random_rejection_questions(Rng& rng, int count) {
  std::vector<RejectionQuestion> questions;
  for (int i = 0; i < count; ++i)
    questions.push_back(
        {random_rejection_case(rng), "random case " + std::to_string(i + 1) + " of " + std::to_string(count), {}});
  return questions;
}

// ==== 12.3 the rollback of a block table ========================================================

/// One rollback to run: a table of a live BlockManager (with the other live sequences, for the
/// invariants) and the tokens to keep.
struct RollbackCase {
  paged::BlockManager manager{1, 1};
  std::vector<paged::BlockTable> tables;     ///< every live sequence's table
  std::vector<std::vector<int32_t>> tokens;  ///< every live sequence's tokens
  size_t target = 0;                         ///< the table rolled back
  int64_t keep = 0;
  std::string lesson;
  /// A hand case's answer: the kept blocks' and the freed blocks' positions in the table, and the
  /// hashes kept.
  std::optional<std::pair<int64_t, int64_t>> hand;  ///< (blocks kept, hashes kept)
};

/// What a rollback answered.
struct RollbackAnswer {
  std::vector<int32_t> freed, blocks;
  std::vector<uint64_t> hashes;
  int64_t num_tokens = 0;
  bool operator==(const RollbackAnswer&) const = default;
};

/// Runs a batch through the code under test: (table, keep, block_size) → answer.
using RollbackRunFn = std::function<Answers<RollbackAnswer>(std::span<const RollbackCase>)>;

inline std::string describe(const RollbackCase& c) {
  const paged::BlockTable& t = c.tables[c.target];
  return "block_size " + std::to_string(c.manager.block_size()) + ", blocks " + show_list(t.blocks) + ", hashes " +
         std::to_string(t.hashes.size()) + ", num_tokens " + std::to_string(t.num_tokens) + ", num_registered " +
         std::to_string(t.num_registered) + "; keep " + std::to_string(c.keep);
}

inline std::string describe(const RollbackAnswer& a) {
  return "freed " + show_list(a.freed) + ", blocks " + show_list(a.blocks) + ", " + std::to_string(a.hashes.size()) +
         " hashes, num_tokens " + std::to_string(a.num_tokens);
}

/// @p run rolls every table back as BlockManager::truncate() does, and the pool's invariants hold
/// once the blocks it freed are released.
inline ::testing::AssertionResult rollbacks_match(const RollbackRunFn& run, const std::vector<RollbackCase>& cases) {
  const Answers<RollbackAnswer> got = run(cases);
  for (size_t k = 0; k < cases.size(); ++k) {
    const RollbackCase& c = cases[k];
    const paged::BlockTable& before = c.tables[c.target];
    const std::string input = (c.lesson.empty() ? "" : c.lesson + ":") + "\n  " + describe(c);
    // The engine's answer.
    paged::BlockManager manager = c.manager;
    paged::BlockTable table = before;
    manager.truncate(table, c.keep);
    RollbackAnswer expected{{}, table.blocks, table.hashes, table.num_tokens};
    for (size_t i = before.blocks.size(); i-- > table.blocks.size();) expected.freed.push_back(before.blocks[i]);
    if (c.hand && (int64_t(table.blocks.size()) != c.hand->first || int64_t(table.hashes.size()) != c.hand->second))
      return ::testing::AssertionFailure() << "lab bug: BlockManager::truncate keeps " << table.blocks.size()
                                           << " blocks and " << table.hashes.size() << " hashes in the hand case \""
                                           << c.lesson << "\", not " << c.hand->first << " and " << c.hand->second;
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << "no answer from rollback: " << missing << "\n" << input;
    const RollbackAnswer& mine = got.answers[k];
    std::string hint;
    if (mine.blocks == expected.blocks && mine.freed != expected.freed && mine.freed.size() == expected.freed.size() &&
        std::is_permutation(mine.freed.begin(), mine.freed.end(), expected.freed.begin()))
      hint = "\n  the right blocks, in the wrong order: free them last to first (the tail is evicted first)";
    else if (mine.hashes.size() > expected.hashes.size())
      hint = "\n  a block that is no longer full keeps its hash: it names rejected tokens, and could be offered to "
             "the prefix cache — keep ⌊keep / block_size⌋ hashes at most";
    else if (mine.blocks.size() + 1 == expected.blocks.size())
      hint = "\n  the last kept block is partial, but it holds kept tokens: keep ⌈keep / block_size⌉ blocks";
    // The student's table in the pool: release what it freed, then the invariants.
    paged::BlockManager theirs = c.manager;
    std::vector<paged::BlockTable> tables = c.tables;
    paged::BlockTable& rolled = tables[c.target];
    rolled.blocks = mine.blocks;
    rolled.hashes = mine.hashes;
    rolled.num_tokens = mine.num_tokens;
    std::string broken;
    try {
      for (const int32_t block : mine.freed) paged::BlockManagerTestAccess::pool(theirs).release(block);
      std::vector<paged::SequenceBlocks> live;
      for (size_t s = 0; s < tables.size(); ++s)
        if (!tables[s].blocks.empty()) live.push_back({int64_t(s), &tables[s], c.tokens[s]});
      theirs.check_invariants(live);
    } catch (const std::exception& error) {
      broken = error.what();
    }
    if (!broken.empty() && mine == expected)
      return ::testing::AssertionFailure() << "lab bug: BlockManager::truncate's result breaks the pool" << input
                                           << "\n  " << broken;
    if (!broken.empty())
      return ::testing::AssertionFailure()
             << "rollback: " << input << "\n  expected " << describe(expected) << "\n  got      " << describe(mine)
             << "\n  with your table and your freed blocks released, the pool breaks: " << broken << hint;
    if (mine == expected) continue;
    return ::testing::AssertionFailure() << "rollback: " << input << "\n  expected " << describe(expected)
                                         << "\n  got      " << describe(mine) << hint;
  }
  return ::testing::AssertionSuccess();
}

/// A sequence of a scenario: its tokens, kept beside its table.
inline void append_tokens(paged::BlockManager& manager, paged::BlockTable& table, std::vector<int32_t>& tokens,
                          int32_t token, bool computed) {
  tokens.resize(size_t(table.num_tokens));
  tokens.push_back(token);
  if (manager.append_slot(table, tokens).status != paged::BlockStatus::ok) {
    tokens.pop_back();
    return;
  }
  if (computed) manager.mark_computed(table, table.num_tokens);
}

/// The hand cases: ch12.h's worked example (block_size 4, 10 tokens, 1 registered block) cut at
/// 6, at 4 and kept whole; a cut inside the last block; block_size 1.
inline std::vector<RollbackCase> hand_rollback_cases() {
  std::vector<RollbackCase> cases;
  const auto make = [&](int64_t block_size, int64_t prompt, int64_t registered, int64_t guesses, int64_t keep,
                        int64_t blocks_kept, int64_t hashes_kept, std::string lesson) {
    RollbackCase c{paged::BlockManager(32, block_size), {paged::BlockTable{}}, {{}}, 0, keep, std::move(lesson), {}};
    std::vector<int32_t>& tokens = c.tokens[0];
    for (int64_t t = 0; t < prompt; ++t) tokens.push_back(int32_t(100 + t));
    c.manager.allocate(c.tables[0], tokens);
    c.manager.mark_computed(c.tables[0], registered * block_size);
    for (int64_t g = 0; g < guesses; ++g) append_tokens(c.manager, c.tables[0], tokens, int32_t(7 + g), false);
    c.hand = std::make_pair(blocks_kept, hashes_kept);
    cases.push_back(std::move(c));
  };
  make(4, 7, 1, 3, 6, 2, 1, "ch12.h's worked example: keep 6 of 10 (7 prompt tokens, 3 guesses), block 1 partial again");
  make(4, 7, 1, 3, 4, 1, 1, "ch12.h's worked example: keep 4, a cut at a block boundary");
  make(4, 7, 1, 3, 10, 3, 2, "every guess accepted: keep all 10 tokens, nothing freed");
  make(4, 5, 0, 6, 7, 2, 1, "a cut inside a full block: it stays, its hash goes, the block after it is freed");
  make(4, 8, 2, 4, 8, 2, 2, "every guess rejected, the prompt ending at a block boundary: the guesses' block freed");
  make(1, 5, 3, 4, 6, 6, 6, "block_size 1: every kept token keeps its block and its hash");
  return cases;
}

/// A random scenario: block sizes 1 … 16, prefix caching on (mostly) or off, sequences sharing a
/// prompt prefix (prefix-cache hits), decoded tokens (computed and registered), forks, then γ
/// guesses appended to one sequence (not computed) and a keep drawn in its allowed range — mostly
/// among the guesses, as after a verification, sometimes anywhere.
inline RollbackCase random_rollback_case(Rng& rng) {
  static constexpr int64_t kBlockSizes[] = {1, 2, 3, 4, 5, 8, 16};
  const int64_t block_size = kBlockSizes[rng.integer(0, 6)];
  RollbackCase c{paged::BlockManager(rng.integer(24, 96), block_size, rng.integer(0, 4) != 0), {}, {}, 0, 0, "", {}};
  std::vector<int32_t> base;
  for (int64_t t = 0, n = rng.integer(1, 3 * block_size + 2); t < n; ++t) base.push_back(int32_t(rng.integer(0, 50)));
  const int64_t sequences = rng.integer(1, 4);
  for (int64_t s = 0; s < sequences; ++s) {
    if (!c.tables.empty() && rng.integer(0, 3) == 0) {  // a fork of an earlier sequence
      const size_t parent = size_t(rng.integer(0, int64_t(c.tables.size()) - 1));
      c.tables.push_back(c.manager.fork(c.tables[parent]));
      c.tokens.push_back(c.tokens[parent]);
    } else {
      std::vector<int32_t> prompt(base.begin(), base.begin() + rng.integer(0, int64_t(base.size())));
      for (int64_t t = 0, n = rng.integer(1, 2 * block_size + 1); t < n; ++t) prompt.push_back(int32_t(rng.integer(0, 50)));
      paged::BlockTable table;
      if (c.manager.allocate(table, prompt).status != paged::BlockStatus::ok) continue;
      c.manager.mark_computed(table, table.num_tokens);
      c.tables.push_back(std::move(table));
      c.tokens.push_back(std::move(prompt));
    }
    paged::BlockTable& table = c.tables.back();
    for (int64_t t = 0, n = rng.integer(0, 2 * block_size); t < n; ++t)
      append_tokens(c.manager, table, c.tokens.back(), int32_t(rng.integer(0, 50)), true);
  }
  if (c.tables.empty()) return random_rollback_case(rng);  // a pool too small for the first prompt: again
  c.target = size_t(rng.integer(0, int64_t(c.tables.size()) - 1));
  paged::BlockTable& table = c.tables[c.target];
  const int64_t before_guesses = table.num_tokens;
  for (int64_t g = 0, n = rng.integer(0, 8); g < n; ++g)
    append_tokens(c.manager, table, c.tokens[c.target], int32_t(rng.integer(0, 50)), false);
  const int64_t low = table.num_registered * block_size;
  c.keep = rng.integer(0, 2) != 0 ? rng.integer(std::max(low, before_guesses), table.num_tokens)
                                  : rng.integer(low, table.num_tokens);
  // truncate() refuses to leave a block partly filled while another table shares it or the prefix
  // cache holds it (the engine never asks: guesses go into private blocks): draw another case.
  if (c.keep % block_size != 0) {
    const int32_t last = table.blocks[size_t((c.keep + block_size - 1) / block_size) - 1];
    if (c.manager.pool().refcount(last) > 1 || c.manager.pool().hash_of(last)) return random_rollback_case(rng);
  }
  return c;
}

inline std::vector<RollbackCase> random_rollback_cases(Rng& rng, int count) {
  std::vector<RollbackCase> cases;
  for (int i = 0; i < count; ++i) {
    cases.push_back(random_rollback_case(rng));
    cases.back().lesson = "random case " + std::to_string(i + 1) + " of " + std::to_string(count);
  }
  return cases;
}

}  // namespace inferlab::testing::ch12
