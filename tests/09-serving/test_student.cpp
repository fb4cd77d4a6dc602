// Chapter 09 exercises, graded: the student's stop-string filter (9.1), Prometheus histogram
// (9.2) and admission control (9.3), each compared with the lab's own implementation — the
// server's StopStringMatcher (runtime/tokenizer/stop_strings.h), Histogram and MetricsText
// (runtime/serving/prometheus.h), AdmissionControl and retry_after_seconds (runtime/serving/admission.h) — and
// a model written in student_check.h, on hand-worked cases that each teach one rule and, beside
// them, fresh random inputs (the seed is printed on failure; INFERLAB_SEED replays it). The checks
// live in student_check.h, shared with the wrong fixtures of tests/wrong/wrong_ch09_exercises.cpp
// that they must reject. Each TEST is one grading unit.
//
// Student code never runs in this process. A check draws all its inputs here and hands them to an
// adapter below, which runs the student's class on every one of them in ONE sandboxed child
// process (tests/support/isolated_batch.h); the child sends back what the class answered as
// bytes, and only then does this process compute the expected answers and compare. 9.3's threads
// run in the child too (hammer() of student_check.h): the child sends back only what the test's
// side of the loop counted.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "09-serving/ch09.h"
#include "tests/09-serving/student_check.h"
#include "tests/support/isolated_batch.h"
#include "tests/support/isolation.h"
#include "tests/support/seeded.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch09Stop", "StopStringFilter::push"},
    {"Ch09Histogram", "StudentHistogram"},
    {"Ch09Histogram.TheExpositionIsCumulative", "StudentHistogram::exposition"},
    {"Ch09Admission", "StudentAdmission::try_admit"},
    {"Ch09Admission.RetryAfterWorkedExamples", "retry_after_seconds"},
    {"Ch09Admission.RetryAfterMatchesTheServer", "retry_after_seconds"},
});

namespace ch09 = testing::ch09;
using testing::AnswerReader;
using testing::AnswerWriter;
using testing::isolated_batch;

static_assert(student::StopStringFilter::npos == ch09::kNoMatch, "ch09.h's npos is the check's kNoMatch");

// ---- adapters: the student's classes in the sandbox, their answers as bytes ----

// Exercise 9.1 on a batch: each answer is the case's trace (one step per push, then flush's).
ch09::Answers<ch09::StopTrace> student_stops(std::span<const ch09::StopCase> cases) {
  const testing::BatchAnswers flat = isolated_batch(cases.size(), [&](size_t k) {
    student::StopStringFilter filter(cases[k].stops);
    const ch09::StopTrace trace =
        ch09::trace_filter(filter, cases[k], [](const student::StopStringFilter& f) { return f.matched(); });
    AnswerWriter out;
    for (const ch09::StopStep& step : trace) {
      out.text(step.shown);
      out.number(step.stopped ? 1 : 0);
      out.number(int64_t(step.matched));
      out.text(step.held);
    }
    return std::move(out).str();
  });
  ch09::Answers<ch09::StopTrace> traces{{}, flat.error};
  for (size_t k = 0; k < flat.answers.size(); ++k) {
    AnswerReader in(flat.answers[k]);
    ch09::StopTrace& trace = traces.answers.emplace_back();
    for (size_t i = 0; i <= cases[k].pieces.size() && in.ok(); ++i) {
      ch09::StopStep step;
      step.shown = in.text();
      step.stopped = in.number() != 0;
      step.matched = size_t(in.number());
      step.held = in.text();
      if (in.ok()) trace.push_back(std::move(step));
    }
  }
  return traces;
}

// Exercise 9.2 on a batch: each answer is the buckets observed, the counts, sum, count and text.
ch09::Answers<ch09::HistogramResult> student_histograms(std::span<const ch09::HistogramCase> cases) {
  const testing::BatchAnswers flat = isolated_batch(cases.size(), [&](size_t k) {
    student::StudentHistogram histogram(cases[k].bounds);
    const ch09::HistogramResult r = ch09::fill(histogram, cases[k]);
    AnswerWriter out;
    out.number(int64_t(r.buckets.size()));
    for (const int64_t b : r.buckets) out.number(b);
    out.number(int64_t(r.counts.size()));
    for (const uint64_t n : r.counts) out.number(int64_t(n));
    out.real(r.sum);
    out.number(int64_t(r.count));
    out.text(r.text);
    return std::move(out).str();
  });
  ch09::Answers<ch09::HistogramResult> results{{}, flat.error};
  for (const std::string& one : flat.answers) {
    AnswerReader in(one);
    ch09::HistogramResult& r = results.answers.emplace_back();
    for (int64_t n = in.number(); n > 0 && in.ok(); --n) r.buckets.push_back(in.number());
    for (int64_t n = in.number(); n > 0 && in.ok(); --n) r.counts.push_back(uint64_t(in.number()));
    r.sum = in.real();
    r.count = uint64_t(in.number());
    r.text = in.text();
  }
  return results;
}

// Exercise 9.3's scripts on a batch: each answer is the trace of try_admit / release / in_flight.
ch09::Answers<ch09::AdmissionTrace> student_scripts(std::span<const ch09::AdmissionScript> scripts) {
  const testing::BatchAnswers flat = isolated_batch(scripts.size(), [&](size_t k) {
    student::StudentAdmission admission(scripts[k].max_running, scripts[k].max_waiting);
    AnswerWriter out;
    for (const int64_t v : ch09::run_script(admission, scripts[k])) out.number(v);
    return std::move(out).str();
  });
  ch09::Answers<ch09::AdmissionTrace> traces{{}, flat.error};
  for (const std::string& one : flat.answers) {
    AnswerReader in(one);
    ch09::AdmissionTrace& t = traces.answers.emplace_back();
    for (size_t i = 0; i < one.size() / sizeof(int64_t); ++i) t.push_back(in.number());
  }
  return traces;
}

// Exercise 9.3's threads: one case in a child of its own, the counts back.
ch09::HammerStats student_hammer(const ch09::HammerCase& c) {
  return testing::isolated_result([&] {
    student::StudentAdmission admission(c.max_running, c.max_waiting);
    // One call first, on this thread: a stub's NotImplemented is thrown here, plainly.
    if (admission.try_admit()) admission.release();
    return ch09::hammer(admission, c, [](void (*hook)()) { student::SharedCounter::hook = hook; });
  });
}

// Exercise 9.3's Retry-After on a batch: each answer is one number.
ch09::Answers<int64_t> student_retries(std::span<const ch09::RetryCase> cases) {
  const testing::BatchAnswers flat = isolated_batch(cases.size(), [&](size_t k) {
    const ch09::RetryCase& c = cases[k];
    AnswerWriter out;
    out.number(student::retry_after_seconds(c.in_flight, c.capacity, c.max_running, c.mean_service_seconds));
    return std::move(out).str();
  });
  ch09::Answers<int64_t> answers{{}, flat.error};
  for (const std::string& one : flat.answers) answers.answers.push_back(AnswerReader(one).number());
  return answers;
}

// ---- 9.1 the stop-string filter ----

TEST(Ch09Stop, AStopAcrossPiecesIsFoundAndNeverShown) {
  // ch09.h's worked example ("User:" across three pieces), "\n\n" as two pieces, a stop cut into
  // one-character pieces, empty pieces between its parts.
  EXPECT_TRUE(ch09::stop_traces_match(student_stops, ch09::boundary_cases()));
}

TEST(Ch09Stop, HeldTextIsShownOnceItCanNoLongerMatch) {
  // "a\n" holds "\n", then "b" releases "\nb"; "Us" then "a"; a suffix held for one stop, then
  // another, then released.
  EXPECT_TRUE(ch09::stop_traces_match(student_stops, ch09::release_cases()));
}

TEST(Ch09Stop, OverlappingPrefixesAreNotLost) {
  // "aab" in "a" + "a" + "a" + "b": the stop starts at the second 'a'; "ababc" in "abababc".
  EXPECT_TRUE(ch09::stop_traces_match(student_stops, ch09::overlap_cases()));
}

TEST(Ch09Stop, TheStopCompletedFirstWins) {
  // {"aby", "b"} in "xaby" shows "xa"; at one end the longer; a stop given twice.
  EXPECT_TRUE(ch09::stop_traces_match(student_stops, ch09::first_completed_cases()));
}

TEST(Ch09Stop, MultiByteCharactersStayWhole) {
  // "é", "€", "→": held and released whole; nothing of a character that cannot begin a stop is held.
  EXPECT_TRUE(ch09::stop_traces_match(student_stops, ch09::utf8_cases()));
}

TEST(Ch09Stop, NoStopsAndMatchesInsideOnePiece) {
  // No stop strings; a match at the very start; inside one piece; no pieces; four stops.
  EXPECT_TRUE(ch09::stop_traces_match(student_stops, ch09::simple_cases()));
}

TEST(Ch09Stop, RandomTextsCutAtRandomMatchTheServer) {
  // 3000 random texts over small alphabets (ASCII and UTF-8), cut at random (empty pieces too),
  // with 0 to 4 random stops: every step equal to the lab's StopStringMatcher's.
  testing::SeededRng rng;
  EXPECT_TRUE(ch09::stop_traces_match(student_stops, ch09::random_stop_cases(rng, 2000)));
  EXPECT_TRUE(ch09::stop_traces_match(student_stops, ch09::random_stop_cases(rng, 1000, {.utf8 = true})));
}

// ---- 9.2 the histogram ----

TEST(Ch09Histogram, WorkedExample) {
  EXPECT_TRUE(ch09::histograms_match(student_histograms, {ch09::worked_example_histogram()}));
}

TEST(Ch09Histogram, AValueOnABoundCountsInThatBucket) {
  // Every value exactly on a bound; the doubles just below and above each bound.
  EXPECT_TRUE(ch09::histograms_match(student_histograms, ch09::boundary_histograms()));
}

TEST(Ch09Histogram, TheExpositionIsCumulative) {
  // Every bucket used (running totals), none, only +Inf; no labels; labels to escape.
  EXPECT_TRUE(ch09::histograms_match(student_histograms, ch09::cumulative_histograms()));
}

TEST(Ch09Histogram, RandomObservationsMatchTheServer) {
  // 300 random histograms (vLLM's buckets or random ones) with up to 300 observations each, on,
  // next to, between, below and above the bounds: equal to the lab's Histogram and MetricsText.
  testing::SeededRng rng;
  EXPECT_TRUE(ch09::histograms_match(student_histograms, ch09::random_histograms(rng, 300)));
}

// ---- 9.3 admission control ----

TEST(Ch09Admission, NeverMoreThanCapacityOnOneThread) {
  // Fill to capacity, refused, release one, admitted again; capacity 1; max_waiting 0; then random
  // scripts: every answer and in_flight() equal to the lab's AdmissionControl.
  testing::SeededRng rng;
  EXPECT_TRUE(ch09::admission_scripts_match(student_scripts, ch09::hand_scripts()));
  EXPECT_TRUE(ch09::admission_scripts_match(student_scripts, ch09::random_scripts(rng, 200)));
}

TEST(Ch09Admission, ThreadsNeverOvershootTheCapacity) {
  // 6 to 8 threads × 20,000 try_admit() each against capacities 1 to 4, then 3 threads racing for
  // the last free place 2000 times, the counter's hook switching threads between its operations:
  // the places held at once, counted by the test, never exceed capacity(), the last place goes to
  // exactly one thread, none is lost (in_flight() is 0 at the end).
  for (const ch09::HammerCase& c : ch09::hammer_cases()) EXPECT_TRUE(ch09::hammer_holds(student_hammer, c));
}

TEST(Ch09Admission, RetryAfterWorkedExamples) {
  // ch09.h's worked example, exact quotients, at least 1, at most 3600, nothing measured yet.
  EXPECT_TRUE(ch09::retries_match(student_retries, ch09::hand_retries()));
}

TEST(Ch09Admission, RetryAfterMatchesTheServer) {
  // 2000 random questions: equal to the lab's serving::retry_after_seconds.
  testing::SeededRng rng;
  EXPECT_TRUE(ch09::retries_match(student_retries, ch09::random_retries(rng, 2000)));
}

}  // namespace
}  // namespace inferlab
