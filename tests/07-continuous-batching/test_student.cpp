// Chapter 07 exercises, graded: the student's step planner (7.1), preemption victim (7.2) and
// nucleus sampler (7.3), each compared with the engine's own function (runtime/engine:
// plan_step, choose_victim, sample_top_p) — first on hand-written cases that each teach one rule
// of the lesson, then on thousands of fresh random cases (the seed is printed on failure;
// INFERLAB_SEED replays it). The checks live in student_check.h, shared with the wrong fixtures
// of tests/wrong/wrong_ch07_decisions.cpp that they must reject; here they run on the student's functions
// through adapters from the engine's types to the contract's (exercises/07-continuous-batching/
// ch07.h declares its own, so that student code needs nothing but common/). The three exercises
// are graded separately; each TEST is one grading unit.
#include <gtest/gtest.h>

#include <span>
#include <vector>

#include "07-continuous-batching/ch07.h"
#include "tests/07-continuous-batching/student_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

namespace ch07 = testing::ch07;

// ---- adapters: the engine's types ↔ the contract's ----

std::vector<student::SequenceDemand> to_student(std::span<const engine::SequenceDemand> demands) {
  std::vector<student::SequenceDemand> out;
  for (const engine::SequenceDemand& d : demands) out.push_back({d.id, d.remaining});
  return out;
}

ch07::Plan student_plan(std::span<const engine::SequenceDemand> running,
                        std::span<const engine::SequenceDemand> waiting, const engine::StepLimits& limits) {
  student::StepLimits student_limits;
  student_limits.token_budget = limits.token_budget;
  student_limits.max_seqs = limits.max_seqs;
  student_limits.chunk_size = limits.chunk_size;
  student_limits.chunked_prefill = limits.chunked_prefill;
  const auto student_running = to_student(running), student_waiting = to_student(waiting);
  ch07::Plan plan;
  for (const student::ScheduledChunk& c : student::student_plan_step(student_running, student_waiting, student_limits))
    plan.push_back({c.id, c.tokens});
  return plan;
}

int64_t student_victim(std::span<const engine::VictimCandidate> running) {
  std::vector<student::VictimCandidate> candidates;
  for (const engine::VictimCandidate& c : running) candidates.push_back({c.id, c.arrival, c.num_computed});
  return student::student_choose_victim(candidates);
}

int32_t student_top_p(std::span<const float> logits, float temperature, float top_p, double u) {
  return student::student_sample_top_p(logits, temperature, top_p, u);
}

// ---- 7.1 the step planner ----

TEST(Ch07PlanStep, DecodesGoFirst) {
  // Running decodes (remaining 1) come before every prompt — one that arrived earlier, one in
  // the waiting queue — one token each, while the budget lasts.
  EXPECT_TRUE(ch07::decodes_go_first(student_plan));
}

TEST(Ch07PlanStep, ChunkedPrefillCutsPromptsToTheChunkAndTheBudget) {
  // With chunked prefill a prompt gets min(remaining, chunk_size, budget left); the worked
  // example of ch07.h.
  EXPECT_TRUE(ch07::chunks_fit_chunk_and_budget(student_plan));
}

TEST(Ch07PlanStep, WithoutChunkingAPromptRunsWholeOrWaits) {
  // Without chunking a prompt larger than the remaining budget waits and blocks everything
  // behind it: the later prompts and the admissions.
  EXPECT_TRUE(ch07::unchunked_prompts_run_whole_or_wait(student_plan));
}

TEST(Ch07PlanStep, AdmissionsAreFirstComeFirstServed) {
  // Waiting requests in order while the running and admitted sequences are fewer than
  // max_seqs; the first that gets nothing stops the admissions.
  EXPECT_TRUE(ch07::admissions_are_fcfs(student_plan));
}

TEST(Ch07PlanStep, TinyBudgets) {
  // Token budgets of 1 and 2 and chunks of 1: hand cases, then random inputs.
  EXPECT_TRUE(ch07::tiny_budgets(student_plan));
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::random_plans_match(student_plan, rng, 2000, {.tiny_budgets_only = true}));
}

TEST(Ch07PlanStep, RandomDemandsMatchTheEngine) {
  // Random running and waiting lists (decodes and prompts mixed, ids in no order), budgets from
  // 1 to 300, chunk sizes from 1, chunking on and off, full batches: plans equal to the engine's.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::random_plans_match(student_plan, rng, 20000));
}

// ---- 7.2 the preemption victim ----

TEST(Ch07Victim, TheLatestArrivalIsPreempted) {
  // The request that arrived last, wherever it stands in the list and however much KV it holds.
  EXPECT_TRUE(ch07::latest_arrival_is_victim(student_victim));
}

TEST(Ch07Victim, TiesGoToTheLargerId) {
  // Requests that arrived at the same time: the larger id is the later one.
  EXPECT_TRUE(ch07::ties_go_to_larger_id(student_victim));
}

TEST(Ch07Victim, RandomRunningSetsMatchTheEngine) {
  // 1 to 10 running requests with few distinct arrival times (many ties), ids shuffled.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::random_victims_match(student_victim, rng, 20000));
}

// ---- 7.3 nucleus sampling ----

TEST(Ch07TopP, WorkedExample) {
  // ch07.h's example: logits {2, 1, 0, 1} at T = 1 with top_p 0.7, 0.9, 0.01 and 1.
  EXPECT_TRUE(ch07::worked_example(student_top_p));
}

TEST(Ch07TopP, EqualLogitsPutTheSmallerIdFirst) {
  // Equal probabilities are ordered by id: the nucleus and the token u picks depend on it.
  EXPECT_TRUE(ch07::equal_logits_put_smaller_id_first(student_top_p));
}

TEST(Ch07TopP, TopPOneAndTinyTopP) {
  // top_p = 1 samples the whole distribution; a tiny top_p keeps the most likely token alone.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::top_p_one_and_tiny(student_top_p, rng));
}

TEST(Ch07TopP, ExtremeLogitsAndTemperatures) {
  // Logits in the thousands (exp overflows without the max subtracted), temperatures 0.1 and 2,
  // then random rows at the ends of the temperature range.
  EXPECT_TRUE(ch07::extreme_logits(student_top_p));
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::random_top_p_match(student_top_p, rng, 1000, {0.1f, 0.12f}));
  EXPECT_TRUE(ch07::random_top_p_match(student_top_p, rng, 1000, {1.9f, 2.0f}));
}

TEST(Ch07TopP, RandomLogitsMatchTheEngine) {
  // Vocabularies of 1 to 300 tokens, ties on a coarse grid, T in [0.1, 2), top_p in (0, 1]
  // (1 and tiny values included), u in [0, 1): tokens equal to the engine's.
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::random_top_p_match(student_top_p, rng, 10000));
}

}  // namespace
}  // namespace inferlab
