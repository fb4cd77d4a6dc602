// Wrong answers to chapter 07's exercises, run through the very checks that grade the students
// (tests/07-continuous-batching/student_check.h): each mistake must be rejected, and the same
// sketch without the mistake must pass. One switch per mistake:
//   7.1 a planner that admits waiting prompts before the running decodes; one whose unchunked
//       admissions skip a prompt that must wait and admit the shorter ones behind it (overtaking:
//       no longer first come first served); one that counts only the admitted sequences against
//       max_seqs (the running ones hold places too);
//   7.2 a victim policy that preempts the oldest request; one that breaks arrival ties towards
//       the smaller id;
//   7.3 a top-p that keeps one token too few (stops before the token that reaches top_p); one
//       that samples in token-id order instead of by decreasing probability.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>
#include <span>
#include <vector>

#include "tests/07-continuous-batching/student_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

namespace ch07 = testing::ch07;
using engine::ScheduledChunk;
using engine::SequenceDemand;
using engine::StepLimits;
using engine::VictimCandidate;

// ---- 7.1 ----

enum class PlanMistake { none, admissions_before_decodes, admissions_overtake, max_seqs_ignores_running };

// The checks take a batch planner; this one calls the sketch on each input in this process.
ch07::PlanBatchFn planner(PlanMistake mistake) {
  return ch07::one_at_a_time(ch07::PlanFn([mistake](std::span<const SequenceDemand> running,
                                                    std::span<const SequenceDemand> waiting, const StepLimits& limits) {
    ch07::Plan plan;
    int64_t budget = limits.token_budget;
    const auto share = [&](int64_t remaining) -> int64_t {
      if (limits.chunked_prefill) return std::min({remaining, limits.chunk_size, budget});
      return remaining <= budget ? remaining : 0;
    };
    int64_t seqs = mistake == PlanMistake::max_seqs_ignores_running ? 0 : int64_t(running.size());
    const auto admit = [&] {
      for (const SequenceDemand& s : waiting) {
        if (seqs >= limits.max_seqs) break;
        const int64_t n = share(s.remaining);
        if (n == 0) {
          if (mistake == PlanMistake::admissions_overtake) continue;  // the shorter ones behind go first
          break;
        }
        plan.push_back({s.id, n});
        budget -= n;
        ++seqs;
      }
    };
    if (mistake == PlanMistake::admissions_before_decodes) admit();
    for (const SequenceDemand& s : running)
      if (s.remaining == 1 && budget > 0) {
        plan.push_back({s.id, 1});
        --budget;
      }
    for (const SequenceDemand& s : running) {
      if (s.remaining == 1) continue;
      const int64_t n = share(s.remaining);
      if (n == 0) return plan;
      plan.push_back({s.id, n});
      budget -= n;
    }
    if (mistake != PlanMistake::admissions_before_decodes) admit();
    return plan;
  }));
}

::testing::AssertionResult random_plans(PlanMistake mistake) {
  testing::SeededRng rng;
  return ch07::random_plans_match(planner(mistake), rng, 20000);
}

// Rejected by @p hand (a hand case of the graded tests) and by the random comparison; prints both
// messages, which are what a student would read.
void expect_rejected(const ::testing::AssertionResult& hand, const ::testing::AssertionResult& random) {
  EXPECT_FALSE(hand) << "the hand cases accept the mistake";
  std::cout << "hand cases: " << hand.message() << "\n";
  EXPECT_FALSE(random) << "the random cases accept the mistake";
  std::cout << "random cases: " << random.message() << "\n";
}

TEST(WrongCh07, PlannerWithoutMistakesPasses) {
  const ch07::PlanBatchFn plan = planner(PlanMistake::none);
  EXPECT_TRUE(ch07::decodes_go_first(plan));
  EXPECT_TRUE(ch07::chunks_fit_chunk_and_budget(plan));
  EXPECT_TRUE(ch07::unchunked_prompts_run_whole_or_wait(plan));
  EXPECT_TRUE(ch07::admissions_are_fcfs(plan));
  EXPECT_TRUE(ch07::tiny_budgets(plan));
  EXPECT_TRUE(random_plans(PlanMistake::none));
  // The random inputs each graded test leans towards its rule.
  testing::SeededRng rng;
  for (const ch07::PlanCaseOptions options :
       {ch07::PlanCaseOptions{.decodes_behind_prompts = true}, ch07::PlanCaseOptions{.chunked = true},
        ch07::PlanCaseOptions{.chunked = false}, ch07::PlanCaseOptions{.admissions = true},
        ch07::PlanCaseOptions{.tiny_budgets_only = true}})
    EXPECT_TRUE(ch07::random_plans_match(plan, rng, 2000, options));
}

TEST(WrongCh07, AdmissionsBeforeDecodesAreRejected) {
  expect_rejected(ch07::decodes_go_first(planner(PlanMistake::admissions_before_decodes)),
                  random_plans(PlanMistake::admissions_before_decodes));
}

TEST(WrongCh07, UnchunkedAdmissionsThatOvertakeAreRejected) {
  expect_rejected(ch07::unchunked_prompts_run_whole_or_wait(planner(PlanMistake::admissions_overtake)),
                  random_plans(PlanMistake::admissions_overtake));
}

TEST(WrongCh07, MaxSeqsWithoutTheRunningSequencesIsRejected) {
  expect_rejected(ch07::admissions_are_fcfs(planner(PlanMistake::max_seqs_ignores_running)),
                  random_plans(PlanMistake::max_seqs_ignores_running));
}

// ---- 7.2 ----

enum class VictimMistake { none, oldest, ties_to_smaller_id };

ch07::VictimBatchFn victim_policy(VictimMistake mistake) {
  return ch07::one_at_a_time(ch07::VictimFn([mistake](std::span<const VictimCandidate> running) {
    int64_t victim = 0;
    for (size_t i = 1; i < running.size(); ++i) {
      const VictimCandidate &a = running[i], &v = running[size_t(victim)];
      const bool later = mistake == VictimMistake::oldest               ? a.arrival < v.arrival
                         : a.arrival != v.arrival                       ? a.arrival > v.arrival
                         : mistake == VictimMistake::ties_to_smaller_id ? a.id < v.id
                                                                        : a.id > v.id;
      if (later) victim = int64_t(i);
    }
    return victim;
  }));
}

::testing::AssertionResult random_victims(VictimMistake mistake) {
  testing::SeededRng rng;
  return ch07::random_victims_match(victim_policy(mistake), rng, 20000);
}

TEST(WrongCh07, VictimPolicyWithoutMistakesPasses) {
  EXPECT_TRUE(ch07::latest_arrival_is_victim(victim_policy(VictimMistake::none)));
  EXPECT_TRUE(ch07::ties_go_to_larger_id(victim_policy(VictimMistake::none)));
  EXPECT_TRUE(random_victims(VictimMistake::none));
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::random_victims_match(victim_policy(VictimMistake::none), rng, 2000, {.distinct_arrivals = true}));
  EXPECT_TRUE(ch07::random_victims_match(victim_policy(VictimMistake::none), rng, 2000, {.latest_tied = true}));
}

TEST(WrongCh07, PreemptingTheOldestIsRejected) {
  expect_rejected(ch07::latest_arrival_is_victim(victim_policy(VictimMistake::oldest)),
                  random_victims(VictimMistake::oldest));
}

TEST(WrongCh07, TiesToTheSmallerIdAreRejected) {
  expect_rejected(ch07::ties_go_to_larger_id(victim_policy(VictimMistake::ties_to_smaller_id)),
                  random_victims(VictimMistake::ties_to_smaller_id));
}

// ---- 7.3 ----

enum class TopPMistake { none, one_token_too_few, unsorted_order };

ch07::TopPBatchFn top_p_sampler(TopPMistake mistake) {
  return ch07::one_at_a_time(ch07::TopPFn([mistake](std::span<const float> logits, float temperature, float top_p,
                                                    double u) {
    const double max = double(*std::max_element(logits.begin(), logits.end()));
    std::vector<double> p(logits.size());
    double total = 0.0;
    for (size_t i = 0; i < p.size(); ++i) total += p[i] = std::exp((double(logits[i]) - max) / double(temperature));
    std::vector<int32_t> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    if (mistake != TopPMistake::unsorted_order)
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
    size_t kept = 0;
    double mass = 0.0;
    while (kept < order.size()) {
      const double next = p[size_t(order[kept])] / total;
      // one_token_too_few: stops before the token that would reach top_p, instead of after it.
      if (mistake == TopPMistake::one_token_too_few && kept > 0 && mass + next >= double(top_p)) break;
      mass += next;
      ++kept;
      if (mistake != TopPMistake::one_token_too_few && mass >= double(top_p)) break;
    }
    double cumulative = 0.0;
    for (size_t i = 0; i < kept; ++i) {
      cumulative += p[size_t(order[i])] / total;
      if (cumulative > u * mass) return order[i];
    }
    return order[kept - 1];
  }));
}

::testing::AssertionResult random_top_p(TopPMistake mistake) {
  testing::SeededRng rng;
  return ch07::random_top_p_match(top_p_sampler(mistake), rng, 10000);
}

TEST(WrongCh07, TopPWithoutMistakesPasses) {
  const ch07::TopPBatchFn sample = top_p_sampler(TopPMistake::none);
  EXPECT_TRUE(ch07::worked_example(sample));
  EXPECT_TRUE(ch07::equal_logits_put_smaller_id_first(sample));
  testing::SeededRng rng;
  EXPECT_TRUE(ch07::top_p_one_and_tiny(sample, rng));
  EXPECT_TRUE(ch07::extreme_logits(sample));
  EXPECT_TRUE(random_top_p(TopPMistake::none));
  EXPECT_TRUE(ch07::worked_example_reordered(sample, rng, 1000));
  EXPECT_TRUE(ch07::random_top_p_match(sample, rng, 1000, {.few_values = 3}));
  EXPECT_TRUE(ch07::random_top_p_match(sample, rng, 1000, {.min_centre = -5000.0f, .max_centre = 5000.0f}));
}

TEST(WrongCh07, ANucleusOneTokenShortIsRejected) {
  expect_rejected(ch07::worked_example(top_p_sampler(TopPMistake::one_token_too_few)),
                  random_top_p(TopPMistake::one_token_too_few));
}

TEST(WrongCh07, SamplingInTokenOrderIsRejected) {
  expect_rejected(ch07::worked_example(top_p_sampler(TopPMistake::unsorted_order)),
                  random_top_p(TopPMistake::unsorted_order));
}

}  // namespace
}  // namespace inferlab
