#pragma once
// The checks of chapter 07's exercises (exercises/07-continuous-batching/ch07.h), on the engine's
// own types: the graded tests (test_student.cpp) run them on the student's functions, and
// tests/wrong/wrong_ch07_decisions.cpp on deliberately wrong versions that they must reject.
//
// Every check works in three steps. It draws its questions first: hand-written cases that each
// teach one rule of the lesson, or fresh random inputs from the caller's Rng (a SeededRng: the
// seed is printed on failure). It hands ALL the inputs at once to the function under test, which
// answers the whole batch — the graded test runs the batch in one sandboxed child process
// (tests/support/isolation.h), the wrong fixtures call theirs here, one input after the other.
// Only then does it compute the engine's reference answers (runtime/engine: plan_step,
// choose_victim, sample_top_p), check that the reference gives each answer written by hand (a
// lab bug otherwise), and compare, answer by answer. The first wrong answer fails the check with
// the input, the expected and the returned answer, why the expected one is right, and — where it
// recognises one — the usual mistake behind the wrong one.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/rng.h"
#include "runtime/engine/sampling.h"
#include "runtime/engine/step_planner.h"
#include "tests/support/student_answers.h"

namespace inferlab::testing::ch07 {

using testing::answer_each;
using testing::Answers;
using testing::missing_answer;
using engine::ScheduledChunk;
using engine::SequenceDemand;
using engine::StepLimits;
using engine::VictimCandidate;

using Demands = std::vector<SequenceDemand>;
using Plan = std::vector<ScheduledChunk>;

// ---- the functions under test: they answer a batch of inputs at once ----

/// The input of one step plan (exercise 7.1).
struct PlanCase {
  Demands running, waiting;
  StepLimits limits;
};

/// The input of one victim choice (exercise 7.2): the running requests.
using VictimCase = std::vector<VictimCandidate>;

/// The input of one nucleus sample (exercise 7.3).
struct TopPCase {
  std::vector<float> logits;
  float temperature = 1.0f;
  float top_p = 1.0f;
  double u = 0.0;
};

/// A step planner under test (exercise 7.1): its plan for each input of a batch.
using PlanBatchFn = std::function<Answers<Plan>(std::span<const PlanCase>)>;
/// A victim policy under test (exercise 7.2): the index of the victim for each running set of a batch.
using VictimBatchFn = std::function<Answers<int64_t>(std::span<const VictimCase>)>;
/// A nucleus sampler under test (exercise 7.3): the token for each row of a batch.
using TopPBatchFn = std::function<Answers<int32_t>(std::span<const TopPCase>)>;

/// A step planner that answers one input per call, on the engine's types.
using PlanFn = std::function<Plan(std::span<const SequenceDemand>, std::span<const SequenceDemand>, const StepLimits&)>;
/// A victim policy that answers one running set per call: the index of the victim.
using VictimFn = std::function<int64_t(std::span<const VictimCandidate>)>;
/// A nucleus sampler that answers one row per call: (logits, temperature, top_p, u) → token.
using TopPFn = std::function<int32_t(std::span<const float>, float, float, double)>;

/// A batch planner calling @p plan on each input in this process (the wrong fixtures' planners).
inline PlanBatchFn one_at_a_time(PlanFn plan) {
  return [plan = std::move(plan)](std::span<const PlanCase> cases) {
    return answer_each<Plan>(cases, [&](const PlanCase& c) { return plan(c.running, c.waiting, c.limits); });
  };
}

/// A batch victim policy calling @p choose on each running set in this process.
inline VictimBatchFn one_at_a_time(VictimFn choose) {
  return [choose = std::move(choose)](std::span<const VictimCase> cases) {
    return answer_each<int64_t>(cases, [&](const VictimCase& c) { return choose(c); });
  };
}

/// A batch sampler calling @p sample on each row in this process.
inline TopPBatchFn one_at_a_time(TopPFn sample) {
  return [sample = std::move(sample)](std::span<const TopPCase> cases) {
    return answer_each<int32_t>(cases,
                                [&](const TopPCase& c) { return sample(c.logits, c.temperature, c.top_p, c.u); });
  };
}

// ---- 7.1 plan_step ----

// A demand list; remaining 1 is a decode when running, a one-token prompt when waiting.
inline std::string describe(std::span<const SequenceDemand> demands, bool waiting) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < demands.size(); ++i)
    s << (i ? ", " : "") << "{id " << demands[i].id << ", remaining " << demands[i].remaining
      << (demands[i].remaining == 1 ? (waiting ? " (a one-token prompt)" : " (decode)") : "") << "}";
  s << "]";
  return s.str();
}

inline std::string describe(const StepLimits& limits) {
  std::ostringstream s;
  s << "token_budget " << limits.token_budget << ", max_seqs " << limits.max_seqs << ", chunk_size "
    << limits.chunk_size << ", chunked_prefill " << (limits.chunked_prefill ? "on" : "off");
  return s.str();
}

// Which of the three parts of a plan a sequence belongs to.
inline std::string role_of(int64_t id, std::span<const SequenceDemand> running,
                           std::span<const SequenceDemand> waiting) {
  for (const SequenceDemand& s : running)
    if (s.id == id) return s.remaining == 1 ? "decode" : "prompt in progress";
  for (const SequenceDemand& s : waiting)
    if (s.id == id) return "admitted from waiting";
  return "not in running nor waiting";
}

inline std::string describe(const Plan& plan, std::span<const SequenceDemand> running,
                            std::span<const SequenceDemand> waiting) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < plan.size(); ++i)
    s << (i ? ", " : "") << "{id " << plan[i].id << ", " << plan[i].tokens << " token"
      << (plan[i].tokens == 1 ? "" : "s") << ": " << role_of(plan[i].id, running, waiting) << "}";
  s << "]";
  return s.str();
}

// The input of a plan, one line each.
inline std::string plan_input(std::span<const SequenceDemand> running, std::span<const SequenceDemand> waiting,
                              const StepLimits& limits) {
  return "\n  running  " + describe(running, false) + "\n  waiting  " + describe(waiting, true) + "\n  limits   " +
         describe(limits);
}

// What is wrong with @p got in itself (budgets, ids, sizes), or "" when nothing obvious.
inline std::string plan_rule_broken(const Plan& got, std::span<const SequenceDemand> running,
                                    std::span<const SequenceDemand> waiting, const StepLimits& limits) {
  int64_t tokens = 0, admitted = 0;
  std::vector<int64_t> seen;
  for (const ScheduledChunk& c : got) {
    const auto find = [&](std::span<const SequenceDemand> list) {
      return std::find_if(list.begin(), list.end(), [&](const SequenceDemand& s) { return s.id == c.id; });
    };
    const auto in_running = find(running), in_waiting = find(waiting);
    const bool running_seq = in_running != running.end();
    if (!running_seq && in_waiting == waiting.end())
      return "sequence " + std::to_string(c.id) + " is neither running nor waiting";
    if (std::find(seen.begin(), seen.end(), c.id) != seen.end())
      return "sequence " + std::to_string(c.id) + " is planned twice";
    seen.push_back(c.id);
    const int64_t remaining = running_seq ? in_running->remaining : in_waiting->remaining;
    if (c.tokens < 1)
      return "sequence " + std::to_string(c.id) + " is planned with " + std::to_string(c.tokens) +
             " tokens: a sequence that gets nothing is left out of the plan";
    if (c.tokens > remaining)
      return "sequence " + std::to_string(c.id) + " gets " + std::to_string(c.tokens) + " tokens but has only " +
             std::to_string(remaining) + " left";
    if (remaining > 1 && limits.chunked_prefill && c.tokens > limits.chunk_size)
      return "sequence " + std::to_string(c.id) + " gets " + std::to_string(c.tokens) +
             " tokens, more than chunk_size " + std::to_string(limits.chunk_size);
    if (remaining > 1 && !limits.chunked_prefill && c.tokens != remaining)
      return "sequence " + std::to_string(c.id) + " gets " + std::to_string(c.tokens) + " of its " +
             std::to_string(remaining) + " tokens, but without chunked prefill a prompt runs whole or waits";
    tokens += c.tokens;
    admitted += !running_seq;
  }
  if (tokens > limits.token_budget)
    return "the plan runs " + std::to_string(tokens) + " tokens, over the token budget of " +
           std::to_string(limits.token_budget);
  if (int64_t(running.size()) + admitted > limits.max_seqs)
    return std::to_string(running.size()) + " running sequences plus " + std::to_string(admitted) +
           " admitted exceed max_seqs = " + std::to_string(limits.max_seqs) +
           " (the running ones hold their places too)";
  return "";
}

// Where @p got first departs from @p expected, in words.
inline std::string first_difference(const Plan& expected, const Plan& got, std::span<const SequenceDemand> running,
                                    std::span<const SequenceDemand> waiting) {
  size_t i = 0;
  while (i < expected.size() && i < got.size() && expected[i] == got[i]) ++i;
  std::ostringstream s;
  s << "first difference at entry " << i << ": ";
  if (i == expected.size()) {
    s << "the plan should end there, got {id " << got[i].id << ", " << got[i].tokens << " token"
      << (got[i].tokens == 1 ? "" : "s") << "} more (" << role_of(got[i].id, running, waiting) << ")";
  } else if (i == got.size()) {
    s << "missing {id " << expected[i].id << ", " << expected[i].tokens << " token"
      << (expected[i].tokens == 1 ? "" : "s") << "} (" << role_of(expected[i].id, running, waiting) << ")";
  } else if (expected[i].id == got[i].id) {
    s << "sequence " << got[i].id << " (" << role_of(got[i].id, running, waiting) << ") should get "
      << expected[i].tokens << " tokens, got " << got[i].tokens;
  } else {
    s << "expected sequence " << expected[i].id << " (" << role_of(expected[i].id, running, waiting)
      << "), got sequence " << got[i].id << " (" << role_of(got[i].id, running, waiting) << ")";
  }
  return s.str();
}

/// One question about a planner: an input, what it teaches, and — for a hand case — the plan
/// worked out by hand.
struct PlanQuestion {
  PlanCase input;
  std::string lesson;
  std::optional<Plan> hand;
};

/// A hand case: the engine must plan @p plan too (a lab bug otherwise).
inline PlanQuestion hand_plan(Demands running, Demands waiting, const StepLimits& limits, Plan plan,
                              std::string lesson) {
  return {{std::move(running), std::move(waiting), limits}, std::move(lesson), std::move(plan)};
}

/// The failure for plan @p got where @p expected was due.
inline ::testing::AssertionResult wrong_plan(const PlanCase& c, const std::string& lesson, const Plan& expected,
                                             const Plan& got) {
  const std::string broken = plan_rule_broken(got, c.running, c.waiting, c.limits);
  return ::testing::AssertionFailure()
         << (lesson.empty() ? "" : lesson + ":") << plan_input(c.running, c.waiting, c.limits) << "\n  expected "
         << describe(expected, c.running, c.waiting) << "\n  got      " << describe(got, c.running, c.waiting) << "\n  "
         << (broken.empty() ? first_difference(expected, got, c.running, c.waiting) : broken)
         << "\n  (the order: decodes of running sequences first, then their prompts in progress, then admissions "
            "from waiting in order)";
}

/// @p plan answers every question as the engine's plan_step() does: all the inputs in one batch,
/// then the reference, then the comparison; the first wrong plan fails.
inline ::testing::AssertionResult plans_match(const PlanBatchFn& plan, const std::vector<PlanQuestion>& questions) {
  std::vector<PlanCase> inputs;
  inputs.reserve(questions.size());
  for (const PlanQuestion& q : questions) inputs.push_back(q.input);
  const Answers<Plan> got = plan(inputs);
  std::vector<Plan> expected;
  expected.reserve(questions.size());
  for (const PlanQuestion& q : questions) {
    expected.push_back(engine::plan_step(q.input.running, q.input.waiting, q.input.limits));
    if (q.hand && expected.back() != *q.hand)
      return ::testing::AssertionFailure()
             << "lab bug: engine::plan_step disagrees with the hand-written plan of \"" << q.lesson
             << "\": " << describe(expected.back(), q.input.running, q.input.waiting) << " vs "
             << describe(*q.hand, q.input.running, q.input.waiting);
  }
  for (size_t k = 0; k < questions.size(); ++k) {
    const PlanQuestion& q = questions[k];
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << "no plan from student_plan_step: " << missing << "\n"
                                           << (q.lesson.empty() ? "" : q.lesson + ":")
                                           << plan_input(q.input.running, q.input.waiting, q.input.limits);
    if (got.answers[k] != expected[k]) return wrong_plan(q.input, q.lesson, expected[k], got.answers[k]);
  }
  return ::testing::AssertionSuccess();
}

inline StepLimits limits_of(int64_t token_budget, int64_t max_seqs, int64_t chunk_size, bool chunked) {
  StepLimits limits;
  limits.token_budget = token_budget;
  limits.max_seqs = max_seqs;
  limits.chunk_size = chunk_size;
  limits.chunked_prefill = chunked;
  return limits;
}

/// Decodes go first: before a prompt that arrived earlier, before admissions; the budget may run
/// out among them.
inline ::testing::AssertionResult decodes_go_first(const PlanBatchFn& plan) {
  return plans_match(
      plan,
      {
          hand_plan({{7, 30}, {2, 1}, {5, 1}}, {}, limits_of(64, 4, 64, true), {{2, 1}, {5, 1}, {7, 30}},
                    "decodes go first even when a prompt arrived earlier (sequence 7 is listed first)"),
          hand_plan({{3, 1}}, {{8, 5}}, limits_of(3, 4, 8, true), {{3, 1}, {8, 2}},
                    "a running decode goes before a waiting prompt, which gets what is left"),
          hand_plan({{4, 1}, {9, 20}, {1, 1}, {6, 1}}, {{2, 3}}, limits_of(2, 5, 16, true), {{4, 1}, {1, 1}},
                    "the budget runs out among the decodes: the rest wait, in order (6, then the prompt of 9 and the "
                    "admission of 2)"),
      });
}

/// Chunked prefill: a prompt gets min(remaining, chunk_size, budget left).
inline ::testing::AssertionResult chunks_fit_chunk_and_budget(const PlanBatchFn& plan) {
  return plans_match(
      plan,
      {
          hand_plan({{1, 100}}, {}, limits_of(256, 4, 32, true), {{1, 32}},
                    "a prompt chunk is at most chunk_size tokens"),
          hand_plan({{1, 3}}, {}, limits_of(100, 4, 16, true), {{1, 3}}, "a prompt shorter than a chunk runs whole"),
          hand_plan({{1, 10}, {2, 50}}, {}, limits_of(20, 4, 16, true), {{1, 10}, {2, 10}},
                    "the last prompt gets what is left of the budget"),
          hand_plan({{3, 40}, {1, 1}, {2, 1}}, {{4, 100}, {5, 8}}, limits_of(32, 4, 16, true),
                    {{1, 1}, {2, 1}, {3, 16}, {4, 14}},
                    "ch07.h's worked example, chunked: decodes, a chunk of 3, 4 admitted with what is left, 5 waits (4 "
                    "sequences already)"),
      });
}

/// Without chunked prefill a prompt runs whole or waits, and blocks everything behind it.
inline ::testing::AssertionResult unchunked_prompts_run_whole_or_wait(const PlanBatchFn& plan) {
  return plans_match(
      plan,
      {
          hand_plan({{3, 40}, {1, 1}, {2, 1}}, {{4, 100}, {5, 8}}, limits_of(32, 4, 16, false), {{1, 1}, {2, 1}},
                    "ch07.h's worked example, not chunked: 3's 40 tokens do not fit in the 30 left, so it waits and so "
                    "does everyone behind it"),
          hand_plan({}, {{4, 20}, {5, 3}}, limits_of(10, 4, 16, false), {},
                    "without chunking a prompt larger than the remaining budget waits and blocks later admissions (5 "
                    "would fit but may not overtake 4)"),
          hand_plan({}, {{4, 6}, {5, 3}, {6, 2}}, limits_of(10, 4, 16, false), {{4, 6}, {5, 3}},
                    "whole prompts while they fit: 6 needs 2 tokens, 1 is left"),
          hand_plan({{2, 1}}, {{4, 9}}, limits_of(10, 4, 4, false), {{2, 1}, {4, 9}},
                    "a prompt exactly as large as the budget left fits (chunk_size plays no part without chunking)"),
          hand_plan({{1, 12}, {2, 3}}, {{3, 1}}, limits_of(10, 4, 16, false), {},
                    "a running prompt that does not fit stops the step: the shorter prompt of 2 and the admission of 3 "
                    "wait behind it"),
      });
}

/// Admissions: in order, while running + admitted < max_seqs, until one gets nothing.
inline ::testing::AssertionResult admissions_are_fcfs(const PlanBatchFn& plan) {
  return plans_match(
      plan, {
                hand_plan({{1, 1}, {2, 1}, {3, 1}}, {{4, 5}, {5, 5}}, limits_of(100, 4, 16, true),
                          {{1, 1}, {2, 1}, {3, 1}, {4, 5}},
                          "max_seqs 4 with 3 running: one place, for the first waiting request"),
                hand_plan({{1, 1}, {2, 7}}, {{9, 4}}, limits_of(100, 2, 16, true), {{1, 1}, {2, 7}},
                          "max_seqs reached by the running sequences: no admission"),
                hand_plan({}, {{4, 50}, {5, 2}}, limits_of(20, 8, 8, true), {{4, 8}, {5, 2}},
                          "an admitted prompt gets a chunk too, and the next one what it needs"),
                hand_plan({}, {{4, 30}, {5, 2}}, limits_of(10, 8, 16, true), {{4, 10}},
                          "the budget is spent: the next waiting request gets nothing and the admissions stop"),
                hand_plan({{1, 1}, {2, 9}}, {{3, 1}}, limits_of(20, 4, 4, true), {{1, 1}, {2, 4}, {3, 1}},
                          "a one-token prompt is admitted after the running prompts, not with the decodes"),
            });
}

/// Budgets of 1 and 2 tokens and chunks of 1.
inline ::testing::AssertionResult tiny_budgets(const PlanBatchFn& plan) {
  return plans_match(
      plan,
      {
          hand_plan({{1, 50}, {2, 1}}, {{3, 4}}, limits_of(1, 4, 16, true), {{2, 1}},
                    "token_budget 1: the decode takes it"),
          hand_plan({{1, 50}}, {{3, 4}}, limits_of(1, 4, 16, true), {{1, 1}},
                    "token_budget 1, chunked: a one-token chunk of the running prompt"),
          hand_plan({{1, 50}}, {{3, 1}}, limits_of(1, 4, 16, false), {},
                    "token_budget 1, not chunked: the prompt cannot run, and the one-token prompt behind it may not "
                    "overtake"),
          hand_plan({{5, 1}, {6, 1}, {7, 1}}, {}, limits_of(2, 4, 16, true), {{5, 1}, {6, 1}},
                    "token_budget 2: two decodes of three"),
          hand_plan({{1, 5}, {2, 5}}, {{3, 4}}, limits_of(8, 4, 1, true), {{1, 1}, {2, 1}, {3, 1}},
                    "chunk_size 1: one prompt token per sequence per step"),
      });
}

/// Options of random plan inputs (each graded test leans them towards its rule).
struct PlanCaseOptions {
  bool tiny_budgets_only = false;              ///< token budgets of 1 or 2 only
  std::optional<bool> chunked = std::nullopt;  ///< chunked prefill forced on or off (drawn when unset)
  bool decodes_behind_prompts = false;         ///< running lists a prompt in progress before a decode
  bool admissions = false;                     ///< a waiting queue, and places left in the batch for it
};

/// A random plan input: ids in no particular order, decodes and prompts mixed, budgets down to 1.
inline PlanCase random_plan_case(Rng& rng, const PlanCaseOptions& options = {}) {
  PlanCase c;
  c.limits.max_seqs = rng.integer(options.decodes_behind_prompts || options.admissions ? 2 : 1, 8);
  const int64_t kind = rng.integer(0, 9);
  if (options.tiny_budgets_only)
    c.limits.token_budget = rng.integer(1, 2);
  else
    c.limits.token_budget = kind == 0 ? 1 : kind == 1 ? 2 : kind <= 3 ? rng.integer(3, 12) : rng.integer(1, 300);
  c.limits.chunk_size = rng.integer(0, 3) == 0 ? rng.integer(1, 3) : rng.integer(1, 128);
  c.limits.chunked_prefill = options.chunked ? *options.chunked : rng.integer(0, 1) == 1;
  // A full batch a third of the time: max_seqs reached by the running sequences alone.
  const int64_t num_running = options.decodes_behind_prompts ? rng.integer(2, c.limits.max_seqs)
                              : options.admissions           ? rng.integer(0, c.limits.max_seqs - 1)
                              : rng.integer(0, 2) == 0       ? c.limits.max_seqs
                                                             : rng.integer(0, c.limits.max_seqs);
  const int64_t num_waiting = rng.integer(options.admissions ? 1 : 0, 6);
  std::vector<int64_t> ids(size_t(num_running + num_waiting));
  std::iota(ids.begin(), ids.end(), rng.integer(0, 50));
  std::shuffle(ids.begin(), ids.end(), rng.engine());
  size_t next = 0;
  const auto prompt = [&] { return rng.integer(0, 2) == 0 ? rng.integer(2, 12) : rng.integer(2, 200); };
  for (int64_t i = 0; i < num_running; ++i) c.running.push_back({ids[next++], rng.integer(0, 1) ? 1 : prompt()});
  for (int64_t i = 0; i < num_waiting; ++i)
    c.waiting.push_back({ids[next++], rng.integer(0, 7) == 0 ? 1 : prompt()});  // now and then a one-token prompt
  if (options.decodes_behind_prompts) {  // somewhere in running, a prompt listed before a decode
    const int64_t prompt_at = rng.integer(0, num_running - 2);
    c.running[size_t(prompt_at)].remaining = prompt();
    c.running[size_t(rng.integer(prompt_at + 1, num_running - 1))].remaining = 1;
  }
  return c;
}

/// @p plan equals the engine on @p cases random inputs, drawn before any is answered.
inline ::testing::AssertionResult random_plans_match(const PlanBatchFn& plan, Rng& rng, int cases,
                                                     const PlanCaseOptions& options = {}) {
  std::vector<PlanQuestion> questions;
  questions.reserve(size_t(cases));
  for (int i = 0; i < cases; ++i)
    questions.push_back({random_plan_case(rng, options),
                         "random case " + std::to_string(i + 1) + " of " + std::to_string(cases), std::nullopt});
  return plans_match(plan, questions);
}

// ---- 7.2 choose_victim ----

inline std::string describe(std::span<const VictimCandidate> running) {
  std::ostringstream s;
  for (size_t i = 0; i < running.size(); ++i)
    s << "\n    [" << i << "] id " << running[i].id << ", arrival " << running[i].arrival << ", num_computed "
      << running[i].num_computed;
  return s.str();
}

// The usual mistake behind choosing index @p got instead of @p expected, or "".
inline std::string victim_mistake(std::span<const VictimCandidate> running, int64_t expected, int64_t got) {
  const VictimCandidate& e = running[size_t(expected)];
  const VictimCandidate& g = running[size_t(got)];
  if (got == e.id && got != expected)
    return " — index " + std::to_string(got) + " is the victim's id: return its index in running, not its id";
  if (g.arrival == e.arrival) {
    std::ostringstream s;
    s << " — both arrived at " << e.arrival << ": on a tie, the larger id (" << e.id << ") is the later one";
    return s.str();
  }
  const bool oldest =
      std::all_of(running.begin(), running.end(), [&](const VictimCandidate& c) { return c.arrival >= g.arrival; });
  if (oldest)
    return " — that is the OLDEST request: preempting it lets younger requests overtake it, and the oldest one no "
           "longer keeps running to its end (the progress guarantee is lost)";
  const auto by_computed = [](const VictimCandidate& a, const VictimCandidate& b) {
    return a.num_computed < b.num_computed;
  };
  if (g.num_computed == std::min_element(running.begin(), running.end(), by_computed)->num_computed ||
      g.num_computed == std::max_element(running.begin(), running.end(), by_computed)->num_computed)
    return " — num_computed plays no part: the victim is the latest arrival, whatever recomputing it costs";
  return "";
}

/// One question about a victim policy: the running set, what it teaches, and — for a hand case —
/// the victim's index worked out by hand.
struct VictimQuestion {
  VictimCase input;
  std::string lesson;
  std::optional<int64_t> hand;
};

/// A hand case: the engine must pick index @p index too (a lab bug otherwise).
inline VictimQuestion hand_victim(VictimCase running, int64_t index, std::string lesson) {
  return {std::move(running), std::move(lesson), index};
}

/// @p choose answers every question as the engine's choose_victim() does: all the running sets in
/// one batch, then the reference, then the comparison; the first wrong index fails.
inline ::testing::AssertionResult victims_match(const VictimBatchFn& choose,
                                                const std::vector<VictimQuestion>& questions) {
  std::vector<VictimCase> inputs;
  inputs.reserve(questions.size());
  for (const VictimQuestion& q : questions) inputs.push_back(q.input);
  const Answers<int64_t> got = choose(inputs);
  std::vector<int64_t> expected;
  expected.reserve(questions.size());
  for (const VictimQuestion& q : questions) {
    expected.push_back(engine::choose_victim(q.input));
    if (q.hand && expected.back() != *q.hand)
      return ::testing::AssertionFailure()
             << "lab bug: engine::choose_victim disagrees with the hand-written answer of \"" << q.lesson << "\"";
  }
  for (size_t k = 0; k < questions.size(); ++k) {
    const VictimCase& running = questions[k].input;
    const std::string input = (questions[k].lesson.empty() ? "" : questions[k].lesson + ":") + "\n  running" +
                              describe(std::span<const VictimCandidate>(running));
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << "no answer from student_choose_victim: " << missing << "\n" << input;
    const int64_t g = got.answers[k];
    if (g == expected[k]) continue;
    const VictimCandidate& e = running[size_t(expected[k])];
    ::testing::AssertionResult failure = ::testing::AssertionFailure();
    failure << input << "\n  expected index " << expected[k] << " (id " << e.id << ": the latest arrival, at "
            << e.arrival << ", ties going to the larger id)\n  got      index " << g;
    if (g < 0 || g >= int64_t(running.size()))
      return failure << ", outside running (" << running.size() << " candidates)";
    return failure << " (id " << running[size_t(g)].id << ", arrival " << running[size_t(g)].arrival << ")"
                   << victim_mistake(running, expected[k], g);
  }
  return ::testing::AssertionSuccess();
}

/// The latest arrival is the victim, wherever it stands, whatever it has computed.
inline ::testing::AssertionResult latest_arrival_is_victim(const VictimBatchFn& choose) {
  return victims_match(
      choose,
      {
          hand_victim({{1, 0.5, 300}, {2, 2.5, 10}, {3, 1.0, 40}}, 1,
                      "the request that arrived last (id 2, at 2.5) gives its blocks back, though it holds the fewest "
                      "tokens"),
          hand_victim({{9, 4.0, 5}, {4, 1.0, 900}, {6, 3.0, 70}}, 0, "the latest arrival stands first in the list"),
          hand_victim({{5, 0.0, 2}, {8, 0.25, 1}, {2, 3.75, 800}}, 2,
                      "the latest arrival holds the most KV: it is still the victim (num_computed plays no part)"),
          hand_victim({{42, 7.0, 3}}, 0, "one running request: it is the victim"),
      });
}

/// Ties in arrival go to the larger id.
inline ::testing::AssertionResult ties_go_to_larger_id(const VictimBatchFn& choose) {
  return victims_match(choose, {
                                   hand_victim({{3, 2.0, 10}, {7, 2.0, 10}, {5, 1.0, 10}}, 1,
                                               "3 and 7 arrived together, last: the larger id, 7, is the victim"),
                                   hand_victim({{8, 1.5, 10}, {2, 1.5, 10}, {6, 1.5, 10}}, 0,
                                               "all arrived together: the largest id, 8, standing first"),
                                   hand_victim({{1, 0.0, 10}, {4, 0.0, 10}, {9, 0.0, 10}, {0, 0.0, 10}}, 2,
                                               "all arrived together: the largest id, 9, standing third"),
                               });
}

/// Options of random running sets.
struct VictimCaseOptions {
  bool distinct_arrivals = false;  ///< no two requests arrived at the same time
  bool latest_tied = false;        ///< two or more requests share the latest arrival
};

/// A random running set: 1 to 10 requests, ids shuffled, few distinct arrival times (ties are
/// common) unless options say otherwise.
inline VictimCase random_victim_case(Rng& rng, const VictimCaseOptions& options = {}) {
  const int64_t n = rng.integer(options.latest_tied ? 2 : 1, 10);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), rng.integer(0, 20));
  std::shuffle(ids.begin(), ids.end(), rng.engine());
  VictimCase running;
  if (options.distinct_arrivals) {
    std::vector<int64_t> slots(static_cast<size_t>(n));
    std::iota(slots.begin(), slots.end(), rng.integer(0, 40));
    std::shuffle(slots.begin(), slots.end(), rng.engine());
    for (int64_t k = 0; k < n; ++k)
      running.push_back({ids[size_t(k)], 0.25 * double(slots[size_t(k)]), rng.integer(1, 500)});
  } else {
    const int64_t distinct_arrivals = rng.integer(1, 6);  // few values: ties are common
    for (int64_t k = 0; k < n; ++k)
      running.push_back({ids[size_t(k)], 0.5 * double(rng.integer(0, distinct_arrivals - 1)), rng.integer(1, 500)});
  }
  if (options.latest_tied) {  // 2 … n of them, anywhere in the list, arrive last, together
    double latest = 0.0;
    for (const VictimCandidate& c : running) latest = std::max(latest, c.arrival);
    std::vector<size_t> order(running.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::shuffle(order.begin(), order.end(), rng.engine());
    const int64_t tied = rng.integer(2, n);
    for (int64_t k = 0; k < tied; ++k) running[order[size_t(k)]].arrival = latest + 0.5;
  }
  return running;
}

/// @p choose equals the engine on @p cases random running sets, drawn before any is answered.
inline ::testing::AssertionResult random_victims_match(const VictimBatchFn& choose, Rng& rng, int cases,
                                                       const VictimCaseOptions& options = {}) {
  std::vector<VictimQuestion> questions;
  questions.reserve(size_t(cases));
  for (int i = 0; i < cases; ++i)
    questions.push_back({random_victim_case(rng, options),
                         "random case " + std::to_string(i + 1) + " of " + std::to_string(cases), std::nullopt});
  return victims_match(choose, questions);
}

// ---- 7.3 sample_top_p ----

// The probabilities of softmax(logits / T) in double (max subtracted), and the tokens sorted by
// decreasing probability, ties by increasing id — the order the contract defines.
struct SortedProbabilities {
  std::vector<double> p;       // by token id, normalised
  std::vector<int32_t> order;  // token ids by decreasing p
};

inline SortedProbabilities sorted_probabilities(std::span<const float> logits, float temperature) {
  SortedProbabilities s;
  const double max = double(*std::max_element(logits.begin(), logits.end()));
  double total = 0.0;
  for (const float l : logits) total += s.p.emplace_back(std::exp((double(l) - max) / double(temperature)));
  for (double& x : s.p) x /= total;
  s.order.resize(logits.size());
  std::iota(s.order.begin(), s.order.end(), 0);
  std::stable_sort(s.order.begin(), s.order.end(),
                   [&](int32_t a, int32_t b) { return s.p[size_t(a)] > s.p[size_t(b)]; });
  return s;
}

// The contract's token in long double, for @p top_p and @p u given (the nucleus rule, written
// apart from the engine's).
inline int32_t nucleus_token(const SortedProbabilities& s, long double top_p, long double u) {
  size_t kept = 0;
  long double mass = 0;
  while (kept < s.order.size() && (kept == 0 || mass < top_p)) mass += s.p[size_t(s.order[kept++])];
  long double cumulative = 0;
  for (size_t k = 0; k < kept; ++k) {
    cumulative += s.p[size_t(s.order[k])];
    if (cumulative / mass > u) return s.order[k];
  }
  return s.order[kept - 1];
}

/// Whether the token is the same when top_p and u move by 1e-9 either way: the case does not
/// hang on rounding (a correct summation in another order gives the same token).
inline bool top_p_case_is_clear(std::span<const float> logits, float temperature, float top_p, double u) {
  const SortedProbabilities s = sorted_probabilities(logits, temperature);
  constexpr long double shift = 1e-9L;
  const int32_t token = nucleus_token(s, top_p, u);
  for (const long double dp : {-shift, shift})
    for (const long double du : {-shift, shift})
      if (nucleus_token(s, top_p + dp, std::clamp<long double>(u + du, 0.0L, 1.0L - 1e-12L)) != token) return false;
  return true;
}

inline std::string describe_logits(std::span<const float> logits) {
  std::ostringstream s;
  s.precision(9);
  s << "{";
  const size_t shown = std::min<size_t>(logits.size(), 24);
  for (size_t i = 0; i < shown; ++i) s << (i ? ", " : "") << logits[i];
  if (shown < logits.size()) s << ", … (" << logits.size() << " in all)";
  s << "}";
  return s.str();
}

/// One question about a sampler: a row, what it teaches, and — for a hand case — the token worked
/// out by hand.
struct TopPQuestion {
  TopPCase input;
  std::string lesson;
  std::optional<int32_t> hand;
};

/// A hand case: the engine must sample @p token too (a lab bug otherwise).
inline TopPQuestion hand_token(std::vector<float> logits, float temperature, float top_p, double u, int32_t token,
                               std::string lesson) {
  return {{std::move(logits), temperature, top_p, u}, std::move(lesson), token};
}

inline std::string describe(const TopPCase& c, const std::string& lesson) {
  std::ostringstream input;
  input.precision(9);
  input << (lesson.empty() ? "" : lesson + ":") << "\n  logits " << describe_logits(c.logits) << "\n  temperature "
        << c.temperature << ", top_p " << c.top_p << ", u " << c.u;
  return input.str();
}

/// The failure for token @p got where @p expected was due: it walks through the sorted
/// probabilities, the nucleus and u.
inline ::testing::AssertionResult wrong_token(const TopPCase& c, const std::string& lesson, int32_t expected,
                                              int32_t got) {
  const SortedProbabilities s = sorted_probabilities(c.logits, c.temperature);
  size_t kept = 0;
  double mass = 0.0;
  while (kept < s.order.size() && (kept == 0 || mass < double(c.top_p))) mass += s.p[size_t(s.order[kept++])];
  std::ostringstream why;
  why.precision(6);
  why << "\n  by decreasing p (ties: smaller id first), with the cumulative probability:";
  double cumulative = 0.0;
  const size_t rows = std::min(s.order.size(), std::max<size_t>(kept + 2, 4));
  for (size_t k = 0; k < rows && k < 40; ++k) {
    const int32_t id = s.order[k];
    cumulative += s.p[size_t(id)];
    why << "\n    token " << id << ": p " << s.p[size_t(id)] << ", cumulative " << cumulative
        << (k < kept ? ", renormalised " : "");
    if (k < kept) why << cumulative / mass;
    if (k + 1 == kept) why << "   ← the nucleus ends here (first cumulative ≥ top_p)";
    if (id == expected) why << "   ← expected";
    if (id == got) why << "   ← got";
  }
  if (rows < s.order.size()) why << "\n    … " << s.order.size() - rows << " more";
  why << "\n  nucleus: " << kept << " token" << (kept == 1 ? "" : "s") << ", mass " << mass
      << "; the token is the first whose renormalised cumulative exceeds u = " << c.u;
  const auto rank = std::find(s.order.begin(), s.order.end(), got) - s.order.begin();
  if (got < 0 || got >= int32_t(c.logits.size()))
    why << "\n  got " << got << ": not a token of the vocabulary (0 … " << c.logits.size() - 1 << ")";
  else if (size_t(rank) >= kept)
    why << "\n  got token " << got << " (rank " << rank << " by probability): outside the nucleus of " << kept
        << " — keep the tokens up to and including the first whose cumulative probability reaches top_p";
  else
    why << "\n  got token " << got << " (rank " << rank
        << "): inside the nucleus, but not where u falls — walk the nucleus in sorted order and renormalise by its "
           "mass";
  return ::testing::AssertionFailure() << describe(c, lesson) << "\n  expected token " << expected << ", got " << got
                                       << why.str();
}

/// @p sample answers every question as the engine's sample_top_p() does: all the rows in one
/// batch, then the reference, then the comparison; the first wrong token fails.
inline ::testing::AssertionResult tokens_match(const TopPBatchFn& sample, const std::vector<TopPQuestion>& questions) {
  std::vector<TopPCase> inputs;
  inputs.reserve(questions.size());
  for (const TopPQuestion& q : questions) inputs.push_back(q.input);
  const Answers<int32_t> got = sample(inputs);
  std::vector<int32_t> expected;
  expected.reserve(questions.size());
  for (const TopPQuestion& q : questions) {
    expected.push_back(engine::sample_top_p(q.input.logits, q.input.temperature, q.input.top_p, q.input.u));
    if (q.hand && expected.back() != *q.hand)
      return ::testing::AssertionFailure()
             << "lab bug: engine::sample_top_p disagrees with the hand-written token of \"" << q.lesson << "\"";
  }
  for (size_t k = 0; k < questions.size(); ++k) {
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << "no token from student_sample_top_p: " << missing << "\n"
                                           << describe(questions[k].input, questions[k].lesson);
    if (got.answers[k] != expected[k])
      return wrong_token(questions[k].input, questions[k].lesson, expected[k], got.answers[k]);
  }
  return ::testing::AssertionSuccess();
}

/// ch07.h's worked example: logits {2, 1, 0, 1}, T = 1.
inline ::testing::AssertionResult worked_example(const TopPBatchFn& sample) {
  const std::vector<float> logits{2.0f, 1.0f, 0.0f, 1.0f};
  return tokens_match(
      sample,
      {
          hand_token(logits, 1.0f, 0.7f, 0.5, 0, "top_p 0.7 keeps tokens 0 and 1; u = 0.5 → 0"),
          hand_token(logits, 1.0f, 0.7f, 0.8, 1,
                     "top_p 0.7 keeps tokens 0 and 1 (mass 0.731); u = 0.8 → 1 (renormalised 0.731, then 1)"),
          hand_token(logits, 1.0f, 0.9f, 0.9, 3, "top_p 0.9 keeps tokens 0, 1, 3 (1 and 3 tie: 1 first); u = 0.9 → 3"),
          hand_token(logits, 1.0f, 0.9f, 0.999, 3,
                     "top_p 0.9: token 2 (p 0.072) is outside the nucleus, even for u near 1"),
          hand_token(logits, 1.0f, 0.01f, 0.99, 0, "a tiny top_p keeps only the most likely token"),
          hand_token(logits, 1.0f, 1.0f, 0.99, 2,
                     "top_p 1 keeps every token: u = 0.99 reaches the least likely one (token 2)"),
      });
}

/// A u in [0, 1) for which the row's token does not hang on rounding, drawn up to 10 times;
/// nullopt when none was found.
inline std::optional<double> clear_u(Rng& rng, std::span<const float> logits, float temperature, float top_p) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int tries = 0; tries < 10; ++tries)
    if (const double u = uniform(rng.engine()); top_p_case_is_clear(logits, temperature, top_p, u)) return u;
  return std::nullopt;
}

/// The worked example in new clothes: its logits {2, 1, 0, 1} in a random order, all shifted by
/// a random constant (the same distribution, the tokens renamed), at T = 1 or a random T, with
/// the example's top_p values or a random one, and random u.
inline ::testing::AssertionResult worked_example_reordered(const TopPBatchFn& sample, Rng& rng, int cases) {
  std::vector<TopPQuestion> questions;
  for (int i = 0; i < cases; ++i) {
    std::vector<float> logits{2.0f, 1.0f, 0.0f, 1.0f};
    std::shuffle(logits.begin(), logits.end(), rng.engine());
    const float shift = rng.uniform(-20.0f, 20.0f);
    for (float& l : logits) l += shift;
    const float temperature = rng.integer(0, 1) ? 1.0f : rng.uniform(0.5f, 2.0f);
    const int64_t kind = rng.integer(0, 4);
    const float top_p = kind < 4 ? std::array<float, 4>{0.7f, 0.9f, 0.01f, 1.0f}[size_t(kind)]
                                 : std::max(rng.uniform(0.0f, 1.0f), 1e-3f);
    const std::optional<double> u = clear_u(rng, logits, temperature, top_p);
    if (!u) continue;
    std::ostringstream lesson;
    lesson << "the worked example's logits reordered and shifted by " << shift << " (random case " << i + 1 << " of "
           << cases << ")";
    questions.push_back({{std::move(logits), temperature, top_p, *u}, lesson.str(), std::nullopt});
  }
  return tokens_match(sample, questions);
}

/// Equal logits: equal probabilities, the smaller id first.
inline ::testing::AssertionResult equal_logits_put_smaller_id_first(const TopPBatchFn& sample) {
  const std::vector<float> flat{1.5f, 1.5f, 1.5f, 1.5f};
  const std::vector<float> pairs{0.0f, 3.0f, 0.0f, 3.0f, 1.0f};
  return tokens_match(
      sample, {
                  hand_token(flat, 1.0f, 0.6f, 0.1, 0, "four equal logits, top_p 0.6: tokens 0, 1, 2 kept"),
                  hand_token(flat, 1.0f, 0.6f, 0.5, 1, "… u = 0.5 → token 1 (renormalised 1/3, 2/3, 1)"),
                  hand_token(flat, 1.0f, 0.6f, 0.9, 2, "… u = 0.9 → token 2; token 3 is never chosen"),
                  hand_token(pairs, 0.5f, 0.5f, 0.9, 3,
                             "tokens 1 and 3 tie at the top with p ≈ 0.494 each: top_p 0.5 needs both; u = 0.9 → 3"),
                  hand_token(pairs, 0.5f, 0.5f, 0.2, 1, "tokens 1 and 3 tie at the top: 1 comes first"),
              });
}

/// top_p = 1 (the whole distribution) and tiny top_p (greedy), on random rows.
inline ::testing::AssertionResult top_p_one_and_tiny(const TopPBatchFn& sample, Rng& rng) {
  std::vector<TopPQuestion> questions;
  for (int i = 0; i < 300; ++i) {
    std::vector<float> logits(size_t(rng.integer(1, 64)));
    rng.fill_normal(logits, 0.0f, 3.0f);
    const float temperature = rng.uniform(0.1f, 2.0f);
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng.engine());
    const std::string where = "case " + std::to_string(i + 1) + " of 300";
    const float tiny = rng.uniform(1e-6f, 1e-3f);
    const auto ask = [&](float top_p, const std::string& lesson) {
      TopPQuestion& q = questions.emplace_back();
      q.input.logits = logits;
      q.input.temperature = temperature;
      q.input.top_p = top_p;
      q.input.u = u;
      q.lesson = where + lesson;
    };
    ask(tiny, ", a tiny top_p: the nucleus is the most likely token alone (greedy)");
    if (top_p_case_is_clear(logits, temperature, 1.0f, u))
      ask(1.0f, ", top_p 1: every token is a candidate (the sum may stop a hair under 1)");
  }
  return tokens_match(sample, questions);
}

/// Logits in the thousands and small temperatures: exp overflows unless the max is subtracted.
inline ::testing::AssertionResult extreme_logits(const TopPBatchFn& sample) {
  const std::vector<float> large{3000.0f, 2999.0f, -3000.0f, 2998.5f};
  const std::vector<float> negative{-5000.0f, -5001.0f, -5000.5f};
  return tokens_match(sample,
                      {
                          hand_token(large, 1.0f, 0.95f, 0.7, 1,
                                     "logits in the thousands: exp(3000) overflows a double — subtract the max first"),
                          hand_token(large, 0.1f, 1.0f, 0.999, 0, "T = 0.1 sharpens: token 0 holds almost all"),
                          hand_token(negative, 2.0f, 1.0f, 0.5, 2,
                                     "logits far below 0: exp(−5000) underflows to 0 unless the max is subtracted"),
                      });
}

/// Options of random top-p rows.
struct TopPCaseOptions {
  float min_temperature = 0.1f;  ///< temperatures are drawn in [min, max)
  float max_temperature = 2.0f;  ///< …
  float min_centre = -10.0f;     ///< the logits are centred on a value drawn in [min, max)
  float max_centre = 10.0f;      ///< …
  int64_t few_values = 0;        ///< > 0: the logits take only this many (whole-number) values, so many tie
};

/// A random row (nullopt when no u away from the boundaries of its cumulative sums was found).
inline std::optional<TopPCase> random_top_p_case(Rng& rng, const TopPCaseOptions& options = {}) {
  TopPCase c;
  if (options.few_values > 0) {
    c.logits.resize(static_cast<size_t>(rng.integer(2, 40)));
    const float base = std::round(rng.uniform(options.min_centre, options.max_centre));
    for (float& l : c.logits) l = base + float(rng.integer(0, options.few_values - 1));
  } else {
    const int64_t vocab = rng.integer(0, 1) ? rng.integer(1, 8) : rng.integer(9, 300);
    c.logits.resize(static_cast<size_t>(vocab));
    const float scale = std::array<float, 3>{0.5f, 2.0f, 8.0f}[size_t(rng.integer(0, 2))];
    rng.fill_normal(c.logits, rng.uniform(options.min_centre, options.max_centre), scale);
    if (rng.integer(0, 2) == 0)  // a third of the rows: logits on a coarse grid, so that many tie
      for (float& l : c.logits) l = std::round(l);
  }
  c.temperature = rng.uniform(options.min_temperature, options.max_temperature);
  const int64_t kind = rng.integer(0, 5);
  c.top_p = kind == 0 ? 1.0f : kind == 1 ? rng.uniform(1e-4f, 0.02f) : std::max(rng.uniform(0.0f, 1.0f), 1e-3f);
  const std::optional<double> u = clear_u(rng, c.logits, c.temperature, c.top_p);
  if (!u) return std::nullopt;
  c.u = *u;
  return c;
}

/// @p sample equals the engine on @p cases random rows, drawn before any is answered (rows whose
/// token hangs on rounding are skipped).
inline ::testing::AssertionResult random_top_p_match(const TopPBatchFn& sample, Rng& rng, int cases,
                                                     const TopPCaseOptions& options = {}) {
  std::vector<TopPQuestion> questions;
  questions.reserve(size_t(cases));
  for (int i = 0; i < cases; ++i)
    if (std::optional<TopPCase> c = random_top_p_case(rng, options))
      questions.push_back(
          {std::move(*c), "random case " + std::to_string(i + 1) + " of " + std::to_string(cases), std::nullopt});
  return tokens_match(sample, questions);
}

}  // namespace inferlab::testing::ch07
