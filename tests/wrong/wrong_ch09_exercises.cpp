// Wrong answers to chapter 09's exercises, run through the very checks that grade the students
// (tests/09-serving/student_check.h): each mistake must be rejected with a message that names it,
// and the same sketch without the mistake must pass. The mistakes:
//   9.1 a stop-string filter that shows each piece as soon as it arrives; one that forgets what it
//       held on a mismatch ("aab" in "aaab" missed); one where the first STARTED match wins; one
//       that holds a fixed window of bytes (splitting UTF-8 characters); one whose flush() drops
//       the held text;
//   9.2 a histogram with le as a strict < (a value on a bound one bucket too high); an exposition
//       with per-bucket (not cumulative) counts; one without the +Inf line; one with le first;
//       one with "{}" where there are no labels;
//   9.3 admission that lets capacity + 1 in (≤ for <); one that forgets max_waiting; one that
//       counts refused requests; a check-then-increment race and a two-step read-modify-write
//       under threads; a Retry-After rounded down, without the + 1, without the division by
//       max_running, unclamped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "09-serving/ch09.h"
#include "tests/09-serving/student_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

namespace ch09 = testing::ch09;
using ::testing::HasSubstr;

// A wrong answer must fail its check, and the failure must say which mistake it is.
void expect_rejected(const ::testing::AssertionResult& result, const std::string& mistake) {
  EXPECT_FALSE(result) << "a wrong answer (" << mistake << ") passed";
  if (!result) std::cout << result.message() << "\n\n";  // what a student would read
  EXPECT_THAT(std::string(result.message()), HasSubstr(mistake)) << result.message();
}

// ---- 9.1 ----

// Every check of the graded 9.1 tests, on @p rule.
std::vector<::testing::AssertionResult> stop_checks(ch09::StopRule rule) {
  testing::SeededRng rng;
  const ch09::StopRunFn run = ch09::stop_rule_runner(rule);
  return {ch09::stop_traces_match(run, ch09::boundary_cases()),
          ch09::stop_traces_match(run, ch09::release_cases()),
          ch09::stop_traces_match(run, ch09::overlap_cases()),
          ch09::stop_traces_match(run, ch09::first_completed_cases()),
          ch09::stop_traces_match(run, ch09::utf8_cases()),
          ch09::stop_traces_match(run, ch09::simple_cases()),
          ch09::stop_traces_match(run, ch09::random_stop_cases(rng, 2000)),
          ch09::stop_traces_match(run, ch09::random_stop_cases(rng, 1000, {.utf8 = true}))};
}

TEST(WrongCh09Stop, TheContractWrittenInTheCheckPasses) {
  for (const auto& result : stop_checks(ch09::StopRule::contract)) EXPECT_TRUE(result);
}

TEST(WrongCh09Stop, ShowingEachPieceAtOnceIsRejected) {
  const std::string what = "shows each piece as soon as it arrives";
  expect_rejected(
      ch09::stop_traces_match(ch09::stop_rule_runner(ch09::StopRule::shown_at_once), ch09::boundary_cases()), what);
  EXPECT_FALSE(stop_checks(ch09::StopRule::shown_at_once)[6]) << "the random texts must catch it too";
}

TEST(WrongCh09Stop, ForgettingTheHeldTextOnAMismatchIsRejected) {
  expect_rejected(
      ch09::stop_traces_match(ch09::stop_rule_runner(ch09::StopRule::reset_on_mismatch), ch09::overlap_cases()),
      "forgets what it held on a mismatch");
  EXPECT_FALSE(stop_checks(ch09::StopRule::reset_on_mismatch)[6]) << "the random texts must catch it too";
}

TEST(WrongCh09Stop, TheFirstStartedMatchIsRejected) {
  expect_rejected(
      ch09::stop_traces_match(ch09::stop_rule_runner(ch09::StopRule::first_started), ch09::first_completed_cases()),
      "the match that STARTS first winning");
  EXPECT_FALSE(stop_checks(ch09::StopRule::first_started)[6]) << "the random texts must catch it too";
}

TEST(WrongCh09Stop, AFixedWindowOfBytesIsRejected) {
  expect_rejected(ch09::stop_traces_match(ch09::stop_rule_runner(ch09::StopRule::fixed_window), ch09::utf8_cases()),
                  "holds back the last |longest stop| − 1 bytes");
  EXPECT_FALSE(stop_checks(ch09::StopRule::fixed_window)[7]) << "the random UTF-8 texts must catch it too";
}

TEST(WrongCh09Stop, AFlushThatDropsTheHeldTextIsRejected) {
  expect_rejected(
      ch09::stop_traces_match(ch09::stop_rule_runner(ch09::StopRule::flush_drops_held), ch09::release_cases()),
      "flush() dropping the held text");
}

// ---- 9.2 ----

std::vector<::testing::AssertionResult> histogram_checks(const ch09::HistogramRunFn& run) {
  testing::SeededRng rng;
  return {ch09::histograms_match(run, {ch09::worked_example_histogram()}),
          ch09::histograms_match(run, ch09::boundary_histograms()),
          ch09::histograms_match(run, ch09::cumulative_histograms()),
          ch09::histograms_match(run, ch09::random_histograms(rng, 300))};
}

TEST(WrongCh09Histogram, TheModelWrittenInTheCheckPasses) {
  for (const auto& result :
       histogram_checks(ch09::histogram_runner(ch09::BucketRule::le, ch09::ExpositionMistake::none)))
    EXPECT_TRUE(result);
}

TEST(WrongCh09Histogram, LeAsAStrictLessThanIsRejected) {
  const auto run = ch09::histogram_runner(ch09::BucketRule::strict_less, ch09::ExpositionMistake::none);
  expect_rejected(ch09::histograms_match(run, ch09::boundary_histograms()), "le means less OR EQUAL");
  EXPECT_FALSE(histogram_checks(run)[3]) << "the random observations must catch it too";
}

TEST(WrongCh09Histogram, PerBucketCountsAreRejected) {
  const auto run = ch09::histogram_runner(ch09::BucketRule::le, ch09::ExpositionMistake::per_bucket_counts);
  expect_rejected(ch09::histograms_match(run, ch09::cumulative_histograms()), "the exposition is CUMULATIVE");
  EXPECT_FALSE(histogram_checks(run)[0]) << "the worked example must catch it too";
}

TEST(WrongCh09Histogram, AMissingInfBucketIsRejected) {
  expect_rejected(
      ch09::histograms_match(ch09::histogram_runner(ch09::BucketRule::le, ch09::ExpositionMistake::no_inf_bucket),
                             {ch09::worked_example_histogram()}),
      "the le=\"+Inf\" bucket line left out");
}

TEST(WrongCh09Histogram, LeBeforeTheOtherLabelsIsRejected) {
  expect_rejected(
      ch09::histograms_match(ch09::histogram_runner(ch09::BucketRule::le, ch09::ExpositionMistake::le_first),
                             {ch09::worked_example_histogram()}),
      "le written before the other labels");
}

TEST(WrongCh09Histogram, EmptyBracesAreRejected) {
  expect_rejected(
      ch09::histograms_match(ch09::histogram_runner(ch09::BucketRule::le, ch09::ExpositionMistake::empty_braces),
                             ch09::cumulative_histograms()),
      "\"{}\" written with no labels");
}

// ---- 9.3: one thread ----

std::vector<::testing::AssertionResult> script_checks(ch09::AdmitRule rule) {
  testing::SeededRng rng;
  return {ch09::admission_scripts_match(ch09::admission_runner(rule), ch09::hand_scripts()),
          ch09::admission_scripts_match(ch09::admission_runner(rule), ch09::random_scripts(rng, 200))};
}

TEST(WrongCh09Admission, TheModelWrittenInTheCheckPasses) {
  for (const auto& result : script_checks(ch09::AdmitRule::contract)) EXPECT_TRUE(result);
}

TEST(WrongCh09Admission, OneTooManyIsRejected) {
  const auto results = script_checks(ch09::AdmitRule::off_by_one);
  expect_rejected(results[0], "admitting while in_flight ≤ capacity");
  EXPECT_FALSE(results[1]);
}

TEST(WrongCh09Admission, ForgettingTheWaitingPlacesIsRejected) {
  const auto results = script_checks(ch09::AdmitRule::waiting_forgotten);
  expect_rejected(results[0], "capacity() = max_running + max_waiting");
  EXPECT_FALSE(results[1]);
}

TEST(WrongCh09Admission, CountingARefusalIsRejected) {
  const auto results = script_checks(ch09::AdmitRule::refusal_counts);
  expect_rejected(results[0], "a refused request counted all the same");
  EXPECT_FALSE(results[1]);
}

// ---- 9.3: threads ----

// Right on one thread, wrong on several: the check and the increment are two steps.
class CheckThenAdd {
 public:
  CheckThenAdd(int64_t max_running, int64_t max_waiting) : capacity_(max_running + max_waiting) {}
  bool try_admit() {
    if (in_flight_.load() >= capacity_) return false;
    in_flight_.fetch_add(1);  // another thread may have passed the same check in between
    return true;
  }
  void release() { in_flight_.fetch_sub(1); }
  int64_t in_flight() const { return in_flight_.load(); }
  int64_t capacity() const { return capacity_; }

 private:
  int64_t capacity_;
  student::SharedCounter in_flight_;  // the contract's counter: the check's hook runs in it
};

// A read-modify-write in two steps (as `++count` on a plain integer compiles): updates get lost.
class TwoStepUpdate {
 public:
  TwoStepUpdate(int64_t max_running, int64_t max_waiting) : capacity_(max_running + max_waiting) {}
  bool try_admit() {
    const int64_t held = in_flight_.load();
    if (held >= capacity_) return false;
    in_flight_.store(held + 1);
    return true;
  }
  void release() { in_flight_.store(in_flight_.load() - 1); }
  int64_t in_flight() const { return in_flight_.load(); }
  int64_t capacity() const { return capacity_; }

 private:
  int64_t capacity_;
  student::SharedCounter in_flight_;  // the contract's counter: the check's hook runs in it
};

// The contract: one compare-exchange.
class CompareExchange {
 public:
  CompareExchange(int64_t max_running, int64_t max_waiting) : capacity_(max_running + max_waiting) {}
  bool try_admit() {
    int64_t held = in_flight_.load();
    do {
      if (held >= capacity_) return false;
    } while (!in_flight_.compare_exchange_weak(held, held + 1));
    return true;
  }
  void release() { in_flight_.fetch_sub(1); }
  int64_t in_flight() const { return in_flight_.load(); }
  int64_t capacity() const { return capacity_; }

 private:
  int64_t capacity_;
  student::SharedCounter in_flight_;  // the contract's counter: the check's hook runs in it
};

template <class A>
ch09::HammerFn hammer_with() {
  return [](const ch09::HammerCase& c) {
    A admission(c.max_running, c.max_waiting);
    return ch09::hammer(admission, c, [](void (*hook)()) { student::SharedCounter::hook = hook; });
  };
}

// The graded test's cases, each of which must reject the race: all of them together do.
::testing::AssertionResult all_hammers_hold(const ch09::HammerFn& run) {
  for (const ch09::HammerCase& c : ch09::hammer_cases())
    if (::testing::AssertionResult r = ch09::hammer_holds(run, c); !r) return r;
  return ::testing::AssertionSuccess();
}

TEST(WrongCh09Admission, ACompareExchangeLoopPassesUnderThreads) {
  EXPECT_TRUE(all_hammers_hold(hammer_with<CompareExchange>()));
}

TEST(WrongCh09Admission, ACheckThenIncrementRaceIsRejected) {
  expect_rejected(all_hammers_hold(hammer_with<CheckThenAdd>()), "went over capacity");
}

TEST(WrongCh09Admission, ATwoStepReadModifyWriteIsRejected) {
  const ::testing::AssertionResult result = all_hammers_hold(hammer_with<TwoStepUpdate>());
  EXPECT_FALSE(result) << "a two-step read-modify-write passed";
  if (!result) std::cout << result.message() << "\n\n";
  EXPECT_THAT(std::string(result.message()),
              ::testing::AnyOf(HasSubstr("went over capacity"), HasSubstr("were lost"), HasSubstr("given back twice")));
}

// ---- 9.3: Retry-After ----

std::vector<::testing::AssertionResult> retry_checks(ch09::RetryRule rule) {
  testing::SeededRng rng;
  return {ch09::retries_match(ch09::retry_runner(rule), ch09::hand_retries()),
          ch09::retries_match(ch09::retry_runner(rule), ch09::random_retries(rng, 2000))};
}

TEST(WrongCh09RetryAfter, TheModelWrittenInTheCheckPasses) {
  for (const auto& result : retry_checks(ch09::RetryRule::contract)) EXPECT_TRUE(result);
}

TEST(WrongCh09RetryAfter, RoundingDownIsRejected) {
  const auto results = retry_checks(ch09::RetryRule::no_ceil);
  expect_rejected(results[0], "the quotient rounded down");
  EXPECT_FALSE(results[1]);
}

TEST(WrongCh09RetryAfter, AheadWithoutThePlusOneIsRejected) {
  const auto results = retry_checks(ch09::RetryRule::no_plus_one);
  expect_rejected(results[0], "ahead = in_flight − capacity");
  EXPECT_FALSE(results[1]);
}

TEST(WrongCh09RetryAfter, ForgettingTheRunningRequestsIsRejected) {
  const auto results = retry_checks(ch09::RetryRule::no_divide);
  expect_rejected(results[0], "divide by max_running");
  EXPECT_FALSE(results[1]);
}

TEST(WrongCh09RetryAfter, NoClampIsRejected) {
  expect_rejected(retry_checks(ch09::RetryRule::no_clamp)[0], "no clamp");
}

}  // namespace
}  // namespace inferlab
