#pragma once
// The checks of chapter 07's exercises (exercises/07-continuous-batching/ch07.h), on the engine's
// own types: the graded tests (test_student.cpp) run them on the student's functions through
// adapters, and tests/wrong/wrong_ch07_decisions.cpp runs them on deliberately wrong versions that they
// must reject. Every answer is compared with the engine's reference (runtime/engine:
// plan_step, choose_victim, sample_top_p); the hand cases first check that the reference gives
// the plan written by hand (a lab bug otherwise), so each one states a rule of the lesson. A
// failure shows the input, the expected and the returned answer, why the expected one is right,
// and — where it recognises one — the usual mistake behind the wrong one.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "common/rng.h"
#include "runtime/engine/sampling.h"
#include "runtime/engine/step_planner.h"

namespace inferlab::testing::ch07 {

using engine::ScheduledChunk;
using engine::SequenceDemand;
using engine::StepLimits;
using engine::VictimCandidate;

using Demands = std::vector<SequenceDemand>;
using Plan = std::vector<ScheduledChunk>;
/// A step planner (exercise 7.1), on the engine's types.
using PlanFn = std::function<Plan(std::span<const SequenceDemand>, std::span<const SequenceDemand>, const StepLimits&)>;
/// A victim policy (exercise 7.2): the index of the victim.
using VictimFn = std::function<int64_t(std::span<const VictimCandidate>)>;
/// A nucleus sampler (exercise 7.3): (logits, temperature, top_p, u) → token.
using TopPFn = std::function<int32_t(std::span<const float>, float, float, double)>;

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

/// @p plan on one input equals the engine's plan_step(); @p lesson says what the case teaches.
inline ::testing::AssertionResult plan_matches(const PlanFn& plan, std::span<const SequenceDemand> running,
                                               std::span<const SequenceDemand> waiting, const StepLimits& limits,
                                               const std::string& lesson = "") {
  const Plan expected = engine::plan_step(running, waiting, limits);
  const std::string input = (lesson.empty() ? "" : lesson + ":") + plan_input(running, waiting, limits);
  Plan got;
  try {
    got = plan(running, waiting, limits);
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << "student_plan_step threw: " << error.what() << "\n" << input;
  }
  if (got == expected) return ::testing::AssertionSuccess();
  const std::string broken = plan_rule_broken(got, running, waiting, limits);
  return ::testing::AssertionFailure() << input << "\n  expected " << describe(expected, running, waiting)
                                       << "\n  got      " << describe(got, running, waiting) << "\n  "
                                       << (broken.empty() ? first_difference(expected, got, running, waiting) : broken)
                                       << "\n  (the order: decodes of running sequences first, then their prompts in "
                                          "progress, then admissions from waiting in order)";
}

/// The engine plans @p hand_plan (a lab bug otherwise), and so does @p plan.
inline ::testing::AssertionResult plan_is(const PlanFn& plan, const Demands& running, const Demands& waiting,
                                          const StepLimits& limits, const Plan& hand_plan, const std::string& lesson) {
  const Plan reference = engine::plan_step(running, waiting, limits);
  if (reference != hand_plan)
    return ::testing::AssertionFailure() << "lab bug: engine::plan_step disagrees with the hand-written plan of \""
                                         << lesson << "\": " << describe(reference, running, waiting) << " vs "
                                         << describe(hand_plan, running, waiting);
  return plan_matches(plan, running, waiting, limits, lesson);
}

inline StepLimits limits_of(int64_t token_budget, int64_t max_seqs, int64_t chunk_size, bool chunked) {
  StepLimits limits;
  limits.token_budget = token_budget;
  limits.max_seqs = max_seqs;
  limits.chunk_size = chunk_size;
  limits.chunked_prefill = chunked;
  return limits;
}

// Runs every check of a list, returning the first failure.
inline ::testing::AssertionResult all_of(std::initializer_list<std::function<::testing::AssertionResult()>> checks) {
  for (const auto& check : checks)
    if (auto result = check(); !result) return result;
  return ::testing::AssertionSuccess();
}

/// Decodes go first: before a prompt that arrived earlier, before admissions; the budget may run
/// out among them.
inline ::testing::AssertionResult decodes_go_first(const PlanFn& plan) {
  return all_of({
      [&] {
        return plan_is(plan, {{7, 30}, {2, 1}, {5, 1}}, {}, limits_of(64, 4, 64, true), {{2, 1}, {5, 1}, {7, 30}},
                       "decodes go first even when a prompt arrived earlier (sequence 7 is listed first)");
      },
      [&] {
        return plan_is(plan, {{3, 1}}, {{8, 5}}, limits_of(3, 4, 8, true), {{3, 1}, {8, 2}},
                       "a running decode goes before a waiting prompt, which gets what is left");
      },
      [&] {
        return plan_is(plan, {{4, 1}, {9, 20}, {1, 1}, {6, 1}}, {{2, 3}}, limits_of(2, 5, 16, true), {{4, 1}, {1, 1}},
                       "the budget runs out among the decodes: the rest wait, in order (6, then the prompt of 9 "
                       "and the admission of 2)");
      },
  });
}

/// Chunked prefill: a prompt gets min(remaining, chunk_size, budget left).
inline ::testing::AssertionResult chunks_fit_chunk_and_budget(const PlanFn& plan) {
  return all_of({
      [&] {
        return plan_is(plan, {{1, 100}}, {}, limits_of(256, 4, 32, true), {{1, 32}},
                       "a prompt chunk is at most chunk_size tokens");
      },
      [&] {
        return plan_is(plan, {{1, 3}}, {}, limits_of(100, 4, 16, true), {{1, 3}},
                       "a prompt shorter than a chunk runs whole");
      },
      [&] {
        return plan_is(plan, {{1, 10}, {2, 50}}, {}, limits_of(20, 4, 16, true), {{1, 10}, {2, 10}},
                       "the last prompt gets what is left of the budget");
      },
      [&] {
        return plan_is(plan, {{3, 40}, {1, 1}, {2, 1}}, {{4, 100}, {5, 8}}, limits_of(32, 4, 16, true),
                       {{1, 1}, {2, 1}, {3, 16}, {4, 14}},
                       "ch07.h's worked example, chunked: decodes, a chunk of 3, 4 admitted with what is left, 5 "
                       "waits (4 sequences already)");
      },
  });
}

/// Without chunked prefill a prompt runs whole or waits, and blocks everything behind it.
inline ::testing::AssertionResult unchunked_prompts_run_whole_or_wait(const PlanFn& plan) {
  return all_of({
      [&] {
        return plan_is(plan, {{3, 40}, {1, 1}, {2, 1}}, {{4, 100}, {5, 8}}, limits_of(32, 4, 16, false),
                       {{1, 1}, {2, 1}},
                       "ch07.h's worked example, not chunked: 3's 40 tokens do not fit in the 30 left, so it "
                       "waits and so does everyone behind it");
      },
      [&] {
        return plan_is(plan, {}, {{4, 20}, {5, 3}}, limits_of(10, 4, 16, false), {},
                       "without chunking a prompt larger than the remaining budget waits and blocks later "
                       "admissions (5 would fit but may not overtake 4)");
      },
      [&] {
        return plan_is(plan, {}, {{4, 6}, {5, 3}, {6, 2}}, limits_of(10, 4, 16, false), {{4, 6}, {5, 3}},
                       "whole prompts while they fit: 6 needs 2 tokens, 1 is left");
      },
      [&] {
        return plan_is(plan, {{2, 1}}, {{4, 9}}, limits_of(10, 4, 4, false), {{2, 1}, {4, 9}},
                       "a prompt exactly as large as the budget left fits (chunk_size plays no part without "
                       "chunking)");
      },
      [&] {
        return plan_is(plan, {{1, 12}, {2, 3}}, {{3, 1}}, limits_of(10, 4, 16, false), {},
                       "a running prompt that does not fit stops the step: the shorter prompt of 2 and the "
                       "admission of 3 wait behind it");
      },
  });
}

/// Admissions: in order, while running + admitted < max_seqs, until one gets nothing.
inline ::testing::AssertionResult admissions_are_fcfs(const PlanFn& plan) {
  return all_of({
      [&] {
        return plan_is(plan, {{1, 1}, {2, 1}, {3, 1}}, {{4, 5}, {5, 5}}, limits_of(100, 4, 16, true),
                       {{1, 1}, {2, 1}, {3, 1}, {4, 5}},
                       "max_seqs 4 with 3 running: one place, for the first waiting request");
      },
      [&] {
        return plan_is(plan, {{1, 1}, {2, 7}}, {{9, 4}}, limits_of(100, 2, 16, true), {{1, 1}, {2, 7}},
                       "max_seqs reached by the running sequences: no admission");
      },
      [&] {
        return plan_is(plan, {}, {{4, 50}, {5, 2}}, limits_of(20, 8, 8, true), {{4, 8}, {5, 2}},
                       "an admitted prompt gets a chunk too, and the next one what it needs");
      },
      [&] {
        return plan_is(plan, {}, {{4, 30}, {5, 2}}, limits_of(10, 8, 16, true), {{4, 10}},
                       "the budget is spent: the next waiting request gets nothing and the admissions stop");
      },
      [&] {
        return plan_is(plan, {{1, 1}, {2, 9}}, {{3, 1}}, limits_of(20, 4, 4, true), {{1, 1}, {2, 4}, {3, 1}},
                       "a one-token prompt is admitted after the running prompts, not with the decodes");
      },
  });
}

/// Budgets of 1 and 2 tokens and chunks of 1.
inline ::testing::AssertionResult tiny_budgets(const PlanFn& plan) {
  return all_of({
      [&] {
        return plan_is(plan, {{1, 50}, {2, 1}}, {{3, 4}}, limits_of(1, 4, 16, true), {{2, 1}},
                       "token_budget 1: the decode takes it");
      },
      [&] {
        return plan_is(plan, {{1, 50}}, {{3, 4}}, limits_of(1, 4, 16, true), {{1, 1}},
                       "token_budget 1, chunked: a one-token chunk of the running prompt");
      },
      [&] {
        return plan_is(plan, {{1, 50}}, {{3, 1}}, limits_of(1, 4, 16, false), {},
                       "token_budget 1, not chunked: the prompt cannot run, and the one-token prompt behind it "
                       "may not overtake");
      },
      [&] {
        return plan_is(plan, {{5, 1}, {6, 1}, {7, 1}}, {}, limits_of(2, 4, 16, true), {{5, 1}, {6, 1}},
                       "token_budget 2: two decodes of three");
      },
      [&] {
        return plan_is(plan, {{1, 5}, {2, 5}}, {{3, 4}}, limits_of(8, 4, 1, true), {{1, 1}, {2, 1}, {3, 1}},
                       "chunk_size 1: one prompt token per sequence per step");
      },
  });
}

/// A random plan input: ids in no particular order, decodes and prompts mixed, budgets down to 1.
struct PlanCase {
  Demands running, waiting;
  StepLimits limits;
};

/// Options of random plan cases.
struct PlanCaseOptions {
  bool tiny_budgets_only = false;  ///< token budgets of 1 or 2 only
};

inline PlanCase random_plan_case(Rng& rng, const PlanCaseOptions& options = {}) {
  PlanCase c;
  c.limits.max_seqs = rng.integer(1, 8);
  const int64_t kind = rng.integer(0, 9);
  if (options.tiny_budgets_only)
    c.limits.token_budget = rng.integer(1, 2);
  else
    c.limits.token_budget = kind == 0 ? 1 : kind == 1 ? 2 : kind <= 3 ? rng.integer(3, 12) : rng.integer(1, 300);
  c.limits.chunk_size = rng.integer(0, 3) == 0 ? rng.integer(1, 3) : rng.integer(1, 128);
  c.limits.chunked_prefill = rng.integer(0, 1) == 1;
  // A full batch a third of the time: max_seqs reached by the running sequences alone.
  const int64_t num_running = rng.integer(0, 2) == 0 ? c.limits.max_seqs : rng.integer(0, c.limits.max_seqs);
  const int64_t num_waiting = rng.integer(0, 6);
  std::vector<int64_t> ids(size_t(num_running + num_waiting));
  std::iota(ids.begin(), ids.end(), rng.integer(0, 50));
  std::shuffle(ids.begin(), ids.end(), rng.engine());
  size_t next = 0;
  const auto prompt = [&] { return rng.integer(0, 2) == 0 ? rng.integer(2, 12) : rng.integer(2, 200); };
  for (int64_t i = 0; i < num_running; ++i) c.running.push_back({ids[next++], rng.integer(0, 1) ? 1 : prompt()});
  for (int64_t i = 0; i < num_waiting; ++i)
    c.waiting.push_back({ids[next++], rng.integer(0, 7) == 0 ? 1 : prompt()});  // now and then a one-token prompt
  return c;
}

/// @p plan equals the engine on @p cases random inputs.
inline ::testing::AssertionResult random_plans_match(const PlanFn& plan, Rng& rng, int cases,
                                                     const PlanCaseOptions& options = {}) {
  for (int i = 0; i < cases; ++i) {
    const PlanCase c = random_plan_case(rng, options);
    if (auto result = plan_matches(plan, c.running, c.waiting, c.limits,
                                   "random case " + std::to_string(i + 1) + " of " + std::to_string(cases));
        !result)
      return result;
  }
  return ::testing::AssertionSuccess();
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

/// @p choose on one running set equals the engine's choose_victim().
inline ::testing::AssertionResult victim_matches(const VictimFn& choose, std::span<const VictimCandidate> running,
                                                 const std::string& lesson = "") {
  const int64_t expected = engine::choose_victim(running);
  const std::string input = (lesson.empty() ? "" : lesson + ":") + "\n  running" + describe(running);
  int64_t got = -1;
  try {
    got = choose(running);
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << "student_choose_victim threw: " << error.what() << "\n" << input;
  }
  if (got == expected) return ::testing::AssertionSuccess();
  const VictimCandidate& e = running[size_t(expected)];
  ::testing::AssertionResult failure = ::testing::AssertionFailure();
  failure << input << "\n  expected index " << expected << " (id " << e.id << ": the latest arrival, at " << e.arrival
          << ", ties going to the larger id)\n  got      index " << got;
  if (got < 0 || got >= int64_t(running.size()))
    return failure << ", outside running (" << running.size() << " candidates)";
  return failure << " (id " << running[size_t(got)].id << ", arrival " << running[size_t(got)].arrival << ")"
                 << victim_mistake(running, expected, got);
}

/// The engine picks index @p hand_index (a lab bug otherwise), and so does @p choose.
inline ::testing::AssertionResult victim_is(const VictimFn& choose, const std::vector<VictimCandidate>& running,
                                            int64_t hand_index, const std::string& lesson) {
  if (engine::choose_victim(running) != hand_index)
    return ::testing::AssertionFailure()
           << "lab bug: engine::choose_victim disagrees with the hand-written answer of \"" << lesson << "\"";
  return victim_matches(choose, running, lesson);
}

/// The latest arrival is the victim, wherever it stands, whatever it has computed.
inline ::testing::AssertionResult latest_arrival_is_victim(const VictimFn& choose) {
  return all_of({
      [&] {
        return victim_is(choose, {{1, 0.5, 300}, {2, 2.5, 10}, {3, 1.0, 40}}, 1,
                         "the request that arrived last (id 2, at 2.5) gives its blocks back, though it holds the "
                         "fewest tokens");
      },
      [&] {
        return victim_is(choose, {{9, 4.0, 5}, {4, 1.0, 900}, {6, 3.0, 70}}, 0,
                         "the latest arrival stands first in the list");
      },
      [&] {
        return victim_is(choose, {{5, 0.0, 2}, {8, 0.25, 1}, {2, 3.75, 800}}, 2,
                         "the latest arrival holds the most KV: it is still the victim (num_computed plays no part)");
      },
      [&] {
        return victim_is(choose, {{42, 7.0, 3}}, 0, "one running request: it is the victim");
      },
  });
}

/// Ties in arrival go to the larger id.
inline ::testing::AssertionResult ties_go_to_larger_id(const VictimFn& choose) {
  return all_of({
      [&] {
        return victim_is(choose, {{3, 2.0, 10}, {7, 2.0, 10}, {5, 1.0, 10}}, 1,
                         "3 and 7 arrived together, last: the larger id, 7, is the victim");
      },
      [&] {
        return victim_is(choose, {{8, 1.5, 10}, {2, 1.5, 10}, {6, 1.5, 10}}, 0,
                         "all arrived together: the largest id, 8, standing first");
      },
      [&] {
        return victim_is(choose, {{1, 0.0, 10}, {4, 0.0, 10}, {9, 0.0, 10}, {0, 0.0, 10}}, 2,
                         "all arrived together: the largest id, 9, standing third");
      },
  });
}

/// @p choose equals the engine on @p cases random running sets with many ties.
inline ::testing::AssertionResult random_victims_match(const VictimFn& choose, Rng& rng, int cases) {
  for (int i = 0; i < cases; ++i) {
    const int64_t n = rng.integer(1, 10);
    std::vector<int64_t> ids(static_cast<size_t>(n));
    std::iota(ids.begin(), ids.end(), rng.integer(0, 20));
    std::shuffle(ids.begin(), ids.end(), rng.engine());
    std::vector<VictimCandidate> running;
    const int64_t distinct_arrivals = rng.integer(1, 6);  // few values: ties are common
    for (int64_t k = 0; k < n; ++k)
      running.push_back({ids[size_t(k)], 0.5 * double(rng.integer(0, distinct_arrivals - 1)), rng.integer(1, 500)});
    if (auto result =
            victim_matches(choose, running, "random case " + std::to_string(i + 1) + " of " + std::to_string(cases));
        !result)
      return result;
  }
  return ::testing::AssertionSuccess();
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

/// @p sample on one row equals the engine's sample_top_p(); the failure message walks through the
/// sorted probabilities, the nucleus and u.
inline ::testing::AssertionResult top_p_matches(const TopPFn& sample, std::span<const float> logits, float temperature,
                                                float top_p, double u, const std::string& lesson = "") {
  const int32_t expected = engine::sample_top_p(logits, temperature, top_p, u);
  std::ostringstream input;
  input.precision(9);
  input << (lesson.empty() ? "" : lesson + ":") << "\n  logits " << describe_logits(logits) << "\n  temperature "
        << temperature << ", top_p " << top_p << ", u " << u;
  int32_t got = -1;
  try {
    got = sample(logits, temperature, top_p, u);
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << "student_sample_top_p threw: " << error.what() << "\n" << input.str();
  }
  if (got == expected) return ::testing::AssertionSuccess();

  const SortedProbabilities s = sorted_probabilities(logits, temperature);
  size_t kept = 0;
  double mass = 0.0;
  while (kept < s.order.size() && (kept == 0 || mass < double(top_p))) mass += s.p[size_t(s.order[kept++])];
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
      << "; the token is the first whose renormalised cumulative exceeds u = " << u;
  const auto rank = std::find(s.order.begin(), s.order.end(), got) - s.order.begin();
  if (got < 0 || got >= int32_t(logits.size()))
    why << "\n  got " << got << ": not a token of the vocabulary (0 … " << logits.size() - 1 << ")";
  else if (size_t(rank) >= kept)
    why << "\n  got token " << got << " (rank " << rank << " by probability): outside the nucleus of " << kept
        << " — keep the tokens up to and including the first whose cumulative probability reaches top_p";
  else
    why << "\n  got token " << got << " (rank " << rank
        << "): inside the nucleus, but not where u falls — walk the nucleus in sorted order and renormalise by its "
           "mass";
  return ::testing::AssertionFailure() << input.str() << "\n  expected token " << expected << ", got " << got
                                       << why.str();
}

/// The engine samples @p hand_token (a lab bug otherwise), and so does @p sample.
inline ::testing::AssertionResult token_is(const TopPFn& sample, const std::vector<float>& logits, float temperature,
                                           float top_p, double u, int32_t hand_token, const std::string& lesson) {
  if (engine::sample_top_p(logits, temperature, top_p, u) != hand_token)
    return ::testing::AssertionFailure() << "lab bug: engine::sample_top_p disagrees with the hand-written token of \""
                                         << lesson << "\"";
  return top_p_matches(sample, logits, temperature, top_p, u, lesson);
}

/// ch07.h's worked example: logits {2, 1, 0, 1}, T = 1.
inline ::testing::AssertionResult worked_example(const TopPFn& sample) {
  const std::vector<float> logits{2.0f, 1.0f, 0.0f, 1.0f};
  return all_of({
      [&] { return token_is(sample, logits, 1.0f, 0.7f, 0.5, 0, "top_p 0.7 keeps tokens 0 and 1; u = 0.5 → 0"); },
      [&] {
        return token_is(sample, logits, 1.0f, 0.7f, 0.8, 1,
                        "top_p 0.7 keeps tokens 0 and 1 (mass 0.731); u = 0.8 → 1 (renormalised 0.731, then 1)");
      },
      [&] {
        return token_is(sample, logits, 1.0f, 0.9f, 0.9, 3,
                        "top_p 0.9 keeps tokens 0, 1, 3 (1 and 3 tie: 1 first); u = 0.9 → 3");
      },
      [&] {
        return token_is(sample, logits, 1.0f, 0.9f, 0.999, 3,
                        "top_p 0.9: token 2 (p 0.072) is outside the nucleus, even for u near 1");
      },
      [&] { return token_is(sample, logits, 1.0f, 0.01f, 0.99, 0, "a tiny top_p keeps only the most likely token"); },
      [&] {
        return token_is(sample, logits, 1.0f, 1.0f, 0.99, 2,
                        "top_p 1 keeps every token: u = 0.99 reaches the least likely one (token 2)");
      },
  });
}

/// Equal logits: equal probabilities, the smaller id first.
inline ::testing::AssertionResult equal_logits_put_smaller_id_first(const TopPFn& sample) {
  const std::vector<float> flat{1.5f, 1.5f, 1.5f, 1.5f};
  const std::vector<float> pairs{0.0f, 3.0f, 0.0f, 3.0f, 1.0f};
  return all_of({
      [&] { return token_is(sample, flat, 1.0f, 0.6f, 0.1, 0, "four equal logits, top_p 0.6: tokens 0, 1, 2 kept"); },
      [&] { return token_is(sample, flat, 1.0f, 0.6f, 0.5, 1, "… u = 0.5 → token 1 (renormalised 1/3, 2/3, 1)"); },
      [&] { return token_is(sample, flat, 1.0f, 0.6f, 0.9, 2, "… u = 0.9 → token 2; token 3 is never chosen"); },
      [&] {
        return token_is(sample, pairs, 0.5f, 0.5f, 0.9, 3,
                        "tokens 1 and 3 tie at the top with p ≈ 0.494 each: top_p 0.5 needs both; u = 0.9 → 3");
      },
      [&] { return token_is(sample, pairs, 0.5f, 0.5f, 0.2, 1, "tokens 1 and 3 tie at the top: 1 comes first"); },
  });
}

/// top_p = 1 (the whole distribution) and tiny top_p (greedy).
inline ::testing::AssertionResult top_p_one_and_tiny(const TopPFn& sample, Rng& rng) {
  for (int i = 0; i < 300; ++i) {
    std::vector<float> logits(size_t(rng.integer(1, 64)));
    rng.fill_normal(logits, 0.0f, 3.0f);
    const float temperature = rng.uniform(0.1f, 2.0f);
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng.engine());
    const std::string where = "case " + std::to_string(i + 1) + " of 300";
    const float tiny = rng.uniform(1e-6f, 1e-3f);
    if (auto r = top_p_matches(sample, logits, temperature, tiny, u,
                               where + ", a tiny top_p: the nucleus is the most likely token alone (greedy)");
        !r)
      return r;
    if (top_p_case_is_clear(logits, temperature, 1.0f, u))
      if (auto r = top_p_matches(sample, logits, temperature, 1.0f, u,
                                 where + ", top_p 1: every token is a candidate (the sum may stop a hair under 1)");
          !r)
        return r;
  }
  return ::testing::AssertionSuccess();
}

/// Logits in the thousands and small temperatures: exp overflows unless the max is subtracted.
inline ::testing::AssertionResult extreme_logits(const TopPFn& sample) {
  const std::vector<float> large{3000.0f, 2999.0f, -3000.0f, 2998.5f};
  const std::vector<float> negative{-5000.0f, -5001.0f, -5000.5f};
  return all_of({
      [&] {
        return token_is(sample, large, 1.0f, 0.95f, 0.7, 1,
                        "logits in the thousands: exp(3000) overflows a double — subtract the max first");
      },
      [&] { return token_is(sample, large, 0.1f, 1.0f, 0.999, 0, "T = 0.1 sharpens: token 0 holds almost all"); },
      [&] {
        return token_is(sample, negative, 2.0f, 1.0f, 0.5, 2,
                        "logits far below 0: exp(−5000) underflows to 0 unless the max is subtracted");
      },
  });
}

/// Options of random top-p cases.
struct TopPCaseOptions {
  float min_temperature = 0.1f;  ///< temperatures are drawn in [min, max)
  float max_temperature = 2.0f;  ///< …
};

/// @p sample equals the engine on @p cases random rows (skipping u that lies on a boundary).
inline ::testing::AssertionResult random_top_p_match(const TopPFn& sample, Rng& rng, int cases,
                                                     const TopPCaseOptions& options = {}) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int i = 0; i < cases; ++i) {
    const int64_t vocab = rng.integer(0, 1) ? rng.integer(1, 8) : rng.integer(9, 300);
    std::vector<float> logits(static_cast<size_t>(vocab));
    const float scale = std::array<float, 3>{0.5f, 2.0f, 8.0f}[size_t(rng.integer(0, 2))];
    rng.fill_normal(logits, rng.uniform(-10.0f, 10.0f), scale);
    if (rng.integer(0, 2) == 0)  // a third of the rows: logits on a coarse grid, so that many tie
      for (float& l : logits) l = std::round(l);
    const float temperature = rng.uniform(options.min_temperature, options.max_temperature);
    const int64_t kind = rng.integer(0, 5);
    const float top_p = kind == 0   ? 1.0f
                        : kind == 1 ? rng.uniform(1e-4f, 0.02f)
                                    : std::max(rng.uniform(0.0f, 1.0f), 1e-3f);
    double u = uniform(rng.engine());
    for (int tries = 0; tries < 10 && !top_p_case_is_clear(logits, temperature, top_p, u); ++tries)
      u = uniform(rng.engine());
    if (!top_p_case_is_clear(logits, temperature, top_p, u)) continue;
    if (auto r = top_p_matches(sample, logits, temperature, top_p, u,
                               "random case " + std::to_string(i + 1) + " of " + std::to_string(cases));
        !r)
      return r;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace inferlab::testing::ch07
