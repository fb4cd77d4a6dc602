// Chapter 07 exercises, graded: the student's step planner (7.1), preemption victim (7.2) and
// nucleus sampler (7.3), each compared with the engine's own function (runtime/engine:
// plan_step, choose_victim, sample_top_p) — on hand-written cases that each teach one rule of the
// lesson, and beside them, in every test, on fresh random inputs (the seed is printed on failure;
// INFERLAB_SEED replays it). The checks live in student_check.h, shared with the wrong fixtures
// of tests/wrong/wrong_ch07_decisions.cpp that they must reject. The three exercises are graded
// separately; each TEST is one grading unit.
//
// Student code never runs in this process. A check draws all its inputs here and hands them to an
// adapter below, which converts them to the contract's types (exercises/07-continuous-batching/
// ch07.h declares its own, so that student code needs nothing but common/) and runs the student's
// function on every one of them in ONE sandboxed child process (tests/support/isolation.h: a fork
// costs about a millisecond, thousands of inputs cost one); the child sends back the answers, flat,
// and only then does this process compute the engine's answers, compare and record.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "07-continuous-batching/ch07.h"
#include "common/check.h"
#include "tests/07-continuous-batching/student_check.h"
#include "tests/support/isolation.h"
#include "tests/support/seeded.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch07PlanStep", "student_plan_step"},
    {"Ch07Victim", "student_choose_victim"},
    {"Ch07TopP", "student_sample_top_p"},
});

namespace ch07 = testing::ch07;
using testing::isolated_result;

// ---- running a batch in the sandbox ----

// Runs `answer(k)` — a student call whose answer is flattened into a few int64 — for every input
// k = 0 … count − 1 in ONE sandboxed child, and brings the answers back to this process. The child
// sends them as one flat vector, [length, values …] per input, and stops at the first input the
// call throws on; that input then runs alone, in a child of its own, for what it threw
// (NotImplemented stays NotImplemented). A child that crashes or exits loses the whole batch: then
// halving the batch finds the first input it fails on, and the answers before it.
template <class AnswerOne>
ch07::Answers<std::vector<int64_t>> isolated_answers(size_t count, const AnswerOne& answer) {
  const auto run_first = [&](size_t n) {
    return isolated_result([&] {  // in the child: the student's calls, nothing else
      std::vector<int64_t> flat;
      for (size_t k = 0; k < n; ++k) {
        std::vector<int64_t> one;
        try {
          one = answer(k);
        } catch (...) {
          break;
        }
        flat.push_back(int64_t(one.size()));
        flat.insert(flat.end(), one.begin(), one.end());
      }
      return flat;
    });
  };
  std::vector<int64_t> flat;
  std::string batch_failure;
  try {
    flat = run_first(count);
  } catch (const std::exception& error) {
    batch_failure = error.what();
    size_t good = 0, bad = count;  // the first `good` inputs are answered in one child, the first `bad` are not
    while (bad - good > 1) {
      const size_t middle = good + (bad - good) / 2;
      try {
        flat = run_first(middle);
        good = middle;
      } catch (const std::exception&) {
        bad = middle;
      }
    }
  }
  ch07::Answers<std::vector<int64_t>> result;
  for (size_t at = 0; at < flat.size() && result.answers.size() < count;) {
    const int64_t length = flat[at++];
    if (length < 0 || uint64_t(length) > flat.size() - at) {
      result.error = "its answers came back garbled (the sandboxed child wrote over the test's memory?)";
      return result;
    }
    result.answers.emplace_back(flat.begin() + std::ptrdiff_t(at), flat.begin() + std::ptrdiff_t(at + size_t(length)));
    at += size_t(length);
  }
  if (result.answers.size() < count) {
    const size_t k = result.answers.size();
    try {
      isolated_result([&] { return answer(k); });
      result.error = batch_failure.empty()
                         ? "it stopped at this input among the others, yet answers it when run alone"
                         : batch_failure + " — running the inputs up to this one in one child; alone, it is answered";
    } catch (const NotImplemented& error) {
      result.error = std::string("it threw: ") + error.what();
    } catch (const std::exception& error) {
      result.error = error.what();
    }
  }
  return result;
}

// ---- adapters: the engine's types ↔ the contract's, and the sandbox ----

std::vector<student::SequenceDemand> to_student(std::span<const engine::SequenceDemand> demands) {
  std::vector<student::SequenceDemand> out;
  for (const engine::SequenceDemand& d : demands) out.push_back({d.id, d.remaining});
  return out;
}

// Exercise 7.1 on a batch: each plan comes back as [id, tokens, id, tokens, …].
ch07::Answers<ch07::Plan> student_plans(std::span<const ch07::PlanCase> cases) {
  struct Input {
    std::vector<student::SequenceDemand> running, waiting;
    student::StepLimits limits;
  };
  std::vector<Input> inputs;  // converted here, before the fork
  inputs.reserve(cases.size());
  for (const ch07::PlanCase& c : cases) {
    Input& in = inputs.emplace_back(Input{to_student(c.running), to_student(c.waiting), {}});
    in.limits.token_budget = c.limits.token_budget;
    in.limits.max_seqs = c.limits.max_seqs;
    in.limits.chunk_size = c.limits.chunk_size;
    in.limits.chunked_prefill = c.limits.chunked_prefill;
  }
  const auto flat = isolated_answers(inputs.size(), [&](size_t k) {
    std::vector<int64_t> plan;
    for (const student::ScheduledChunk& c :
         student::student_plan_step(inputs[k].running, inputs[k].waiting, inputs[k].limits)) {
      plan.push_back(c.id);
      plan.push_back(c.tokens);
    }
    return plan;
  });
  ch07::Answers<ch07::Plan> plans{{}, flat.error};
  for (const std::vector<int64_t>& one : flat.answers) {
    ch07::Plan& plan = plans.answers.emplace_back();
    for (size_t i = 0; i + 1 < one.size(); i += 2) plan.push_back({one[i], one[i + 1]});
  }
  return plans;
}

// Exercise 7.2 on a batch: each answer comes back as [index].
ch07::Answers<int64_t> student_victims(std::span<const ch07::VictimCase> cases) {
  std::vector<std::vector<student::VictimCandidate>> inputs;
  inputs.reserve(cases.size());
  for (const ch07::VictimCase& running : cases) {
    std::vector<student::VictimCandidate>& in = inputs.emplace_back();
    for (const engine::VictimCandidate& c : running) in.push_back({c.id, c.arrival, c.num_computed});
  }
  const auto flat = isolated_answers(
      inputs.size(), [&](size_t k) { return std::vector<int64_t>{student::student_choose_victim(inputs[k])}; });
  ch07::Answers<int64_t> victims{{}, flat.error};
  for (const std::vector<int64_t>& one : flat.answers) victims.answers.push_back(one.size() == 1 ? one[0] : -1);
  return victims;
}

// Exercise 7.3 on a batch: each answer comes back as [token].
ch07::Answers<int32_t> student_tokens(std::span<const ch07::TopPCase> cases) {
  const auto flat = isolated_answers(cases.size(), [&](size_t k) {
    const ch07::TopPCase& c = cases[k];
    return std::vector<int64_t>{student::student_sample_top_p(c.logits, c.temperature, c.top_p, c.u)};
  });
  ch07::Answers<int32_t> tokens{{}, flat.error};
  for (const std::vector<int64_t>& one : flat.answers) tokens.answers.push_back(one.size() == 1 ? int32_t(one[0]) : -1);
  return tokens;
}

// ---- 7.1 the step planner ----

TEST(Ch07PlanStep, DecodesGoFirst) {
  // Running decodes (remaining 1) come before every prompt — one that arrived earlier, one in
  // the waiting queue — one token each, while the budget lasts: hand cases, then random running
  // lists with a prompt in progress listed before a decode.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::decodes_go_first(student_plans));
  EXPECT_TRUE(ch07::random_plans_match(student_plans, rng, 2000, {.decodes_behind_prompts = true}));
}

TEST(Ch07PlanStep, ChunkedPrefillCutsPromptsToTheChunkAndTheBudget) {
  // With chunked prefill a prompt gets min(remaining, chunk_size, budget left): hand cases with
  // the worked example of ch07.h, then random inputs with chunking on.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::chunks_fit_chunk_and_budget(student_plans));
  EXPECT_TRUE(ch07::random_plans_match(student_plans, rng, 2000, {.chunked = true}));
}

TEST(Ch07PlanStep, WithoutChunkingAPromptRunsWholeOrWaits) {
  // Without chunking a prompt larger than the remaining budget waits and blocks everything
  // behind it: the later prompts and the admissions. Hand cases, then random inputs with
  // chunking off.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::unchunked_prompts_run_whole_or_wait(student_plans));
  EXPECT_TRUE(ch07::random_plans_match(student_plans, rng, 2000, {.chunked = false}));
}

TEST(Ch07PlanStep, AdmissionsAreFirstComeFirstServed) {
  // Waiting requests in order while the running and admitted sequences are fewer than
  // max_seqs; the first that gets nothing stops the admissions. Hand cases, then random inputs
  // with a waiting queue and places left in the batch.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::admissions_are_fcfs(student_plans));
  EXPECT_TRUE(ch07::random_plans_match(student_plans, rng, 2000, {.admissions = true}));
}

TEST(Ch07PlanStep, TinyBudgets) {
  // Token budgets of 1 and 2 and chunks of 1: hand cases, then random inputs.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::tiny_budgets(student_plans));
  EXPECT_TRUE(ch07::random_plans_match(student_plans, rng, 2000, {.tiny_budgets_only = true}));
}

TEST(Ch07PlanStep, RandomDemandsMatchTheEngine) {
  // Random running and waiting lists (decodes and prompts mixed, ids in no order), budgets from
  // 1 to 300, chunk sizes from 1, chunking on and off, full batches: plans equal to the engine's.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::random_plans_match(student_plans, rng, 20000));
}

// ---- 7.2 the preemption victim ----

TEST(Ch07Victim, TheLatestArrivalIsPreempted) {
  // The request that arrived last, wherever it stands in the list and however much KV it holds:
  // hand cases, then random running sets where no two arrived together.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::latest_arrival_is_victim(student_victims));
  EXPECT_TRUE(ch07::random_victims_match(student_victims, rng, 2000, {.distinct_arrivals = true}));
}

TEST(Ch07Victim, TiesGoToTheLargerId) {
  // Requests that arrived at the same time: the larger id is the later one. Hand cases, then
  // random running sets where two or more share the latest arrival.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::ties_go_to_larger_id(student_victims));
  EXPECT_TRUE(ch07::random_victims_match(student_victims, rng, 2000, {.latest_tied = true}));
}

TEST(Ch07Victim, RandomRunningSetsMatchTheEngine) {
  // 1 to 10 running requests with few distinct arrival times (many ties), ids shuffled.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::random_victims_match(student_victims, rng, 20000));
}

// ---- 7.3 nucleus sampling ----

TEST(Ch07TopP, WorkedExample) {
  // ch07.h's example: logits {2, 1, 0, 1} at T = 1 with top_p 0.7, 0.9, 0.01 and 1; then the
  // same logits in random orders and shifts, at random top_p, T and u.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::worked_example(student_tokens));
  EXPECT_TRUE(ch07::worked_example_reordered(student_tokens, rng, 1000));
}

TEST(Ch07TopP, EqualLogitsPutTheSmallerIdFirst) {
  // Equal probabilities are ordered by id: the nucleus and the token u picks depend on it. Hand
  // cases, then random rows whose logits take only two to four values.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::equal_logits_put_smaller_id_first(student_tokens));
  for (const int64_t values : {2, 3, 4})
    EXPECT_TRUE(ch07::random_top_p_match(student_tokens, rng, 700, {.few_values = values}));
}

TEST(Ch07TopP, TopPOneAndTinyTopP) {
  // top_p = 1 samples the whole distribution; a tiny top_p keeps the most likely token alone.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::top_p_one_and_tiny(student_tokens, rng));
}

TEST(Ch07TopP, ExtremeLogitsAndTemperatures) {
  // Logits in the thousands (exp overflows without the max subtracted), temperatures 0.1 and 2,
  // then random rows at the ends of the temperature range and centred in the thousands.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::extreme_logits(student_tokens));
  EXPECT_TRUE(ch07::random_top_p_match(student_tokens, rng, 1000, {0.1f, 0.12f}));
  EXPECT_TRUE(ch07::random_top_p_match(student_tokens, rng, 1000, {1.9f, 2.0f}));
  EXPECT_TRUE(ch07::random_top_p_match(student_tokens, rng, 1000, {.min_centre = -5000.0f, .max_centre = 5000.0f}));
}

TEST(Ch07TopP, RandomLogitsMatchTheEngine) {
  // Vocabularies of 1 to 300 tokens, ties on a coarse grid, T in [0.1, 2), top_p in (0, 1]
  // (1 and tiny values included), u in [0, 1): tokens equal to the engine's.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::random_top_p_match(student_tokens, rng, 10000));
}

}  // namespace
}  // namespace inferlab
