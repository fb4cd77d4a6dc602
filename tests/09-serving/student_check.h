#pragma once
// The checks of chapter 09's exercises (exercises/09-serving/ch09.h), on the lab's own types: the
// graded tests (test_student.cpp) run them on the student's classes, and
// tests/wrong/wrong_ch09_exercises.cpp on deliberately wrong versions that they must reject.
//
// Each check draws its questions first (hand-worked cases that each teach one rule, or fresh
// random inputs from a SeededRng: the seed is printed on failure), hands ALL of them at once to
// the code under test (the graded test runs the batch in one sandboxed child process, the wrong
// fixtures in this one), and only then computes the expected answers — twice, by the lab's
// implementation (runtime/tokenizer/stop_strings.h, runtime/serving/prometheus.h, runtime/serving/admission.h)
// and by a model written here, which must agree (a lab bug otherwise) — and compares, answer by
// answer. The first wrong answer fails the check with the input, the expected and the returned
// answer and — where it recognises one — the usual mistake behind it: each classic mistake is
// written here too (StopRule, BucketRule, ExpositionMistake), and an answer that is exactly what
// a mistake gives is named as that mistake. The wrong fixtures run those same mistakes.
//
// 9.3's threads (hammer()) run in the process that calls them — the sandboxed child for the
// graded test —: the test's side of the loop counts the places actually held between a true
// try_admit() and its release(), and sends back only those counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/tokenizer/stop_strings.h"
#include "tests/support/seeded.h"
#include "tests/support/student_answers.h"
#include "runtime/serving/admission.h"
#include "runtime/serving/prometheus.h"

namespace inferlab::testing::ch09 {

// A batch's answers, and why they stop early: tests/support/student_answers.h.
using testing::Answers;
using testing::missing_answer;

/// @p text quoted, with newlines and bytes outside printable ASCII escaped ("a\n" → "\"a\\n\"").
inline std::string quote_text(std::string_view text) {
  static const char* digits = "0123456789ABCDEF";
  std::string out = "\"";
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else if (b < 0x20 || b == 0x7F)
      out += std::string("\\x") + digits[b >> 4] + digits[b & 15];
    else
      out += c;  // UTF-8 bytes as they are: a terminal shows the characters
  }
  return out + "\"";
}

/// A number for a message: the shortest text that reads back to the same double.
inline std::string show(double x) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, result.ptr);
}

// ==== 9.1 the stop-string filter ==============================================================

inline constexpr size_t kNoMatch = static_cast<size_t>(-1);

/// A text cut into pieces, its stop strings, what it teaches and — for a hand case — the text
/// each push shows, worked out by hand (then flush()'s text last).
struct StopCase {
  std::vector<std::string> stops;
  std::vector<std::string> pieces;
  std::string lesson;
  std::vector<std::string> hand;  ///< empty: no hand answer; else one per push, then flush()'s
};

/// What the filter says after one push (or the final flush()).
struct StopStep {
  std::string shown;          ///< what push() (flush()) returned
  bool stopped = false;       ///< stopped() after it
  size_t matched = kNoMatch;  ///< matched() after it (the stop's index; kNoMatch before a match)
  std::string held;           ///< held() after it
  friend bool operator==(const StopStep&, const StopStep&) = default;
};

/// The steps of one case: one per piece, then flush()'s.
using StopTrace = std::vector<StopStep>;

/// Runs a batch of cases through the code under test.
using StopRunFn = std::function<Answers<StopTrace>(std::span<const StopCase> cases)>;

/// How a filter decides: the contract, and the classic mistakes (the wrong fixtures run these).
enum class StopRule {
  contract,           ///< hold the longest suffix that is a proper prefix; the match completed first
  shown_at_once,      ///< holds nothing: each piece searched alone and shown unless it holds a stop
  reset_on_mismatch,  ///< one candidate start, dropped on a mismatch (stop "aab" in "aaab" is missed)
  first_started,      ///< the match that STARTS first wins (at one start the shorter)
  fixed_window,       ///< holds the last |longest stop| − 1 bytes, prefix or not
  flush_drops_held,   ///< flush() returns "" (what was held back is lost)
};

/// What each mistake is, for a failure message.
inline std::string describe(StopRule rule) {
  switch (rule) {
    case StopRule::contract:
      return "the contract";
    case StopRule::shown_at_once:
      return "a filter that shows each piece as soon as it arrives (it holds nothing back), so a stop string "
             "split across pieces is never found and its first part is sent";
    case StopRule::reset_on_mismatch:
      return "a filter that forgets what it held on a mismatch: after \"aa\" then \"a\" (stop \"aab\") the "
             "last two characters still begin the stop — hold the LONGEST suffix that is a prefix of a stop, "
             "not only text since a candidate start";
    case StopRule::first_started:
      return "the match that STARTS first winning: generation stops at the token that COMPLETES a stop "
             "string, so the match with the least end wins (at one end the longer)";
    case StopRule::fixed_window:
      return "a filter that holds back the last |longest stop| − 1 bytes whatever they are: hold back only a "
             "suffix that is a proper prefix of some stop string (anything else can be shown at once, and a "
             "fixed byte count splits UTF-8 characters)";
    case StopRule::flush_drops_held:
      return "flush() dropping the held text: at the end of the text, what was held back is shown";
  }
  return "?";
}

/// The first match in @p text by the contract (least end, at one end the longer, then the lower
/// index) or by the first-started rule: (start, index), or (npos, kNoMatch).
inline std::pair<size_t, size_t> find_stop(const std::string& text, const std::vector<std::string>& stops,
                                           bool first_started = false) {
  size_t best_start = std::string::npos, best_end = std::string::npos, best = kNoMatch;
  for (size_t i = 0; i < stops.size(); ++i) {
    // Every occurrence, not just the first: the rule decides among them.
    for (size_t start = text.find(stops[i]); start != std::string::npos; start = text.find(stops[i], start + 1)) {
      const size_t end = start + stops[i].size();
      const bool better = first_started ? (start < best_start || (start == best_start && end < best_end))
                                        : (end < best_end || (end == best_end && start < best_start));
      if (better) best_start = start, best_end = end, best = i;
    }
  }
  return {best_start, best};
}

/// The length of the longest suffix of @p text that is a proper prefix of some stop.
inline size_t longest_prefix_suffix(const std::string& text, const std::vector<std::string>& stops) {
  size_t keep = 0;
  for (const std::string& stop : stops)
    for (size_t n = 1; n < stop.size() && n <= text.size(); ++n)
      if (text.compare(text.size() - n, n, stop, 0, n) == 0) keep = std::max(keep, n);
  return keep;
}

/// A filter that follows @p rule, written here (the contract's is the model the lab's
/// StopStringMatcher is checked against).
class RuleFilter {
 public:
  RuleFilter(std::vector<std::string> stops, StopRule rule) : stops_(std::move(stops)), rule_(rule) {}

  std::string push(std::string_view piece) {
    if (matched_ != kNoMatch) return {};
    std::string text = held_ + std::string(piece);
    if (rule_ == StopRule::shown_at_once) text = std::string(piece);
    if (rule_ == StopRule::reset_on_mismatch) return push_resetting(text);
    const auto [start, index] = find_stop(text, stops_, rule_ == StopRule::first_started);
    if (index != kNoMatch) {
      matched_ = index;
      held_.clear();
      return text.substr(0, start);
    }
    size_t keep = longest_prefix_suffix(text, stops_);
    if (rule_ == StopRule::shown_at_once) keep = 0;
    if (rule_ == StopRule::fixed_window) {
      size_t longest = 0;
      for (const std::string& s : stops_) longest = std::max(longest, s.size());
      keep = std::min(text.size(), longest == 0 ? 0 : longest - 1);
    }
    held_ = text.substr(text.size() - keep);
    return text.substr(0, text.size() - keep);
  }
  std::string flush() {
    std::string out = rule_ == StopRule::flush_drops_held ? std::string() : held_;
    held_.clear();
    return out;
  }
  bool stopped() const { return matched_ != kNoMatch; }
  size_t matched() const { return matched_; }
  const std::string& held() const { return held_; }

 private:
  // One candidate start s: text[s …] grows while it is a prefix of some stop; on a mismatch the
  // candidate restarts at the mismatching character, forgetting the characters before it.
  std::string push_resetting(const std::string& text) {
    const auto is_prefix = [&](std::string_view candidate) {
      for (const std::string& stop : stops_)
        if (stop.size() > candidate.size() && stop.compare(0, candidate.size(), candidate) == 0) return true;
      return false;
    };
    const auto equal = [&](std::string_view candidate) {
      for (size_t i = 0; i < stops_.size(); ++i)
        if (stops_[i] == candidate) return i;
      return kNoMatch;
    };
    size_t s = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      std::string_view candidate(text.data() + s, i + 1 - s);
      if (size_t index = equal(candidate); index != kNoMatch) {
        matched_ = index;
        held_.clear();
        return text.substr(0, s);
      }
      if (is_prefix(candidate)) continue;
      s = i;  // restart at this character
      candidate = std::string_view(text.data() + i, 1);
      if (size_t index = equal(candidate); index != kNoMatch) {
        matched_ = index;
        held_.clear();
        return text.substr(0, s);
      }
      if (!is_prefix(candidate)) s = i + 1;
    }
    held_ = text.substr(s);
    return text.substr(0, s);
  }

  std::vector<std::string> stops_;
  StopRule rule_;
  std::string held_;
  size_t matched_ = kNoMatch;
};

/// The trace of @p filter on @p c's pieces (any class with push, flush, stopped, matched, held).
template <class Filter, class Matched>
StopTrace trace_filter(Filter& filter, const StopCase& c, const Matched& matched_index) {
  StopTrace trace;
  for (const std::string& piece : c.pieces) {
    StopStep step;
    step.shown = filter.push(piece);
    step.stopped = filter.stopped();
    step.matched = matched_index(filter);
    step.held = filter.held();
    trace.push_back(std::move(step));
  }
  StopStep last;
  last.shown = filter.flush();
  last.stopped = filter.stopped();
  last.matched = matched_index(filter);
  last.held = filter.held();
  trace.push_back(std::move(last));
  return trace;
}

/// The trace of the rule @p rule on @p c.
inline StopTrace trace_rule(const StopCase& c, StopRule rule) {
  RuleFilter filter(c.stops, rule);
  return trace_filter(filter, c, [](const RuleFilter& f) { return f.matched(); });
}

/// The trace of the lab's StopStringMatcher on @p c (matched() as the index of the first stop
/// equal to the matched string: equal strings match as the first of them).
inline StopTrace trace_lab(const StopCase& c) {
  tokenizer::StopStringMatcher matcher(c.stops);
  return trace_filter(matcher, c, [&](const tokenizer::StopStringMatcher& m) {
    if (!m.stopped()) return kNoMatch;
    for (size_t i = 0; i < c.stops.size(); ++i)
      if (c.stops[i] == m.matched()) return i;
    return kNoMatch;
  });
}

/// Runs a batch through @p rule (what the wrong fixtures pass to the checks).
inline StopRunFn stop_rule_runner(StopRule rule) {
  return [rule](std::span<const StopCase> cases) {
    Answers<StopTrace> out;
    for (const StopCase& c : cases) out.answers.push_back(trace_rule(c, rule));
    return out;
  };
}

inline std::string show_stops(const std::vector<std::string>& stops) {
  std::string out = "{";
  for (size_t i = 0; i < stops.size(); ++i) out += (i ? ", " : "") + quote_text(stops[i]);
  return out + "}";
}

inline std::string show_step(const StopStep& s, const std::vector<std::string>& stops) {
  std::string out = "shown " + quote_text(s.shown) + ", held " + quote_text(s.held) + ", ";
  if (!s.stopped) return out + "not stopped";
  out += "stopped, matched " +
         (s.matched == kNoMatch
              ? std::string("npos")
              : std::to_string(s.matched) +
                    (s.matched < stops.size() ? " " + quote_text(stops[s.matched]) : std::string(" (no such stop)")));
  return out;
}

/// Whether @p text ends inside a UTF-8 character (a lead byte without all its continuation bytes).
inline bool ends_inside_a_character(const std::string& text) {
  for (size_t back = 1; back <= std::min<size_t>(4, text.size()); ++back) {
    const auto b = static_cast<unsigned char>(text[text.size() - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t length = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
    return back < length;
  }
  return false;
}

/// Every trace in @p got equals the lab's StopStringMatcher's and the contract's model's, step by
/// step (and a hand case's hand-worked text). The first wrong step fails with the case, the pieces
/// so far, expected and got, and the mistake it matches when one does.
inline ::testing::AssertionResult stop_traces_match(const StopRunFn& run, const std::vector<StopCase>& cases) {
  const Answers<StopTrace> got = run(cases);
  for (size_t k = 0; k < cases.size(); ++k) {
    const StopCase& c = cases[k];
    const StopTrace lab = trace_lab(c), model = trace_rule(c, StopRule::contract);
    bool hand_ok = c.hand.empty() || c.hand.size() == lab.size();
    for (size_t i = 0; hand_ok && i < c.hand.size(); ++i) hand_ok = c.hand[i] == lab[i].shown;
    if (lab != model || !hand_ok)
      return ::testing::AssertionFailure() << "lab bug: tokenizer::StopStringMatcher, the model of "
                                              "tests/09-serving/student_check.h and the hand answers disagree on "
                                           << quote_text(c.lesson);
    const std::string where = c.lesson.empty() ? "" : c.lesson + ":\n  ";
    std::string pieces;
    for (const std::string& p : c.pieces) pieces += (pieces.empty() ? "" : " + ") + quote_text(p);
    const std::string inputs = "stops " + show_stops(c.stops) + ", pieces " + (pieces.empty() ? "(none)" : pieces);
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure()
             << where << "no answer from StopStringFilter: " << missing << "\n  " << inputs;
    const StopTrace& trace = got.answers[k];
    if (trace.size() != lab.size())
      return ::testing::AssertionFailure() << where << "the trace has " << trace.size() << " steps, expected "
                                           << lab.size() << " (one per push, then flush) — " << inputs;
    for (size_t i = 0; i < lab.size(); ++i) {
      if (trace[i] == lab[i]) continue;
      const bool is_flush = i + 1 == lab.size();
      std::string so_far;
      for (size_t j = 0; j <= i && j < c.pieces.size(); ++j) so_far += c.pieces[j];
      ::testing::AssertionResult failure = ::testing::AssertionFailure();
      failure << where << inputs << "\n  "
              << (is_flush ? std::string("flush() at the end")
                           : "push(" + quote_text(c.pieces[i]) + ") (piece " + std::to_string(i + 1) + " of " +
                                 std::to_string(c.pieces.size()) + "; the text so far is " + quote_text(so_far) + ")")
              << ":\n    expected " << show_step(lab[i], c.stops) << "\n    got      " << show_step(trace[i], c.stops);
      // A known mistake gives exactly these steps so far.
      for (const StopRule rule : {StopRule::shown_at_once, StopRule::first_started, StopRule::reset_on_mismatch,
                                  StopRule::fixed_window, StopRule::flush_drops_held}) {
        const StopTrace wrong = trace_rule(c, rule);
        if (std::equal(trace.begin(), trace.begin() + long(i) + 1, wrong.begin()))
          return failure << "\n  exactly what gives these answers: " << describe(rule);
      }
      const StopStep& e = lab[i];
      const StopStep& g = trace[i];
      if (ends_inside_a_character(g.shown) && !ends_inside_a_character(e.shown))
        failure << "\n  the text shown ends inside a UTF-8 character: a stop string starts on a character's "
                   "first byte, so the held suffix (a prefix of a stop) always does too";
      else if (e.stopped && !g.stopped)
        failure << "\n  the text so far contains " << quote_text(c.stops[e.matched])
                << ": search the held text TOGETHER with the new piece (a stop string may span pieces)";
      else if (!e.stopped && g.stopped)
        failure << "\n  no stop string occurs in the text so far";
      else if (e.stopped && g.stopped && e.matched != g.matched)
        failure << "\n  the match that COMPLETES first wins (least end; at one end the longer; equal strings: the "
                   "first in the list)";
      else if (g.held.size() > e.held.size())
        failure << "\n  " << quote_text(g.held.substr(0, g.held.size() - e.held.size()))
                << " can no longer begin any stop string: show it (hold only the longest suffix that is a proper "
                   "prefix of a stop)";
      else if (g.held.size() < e.held.size())
        failure << "\n  " << quote_text(e.held) << " may still become " << quote_text(e.held)
                << "… of a stop string: hold it "
                << "back";
      else if (e.stopped && g.shown != e.shown)
        failure << "\n  after a match every push() returns \"\" (and so does flush())";
      return failure;
    }
  }
  return ::testing::AssertionSuccess();
}

/// Exercise 9.1's worked example, and cases around it: stop strings across piece boundaries.
inline std::vector<StopCase> boundary_cases() {
  return {
      {{"User:"},
       {"Hello", " there.", "\nUs", "er", ": hi"},
       "ch09.h's worked example: \"User:\" across three pieces",
       {"Hello", " there.", "\n", "", "", ""}},
      {{"\n\n"}, {"one", "\n", "\n", "two"}, "\"\\n\\n\" as \"\\n\" + \"\\n\"", {"one", "", "", "", ""}},
      {{"END"}, {"E", "N", "D"}, "a stop string cut into one-character pieces", {"", "", "", ""}},
      {{"###"}, {"a#", "", "#", "", "#b"}, "empty pieces between the parts of a stop", {"a", "", "", "", "", ""}},
      {{"stop"},
       {"xs", "to", "p tail", "more"},
       "the stop ends inside a piece: the rest is dropped",
       {"x", "", "", "", ""}},
  };
}

/// Held text released once it can no longer match.
inline std::vector<StopCase> release_cases() {
  return {
      {{"\n\n"},
       {"a\n", "b", "\n"},
       "with stop \"\\n\\n\", \"a\\n\" holds \"\\n\"; \"b\" releases it",
       {"a", "\nb", "", "\n"}},
      {{"User:"}, {"Us", "a"}, "\"Us\" is held; \"Usa\" cannot begin \"User:\"", {"", "Usa", ""}},
      {{"User:"},
       {"We Us", "e"},
       "\"Us\" is held, then \"Use\" still may be: the end held, not shown",
       {"We ", "", "Use"}},
      {{"abc", "xyz"},
       {"ab", "x", "y", "q"},
       "a suffix held for one stop, then for another, then released",
       {"", "ab", "", "xyq", ""}},
      {{"abc"}, {"a", "b", "b"}, "held \"ab\", then \"abb\": nothing of it begins \"abc\"", {"", "", "abb", ""}},
  };
}

/// Overlapping prefixes: the held text may begin a match that starts later.
inline std::vector<StopCase> overlap_cases() {
  return {
      {{"aab"}, {"a", "a", "a", "b"}, "\"aab\" in \"aaab\": the stop starts at the SECOND 'a'", {"", "", "a", "", ""}},
      {{"ababc"},
       {"ab", "ab", "ab", "c"},
       "\"ababc\" in \"abababc\": the held \"abab\" is still a prefix after \"ab\"",
       {"", "", "ab", "", ""}},
      {{"aab"}, {"aaab"}, "\"aab\" in \"aaab\" in one piece", {"a", ""}},
      {{"\n\n\n"}, {"\n\n", "\n\n"}, "\"\\n\\n\\n\" in four newlines: found at the first", {"", "", ""}},
  };
}

/// The stop completed first wins.
inline std::vector<StopCase> first_completed_cases() {
  return {
      {{"aby", "b"},
       {"x", "a", "b", "y"},
       "stops \"aby\" and \"b\" in \"xaby\": \"b\" completes first",
       {"x", "", "a", "", ""}},
      {{"aby", "b"}, {"xaby"}, "the same in one piece", {"xa", ""}},
      {{"cd", "bcd"}, {"abcd"}, "\"cd\" and \"bcd\" end together: the longer (it starts earlier) wins", {"a", ""}},
      {{"world", "o w", "lo"}, {"hello world"}, "three stops: \"lo\" completes first", {"hel", ""}},
      {{"ab", "ab"}, {"xab"}, "a stop given twice: the first of the equal strings", {"x", ""}},
      {{"abcd", "ab"}, {"xxab", "cd"}, "two stops starting together: the shorter ends first", {"xx", "", ""}},
  };
}

/// Multi-byte UTF-8 characters stay whole.
inline std::vector<StopCase> utf8_cases() {
  return {
      {{"éé"},
       {"café", " au", " lait éé"},
       "stop \"éé\": one \"é\" held whole (2 bytes), then released",
       {"caf", "é au", " lait ", ""}},
      {{"ab"},
       {"é", "a", "é"},
       "stop \"ab\" after \"é\": nothing of \"é\" begins a stop, show all of it",
       {"é", "", "aé", ""}},
      {{"xyz"}, {"€", "uro"}, "\"€\" is 3 bytes, the longest stop 3: a byte window would split it", {"€", "uro", ""}},
      {{"ñu"}, {"año", "ñ", "u"}, "a stop that begins with a 2-byte character", {"año", "", "", ""}},
      {{"→ end"}, {"a →", " e", "nd"}, "a stop with a 3-byte character across pieces", {"a ", "", "", ""}},
  };
}

/// No stops; a match at the very start; inside one piece.
inline std::vector<StopCase> simple_cases() {
  return {
      {{}, {"any ", "text"}, "no stop strings: everything shown at once", {"any ", "text", ""}},
      {{"END"}, {"END"}, "a match at the very start: nothing shown", {"", ""}},
      {{"END"}, {"abcENDdef"}, "a match inside one piece", {"abc", ""}},
      {{"END"}, {}, "no pieces at all", {""}},
      {{"END", "STOP", "\n\n", "###"}, {"one ST", "OP"}, "four stops (the API's most)", {"one ", "", ""}},
  };
}

/// Options of random stop cases.
struct RandomStopOptions {
  bool utf8 = false;  ///< characters of 1 to 4 bytes (pieces cut between characters, as the detokenizer does)
};

/// @p count random texts over a small alphabet (so stops occur, overlap and nearly occur; often one
/// stop inside another, often a stop spliced into the text), cut at random into pieces (empty ones
/// too), with 1 to 4 random stops (or, rarely, none).
inline std::vector<StopCase> random_stop_cases(Rng& rng, int count, RandomStopOptions options = {}) {
  const std::vector<std::string> ascii = {"a", "b", "\n", " "};
  const std::vector<std::string> wide = {"a", "é", "€", "😀", " "};
  const std::vector<std::string>& alphabet = options.utf8 ? wide : ascii;
  const auto character = [&] { return alphabet[size_t(rng.integer(0, int64_t(alphabet.size()) - 1))]; };
  std::vector<StopCase> cases;
  for (int trial = 0; trial < count; ++trial) {
    StopCase c;
    const auto join = [](const std::vector<std::string>& chars, size_t from, size_t to) {
      std::string out;
      for (size_t i = from; i < to; ++i) out += chars[i];
      return out;
    };
    std::vector<std::vector<std::string>> stops;  // each stop as its characters
    for (int64_t n = rng.integer(0, 20) == 0 ? 0 : rng.integer(1, 4); n > 0; --n) {
      std::vector<std::string>& stop = stops.emplace_back();
      for (int64_t k = rng.integer(1, 4); k > 0; --k) stop.push_back(character());
    }
    // Often a stop strictly inside another (it starts later and completes earlier: the first
    // completed is not the first started).
    if (!stops.empty() && stops.size() < 4 && stops[0].size() >= 3 && rng.integer(0, 1) == 0)
      stops.push_back(std::vector<std::string>(stops[0].begin() + 1, stops[0].end() - 1));
    for (const auto& stop : stops) c.stops.push_back(join(stop, 0, stop.size()));
    std::vector<std::string> characters;
    for (int64_t n = rng.integer(0, 24); n > 0; --n) characters.push_back(character());
    // Often a stop spliced into the text, so that matches are common.
    if (!stops.empty() && rng.integer(0, 2) != 0) {
      const auto& stop = stops[size_t(rng.integer(0, int64_t(stops.size()) - 1))];
      characters.insert(characters.begin() + rng.integer(0, int64_t(characters.size())), stop.begin(), stop.end());
    }
    for (size_t at = 0; at < characters.size();) {
      const size_t n = std::min(characters.size() - at, size_t(rng.integer(0, 4)));
      std::string piece;
      for (size_t j = 0; j < n; ++j) piece += characters[at + j];
      c.pieces.push_back(piece);
      at += n;
    }
    c.lesson = std::string(options.utf8 ? "a random UTF-8 text" : "a random text") + " (case " +
               std::to_string(trial + 1) + " of " + std::to_string(count) + ")";
    cases.push_back(std::move(c));
  }
  return cases;
}

// ==== 9.2 the histogram =======================================================================

/// A histogram to fill: its bounds, the observations in order, its exposition's name, help and
/// labels, what it teaches and — for a hand case — the exposition worked out by hand.
struct HistogramCase {
  std::vector<double> bounds;
  std::vector<double> values;
  std::string name, help;
  serving::Labels labels;
  std::string lesson;
  std::string hand;  ///< "": no hand answer
};

/// What the histogram under test says.
struct HistogramResult {
  std::vector<int64_t> buckets;  ///< per observation: the bucket whose count grew (−1: none, −2: several)
  std::vector<uint64_t> counts;  ///< the per-bucket counts at the end
  double sum = 0;
  uint64_t count = 0;
  std::string text;  ///< the exposition
};

/// Runs a batch of cases through the histogram under test.
using HistogramRunFn = std::function<Answers<HistogramResult>(std::span<const HistogramCase> cases)>;

/// The result of any histogram class with observe, bucket_counts, sum, count and exposition on @p c.
template <class H>
HistogramResult fill(H& histogram, const HistogramCase& c) {
  HistogramResult r;
  std::vector<uint64_t> before = histogram.bucket_counts();
  for (const double v : c.values) {
    histogram.observe(v);
    const std::vector<uint64_t>& after = histogram.bucket_counts();
    int64_t grew = -1;
    for (size_t i = 0; i < after.size() && i < before.size(); ++i)
      if (after[i] != before[i]) grew = grew == -1 ? int64_t(i) : -2;
    if (after.size() != before.size()) grew = -2;
    r.buckets.push_back(grew);
    before = after;
  }
  r.counts = histogram.bucket_counts();
  r.sum = histogram.sum();
  r.count = histogram.count();
  r.text = histogram.exposition(c.name, c.help, c.labels);
  return r;
}

/// How a value finds its bucket: the contract, and the classic mistake.
enum class BucketRule {
  le,           ///< the first bound ≥ value
  strict_less,  ///< the first bound > value (a value on a bound counted one bucket too high)
};

/// The classic mistakes of the exposition.
enum class ExpositionMistake {
  none,
  per_bucket_counts,  ///< each bucket line holds its own count, not the running total
  no_inf_bucket,      ///< the le="+Inf" line left out
  le_first,           ///< le written first among the labels
  empty_braces,       ///< "{}" on _sum and _count when there are no labels
};

inline std::string describe(ExpositionMistake m) {
  switch (m) {
    case ExpositionMistake::none:
      return "the contract";
    case ExpositionMistake::per_bucket_counts:
      return "bucket lines holding each bucket's own count: the exposition is CUMULATIVE — the line le=\"b\" counts "
             "every observation ≤ b, so the counts never decrease and le=\"+Inf\" equals _count";
    case ExpositionMistake::no_inf_bucket:
      return "the le=\"+Inf\" bucket line left out: it is always written, and equals _count";
    case ExpositionMistake::le_first:
      return "le written before the other labels: it comes last";
    case ExpositionMistake::empty_braces:
      return "\"{}\" written with no labels: a line without labels has no braces";
  }
  return "?";
}

/// A histogram written here: per-bucket counts by @p rule, the exposition with @p mistake.
class ModelHistogram {
 public:
  ModelHistogram(std::vector<double> bounds, BucketRule rule = BucketRule::le,
                 ExpositionMistake mistake = ExpositionMistake::none)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0), rule_(rule), mistake_(mistake) {}

  void observe(double value) {
    size_t bucket = 0;  // a plain scan: the first bound the value is at or below
    while (bucket < bounds_.size() && !(rule_ == BucketRule::le ? value <= bounds_[bucket] : value < bounds_[bucket]))
      ++bucket;
    ++counts_[bucket];
    sum_ += value;
    ++count_;
  }
  const std::vector<uint64_t>& bucket_counts() const { return counts_; }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

  std::string exposition(const std::string& name, const std::string& help, const serving::Labels& labels) const {
    std::ostringstream out;
    out << "# HELP " << name << " " << help << "\n";
    out << "# TYPE " << name << " histogram\n";
    const auto label_text = [&](const std::optional<std::string>& le) {
      std::vector<std::string> parts;
      for (const auto& [key, value] : labels) parts.push_back(key + "=\"" + escape(value) + "\"");
      if (le) {
        const std::string part = "le=\"" + *le + "\"";
        if (mistake_ == ExpositionMistake::le_first)
          parts.insert(parts.begin(), part);
        else
          parts.push_back(part);
      }
      if (parts.empty()) return std::string(mistake_ == ExpositionMistake::empty_braces ? "{}" : "");
      std::string joined;
      for (const std::string& p : parts) joined += (joined.empty() ? "" : ",") + p;
      return "{" + joined + "}";
    };
    uint64_t running = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      running += counts_[i];
      if (i == bounds_.size() && mistake_ == ExpositionMistake::no_inf_bucket) break;
      const uint64_t shown = mistake_ == ExpositionMistake::per_bucket_counts ? counts_[i] : running;
      out << name << "_bucket" << label_text(i < bounds_.size() ? number(bounds_[i]) : std::string("+Inf")) << " "
          << number(double(shown)) << "\n";
    }
    out << name << "_sum" << label_text(std::nullopt) << " " << number(sum_) << "\n";
    out << name << "_count" << label_text(std::nullopt) << " " << number(double(count_)) << "\n";
    return out.str();
  }

 private:
  // The shortest text that reads back to the same double, fixed or scientific, whichever is
  // shorter (std::to_chars without a format: what the exposition writes).
  static std::string number(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, result.ptr);
  }
  static std::string escape(const std::string& value) {
    std::string out;
    for (const char c : value)
      out += c == '\\'   ? std::string("\\\\")
             : c == '"'  ? std::string("\\\"")
             : c == '\n' ? std::string("\\n")
                         : std::string(1, c);
    return out;
  }

  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
  BucketRule rule_;
  ExpositionMistake mistake_;
};

/// The lab's Histogram and MetricsText on @p c.
inline HistogramResult lab_histogram(const HistogramCase& c) {
  serving::Histogram h(c.bounds);
  HistogramResult r;
  std::vector<uint64_t> before = h.snapshot().cumulative;
  for (const double v : c.values) {
    h.observe(v);
    const std::vector<uint64_t> after = h.snapshot().cumulative;
    size_t first = 0;  // the first cumulative count that grew is the value's bucket
    while (first < after.size() && after[first] == before[first]) ++first;
    r.buckets.push_back(int64_t(first));
    before = after;
  }
  const serving::HistogramSnapshot s = h.snapshot();
  for (size_t i = 0; i < s.cumulative.size(); ++i) r.counts.push_back(s.cumulative[i] - (i ? s.cumulative[i - 1] : 0));
  r.sum = s.sum;
  r.count = s.count;
  serving::MetricsText text;
  text.histogram(c.name, c.help, c.labels, s);
  r.text = text.str();
  return r;
}

/// The model of this file on @p c, by @p rule and with @p mistake.
inline HistogramResult model_histogram(const HistogramCase& c, BucketRule rule = BucketRule::le,
                                       ExpositionMistake mistake = ExpositionMistake::none) {
  ModelHistogram h(c.bounds, rule, mistake);
  return fill(h, c);
}

/// Runs a batch through the model with @p rule and @p mistake (what the wrong fixtures pass).
inline HistogramRunFn histogram_runner(BucketRule rule, ExpositionMistake mistake) {
  return [rule, mistake](std::span<const HistogramCase> cases) {
    Answers<HistogramResult> out;
    for (const HistogramCase& c : cases) out.answers.push_back(model_histogram(c, rule, mistake));
    return out;
  };
}

inline std::string show_bounds(const std::vector<double>& bounds) {
  std::string out = "{";
  for (size_t i = 0; i < bounds.size(); ++i) out += (i ? ", " : "") + show(bounds[i]);
  return out + "}";
}

/// The first line where @p a and @p b differ, both shown, with its number.
inline std::string first_different_line(const std::string& expected, const std::string& got) {
  std::istringstream e(expected), g(got);
  std::string le, lg;
  for (int line = 1;; ++line) {
    const bool has_e = bool(std::getline(e, le)), has_g = bool(std::getline(g, lg));
    if (!has_e && !has_g) return "the texts differ only in their line ends (each line ends in \"\\n\")";
    if (has_e != has_g || le != lg)
      return "line " + std::to_string(line) + ":\n    expected " + (has_e ? quote_text(le) : "(no more lines)") +
             "\n    got      " + (has_g ? quote_text(lg) : "(no more lines)");
  }
}

/// Every result in @p got equals the lab's Histogram and MetricsText, and the model's: each
/// observation's bucket, the counts, the sum and count, the exposition byte for byte.
inline ::testing::AssertionResult histograms_match(const HistogramRunFn& run, const std::vector<HistogramCase>& cases) {
  const Answers<HistogramResult> got = run(cases);
  for (size_t k = 0; k < cases.size(); ++k) {
    const HistogramCase& c = cases[k];
    const HistogramResult lab = lab_histogram(c), model = model_histogram(c);
    if (lab.buckets != model.buckets || lab.counts != model.counts || lab.count != model.count ||
        std::memcmp(&lab.sum, &model.sum, sizeof(double)) != 0 || lab.text != model.text ||
        (!c.hand.empty() && c.hand != lab.text))
      return ::testing::AssertionFailure() << "lab bug: serving::Histogram / MetricsText, the model of "
                                              "tests/09-serving/student_check.h and the hand answer disagree on "
                                           << quote_text(c.lesson) << "\n  lab:\n"
                                           << lab.text << "\n  model:\n"
                                           << model.text;
    const std::string where = (c.lesson.empty() ? "" : c.lesson + ":\n  ") + "bounds " + show_bounds(c.bounds) + ", " +
                              std::to_string(c.values.size()) + " observations";
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << where << "\n  no answer from StudentHistogram: " << missing;
    const HistogramResult& r = got.answers[k];
    for (size_t i = 0; i < c.values.size(); ++i) {
      const int64_t g = i < r.buckets.size() ? r.buckets[i] : -1, e = lab.buckets[i];
      if (g == e) continue;
      ::testing::AssertionResult failure = ::testing::AssertionFailure();
      failure << where << "\n  observe(" << show(c.values[i]) << ") (observation " << i + 1 << "): expected bucket "
              << e << " (" << (size_t(e) < c.bounds.size() ? "le " + show(c.bounds[size_t(e)]) : std::string("+Inf"))
              << "), got "
              << (g == -1   ? std::string("no bucket counted")
                  : g == -2 ? std::string("several buckets changed")
                            : "bucket " + std::to_string(g));
      if (g == e + 1 && size_t(e) < c.bounds.size() && c.values[i] == c.bounds[size_t(e)])
        failure << "\n  the value is exactly the bound " << show(c.bounds[size_t(e)])
                << ": le means less OR EQUAL — it counts in that bucket (the first bound ≥ the value), not the next";
      return failure;
    }
    if (r.counts != lab.counts || r.count != lab.count || std::memcmp(&r.sum, &lab.sum, sizeof(double)) != 0) {
      std::string counts_e, counts_g;
      for (const uint64_t n : lab.counts) counts_e += (counts_e.empty() ? "" : ", ") + std::to_string(n);
      for (const uint64_t n : r.counts) counts_g += (counts_g.empty() ? "" : ", ") + std::to_string(n);
      ::testing::AssertionResult failure = ::testing::AssertionFailure();
      failure << where << "\n  after every observation: expected counts {" << counts_e << "}, sum " << show(lab.sum)
              << ", count " << lab.count << "\n  got counts {" << counts_g << "}, sum " << show(r.sum) << ", count "
              << r.count;
      if (r.counts.size() != lab.counts.size())
        failure << "\n  bucket_counts() holds upper_bounds().size() + 1 counts, the last one +Inf's";
      else if (std::memcmp(&r.sum, &lab.sum, sizeof(double)) != 0)
        failure << "\n  the sum adds each value in the order observed (sum_ += value)";
      return failure;
    }
    if (r.text == lab.text) continue;
    ::testing::AssertionResult failure = ::testing::AssertionFailure();
    failure << where << (c.labels.empty() ? ", no labels" : "") << "\n  the exposition differs from the lab's, "
            << first_different_line(lab.text, r.text);
    for (const ExpositionMistake m : {ExpositionMistake::per_bucket_counts, ExpositionMistake::no_inf_bucket,
                                      ExpositionMistake::le_first, ExpositionMistake::empty_braces})
      if (r.text == model_histogram(c, BucketRule::le, m).text)
        return failure << "\n  exactly what gives this text: " << describe(m);
    return failure << "\n  expected the whole text:\n" << lab.text;
  }
  return ::testing::AssertionSuccess();
}

/// ch09.h's worked example.
inline HistogramCase worked_example_histogram() {
  return {{0.5, 1},
          {0.25, 0.5, 0.75, 3},
          "latency_seconds",
          "Latency.",
          {{"model_name", "smollm2"}},
          "ch09.h's worked example",
          "# HELP latency_seconds Latency.\n"
          "# TYPE latency_seconds histogram\n"
          "latency_seconds_bucket{model_name=\"smollm2\",le=\"0.5\"} 2\n"
          "latency_seconds_bucket{model_name=\"smollm2\",le=\"1\"} 3\n"
          "latency_seconds_bucket{model_name=\"smollm2\",le=\"+Inf\"} 4\n"
          "latency_seconds_sum{model_name=\"smollm2\"} 4.5\n"
          "latency_seconds_count{model_name=\"smollm2\"} 4\n"};
}

/// Values exactly on the bounds, and the doubles just above and below them.
inline std::vector<HistogramCase> boundary_histograms() {
  const std::vector<double> bounds = {0.001, 0.1, 0.25, 1, 2.5, 10};
  HistogramCase on{bounds,
                   bounds,
                   "vllm:time_to_first_token_seconds",
                   "Time to first token.",
                   {{"model_name", "smollm2"}},
                   "every value exactly on a bound: each counts in its own bucket",
                   ""};
  HistogramCase near{bounds,
                     {},
                     "vllm:e2e_request_latency_seconds",
                     "End-to-end latency.",
                     {{"model_name", "smollm2"}},
                     "the doubles just below and just above each bound",
                     ""};
  for (const double b : bounds) {
    near.values.push_back(std::nextafter(b, -1e300));
    near.values.push_back(b);
    near.values.push_back(std::nextafter(b, 1e300));
  }
  HistogramCase first{{0.5}, {0.5, 0.5, 0.5}, "one_bound", "One bound.", {}, "three values on the only bound", ""};
  return {on, near, first};
}

/// Every bucket used; none; only +Inf; no labels; labels that need escaping.
inline std::vector<HistogramCase> cumulative_histograms() {
  return {
      {{1, 2, 3, 4},
       {0.5, 1.5, 2.5, 3.5, 4.5, 0.75, 3.25},
       "h",
       "Every bucket used.",
       {{"a", "1"}},
       "every bucket used: the bucket lines are running totals 2, 3, 4, 6, 7",
       ""},
      {{0.5, 1},
       {},
       "empty",
       "No observations.",
       {{"model_name", "smollm2"}},
       "no observations: every line counts 0, the sum is 0",
       ""},
      {{0.5, 1},
       {7, 100, 3.5},
       "far",
       "Only +Inf.",
       {{"model_name", "smollm2"}},
       "every value above the last bound: only the +Inf bucket holds them",
       ""},
      {{0.005, 0.01, 0.025},
       {0.007, 0.02, 0.001, -3},
       "no_labels",
       "No labels.",
       {},
       "no labels at all: {le=\"…\"} on the buckets, no braces on _sum and _count",
       ""},
      {{1},
       {0.5, 2},
       "escaped",
       "Labels to escape.",
       {{"model_name", "a \"quoted\" \\ name\nnext"}, {"x", "y"}},
       "a label value with a quote, a backslash and a newline, and two labels",
       ""},
  };
}

/// vLLM's latency buckets (its TTFT histogram's).
inline const std::vector<double>& vllm_buckets() {
  static const std::vector<double> b = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                        0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
  return b;
}

/// @p count random histograms: bounds vLLM's or random (1 to 12, some negative), observations
/// (0 to 300) on the bounds, next to them, between them, below and above them.
inline std::vector<HistogramCase> random_histograms(SeededRng& rng, int count) {
  std::vector<HistogramCase> cases;
  const auto real = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng.engine()); };
  const std::vector<serving::Labels> label_sets = {
      {}, {{"model_name", "smollm2"}}, {{"model_name", "smollm2"}, {"finished_reason", "stop"}}};
  for (int trial = 0; trial < count; ++trial) {
    HistogramCase c;
    if (rng.integer(0, 2) == 0) {
      c.bounds = vllm_buckets();
    } else {
      double b = real(-5.0, 5.0);
      for (int64_t n = rng.integer(1, 12); n > 0; --n) c.bounds.push_back(b), b += real(1e-3, 3.0);
    }
    const double lo = c.bounds.front(), hi = c.bounds.back();
    for (int64_t n = rng.integer(0, 300); n > 0; --n) {
      const double on = c.bounds[size_t(rng.integer(0, int64_t(c.bounds.size()) - 1))];
      switch (rng.integer(0, 5)) {
        case 0:
        case 1:
          c.values.push_back(on);
          break;
        case 2:
          c.values.push_back(std::nextafter(on, rng.integer(0, 1) ? 1e300 : -1e300));
          break;
        case 3:
          c.values.push_back(real(lo - 1.0, hi + 1.0));
          break;
        case 4:
          c.values.push_back(hi + real(0.0, 100.0));
          break;
        default:
          c.values.push_back(lo - real(0.0, 100.0));
      }
    }
    c.name = "vllm:request_latency_" + std::to_string(trial);
    c.help = "A random histogram.";
    c.labels = label_sets[size_t(rng.integer(0, int64_t(label_sets.size()) - 1))];
    c.lesson = "a random histogram (case " + std::to_string(trial + 1) + " of " + std::to_string(count) + ")";
    cases.push_back(std::move(c));
  }
  return cases;
}

// ==== 9.3 admission control ===================================================================

/// A script run on one thread: 'a' try_admit(), 'r' release() (only while a place is held).
struct AdmissionScript {
  int64_t max_running = 1, max_waiting = 0;
  std::string ops;
  std::string lesson;
};

/// Per op: try_admit()'s answer (1 / 0; release: −1), then in_flight() after it; capacity() first.
using AdmissionTrace = std::vector<int64_t>;

/// Runs a batch of scripts through the code under test.
using AdmissionRunFn = std::function<Answers<AdmissionTrace>(std::span<const AdmissionScript> scripts)>;

/// The trace of any admission class with try_admit, release, in_flight and capacity.
template <class A>
AdmissionTrace run_script(A& admission, const AdmissionScript& s) {
  AdmissionTrace t{admission.capacity()};
  for (const char op : s.ops) {
    if (op == 'a') {
      t.push_back(admission.try_admit() ? 1 : 0);
    } else {
      admission.release();
      t.push_back(-1);
    }
    t.push_back(admission.in_flight());
  }
  return t;
}

/// The lab's AdmissionControl on @p s (release() gives back the newest ticket).
inline AdmissionTrace lab_script(const AdmissionScript& s) {
  serving::AdmissionControl admission(s.max_running, s.max_waiting);
  std::vector<serving::AdmissionControl::Ticket> tickets;
  AdmissionTrace t{admission.capacity()};
  for (const char op : s.ops) {
    if (op == 'a') {
      std::optional<serving::AdmissionControl::Ticket> ticket = admission.try_admit();
      t.push_back(ticket ? 1 : 0);
      if (ticket) tickets.push_back(std::move(*ticket));
    } else {
      tickets.pop_back();
      t.push_back(-1);
    }
    t.push_back(admission.in_flight());
  }
  return t;
}

/// How an admission counter decides: the contract and the classic mistakes (one thread's view).
enum class AdmitRule {
  contract,           ///< in_flight < max_running + max_waiting
  off_by_one,         ///< in_flight ≤ capacity: one too many
  waiting_forgotten,  ///< in_flight < max_running
  refusal_counts,     ///< a refused request is counted all the same (then "given back" never)
};

inline std::string describe(AdmitRule rule) {
  switch (rule) {
    case AdmitRule::contract:
      return "the contract";
    case AdmitRule::off_by_one:
      return "admitting while in_flight ≤ capacity (one too many): admit only while FEWER than capacity() are "
             "held";
    case AdmitRule::waiting_forgotten:
      return "a capacity of max_running alone: capacity() = max_running + max_waiting (the engine runs "
             "max_running, max_waiting more wait behind them)";
    case AdmitRule::refusal_counts:
      return "a refused request counted all the same: a refusal changes nothing";
  }
  return "?";
}

/// A one-thread counter by @p rule, written here.
class RuleAdmission {
 public:
  RuleAdmission(int64_t max_running, int64_t max_waiting, AdmitRule rule)
      : max_running_(max_running), max_waiting_(max_waiting), rule_(rule) {}
  bool try_admit() {
    const int64_t limit = rule_ == AdmitRule::waiting_forgotten ? max_running_ : capacity();
    const bool admit = rule_ == AdmitRule::off_by_one ? in_flight_ <= limit : in_flight_ < limit;
    if (admit || rule_ == AdmitRule::refusal_counts) ++in_flight_;
    return admit;
  }
  void release() { --in_flight_; }
  int64_t in_flight() const { return in_flight_; }
  int64_t capacity() const { return max_running_ + max_waiting_; }

 private:
  int64_t max_running_, max_waiting_;
  AdmitRule rule_;
  int64_t in_flight_ = 0;
};

/// Runs a batch of scripts through @p rule (what the wrong fixtures pass).
inline AdmissionRunFn admission_runner(AdmitRule rule) {
  return [rule](std::span<const AdmissionScript> scripts) {
    Answers<AdmissionTrace> out;
    for (const AdmissionScript& s : scripts) {
      RuleAdmission a(s.max_running, s.max_waiting, rule);
      out.answers.push_back(run_script(a, s));
    }
    return out;
  };
}

/// Every trace equals the lab's AdmissionControl's and the model's, op by op.
inline ::testing::AssertionResult admission_scripts_match(const AdmissionRunFn& run,
                                                          const std::vector<AdmissionScript>& scripts) {
  const Answers<AdmissionTrace> got = run(scripts);
  for (size_t k = 0; k < scripts.size(); ++k) {
    const AdmissionScript& s = scripts[k];
    RuleAdmission model(s.max_running, s.max_waiting, AdmitRule::contract);
    const AdmissionTrace lab = lab_script(s);
    if (lab != run_script(model, s))
      return ::testing::AssertionFailure()
             << "lab bug: serving::AdmissionControl and the model disagree on " << quote_text(s.lesson);
    const std::string where = (s.lesson.empty() ? "" : s.lesson + ":\n  ") + "max_running " +
                              std::to_string(s.max_running) + ", max_waiting " + std::to_string(s.max_waiting);
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << where << "\n  no answer from StudentAdmission: " << missing;
    const AdmissionTrace& t = got.answers[k];
    if (t.empty() || t[0] != lab[0])
      return ::testing::AssertionFailure()
             << where << "\n  capacity() is " << (t.empty() ? -1 : t[0]) << ", expected " << lab[0];
    for (size_t op = 0; op < s.ops.size(); ++op) {
      const size_t at = 1 + 2 * op;
      if (t.size() >= at + 2 && t[at] == lab[at] && t[at + 1] == lab[at + 1]) continue;
      const int64_t held_before = op == 0 ? 0 : lab[at - 1];
      ::testing::AssertionResult failure = ::testing::AssertionFailure();
      failure << where << "\n  op " << op + 1 << " of " << quote_text(s.ops) << " ('a' try_admit, 'r' release) with "
              << held_before << " held: ";
      if (s.ops[op] == 'a')
        failure << "expected try_admit() " << (lab[at] ? "true" : "false") << " and in_flight() " << lab[at + 1]
                << ", got " << (t.size() > at ? (t[at] ? "true" : "false") : "nothing") << " and "
                << (t.size() > at + 1 ? std::to_string(t[at + 1]) : std::string("nothing"));
      else
        failure << "expected in_flight() " << lab[at + 1] << " after release(), got "
                << (t.size() > at + 1 ? std::to_string(t[at + 1]) : std::string("nothing"));
      for (const AdmitRule rule : {AdmitRule::off_by_one, AdmitRule::waiting_forgotten, AdmitRule::refusal_counts}) {
        RuleAdmission wrong(s.max_running, s.max_waiting, rule);
        const AdmissionTrace w = run_script(wrong, s);
        if (t.size() >= at + 2 && std::equal(t.begin(), t.begin() + long(at) + 2, w.begin()))
          return failure << "\n  exactly what gives these answers: " << describe(rule);
      }
      return failure;
    }
  }
  return ::testing::AssertionSuccess();
}

/// Scripts by hand: fill, refuse, release, refill; capacity 1; no waiting places.
inline std::vector<AdmissionScript> hand_scripts() {
  return {
      {4, 4,
       "aaaaaaaaaaara"
       "a"
       "rrrrrrrr"
       "a",
       "ch09.h's server: 4 running + 4 waiting — 8 admitted, then refused"},
      {1, 0, "aaraar", "capacity 1: one at a time"},
      {3, 0, "aaaaarrra", "max_waiting 0: capacity is max_running"},
      {1, 5, "aaaaaaaaarrrrrraaaaaaa", "1 running + 5 waiting"},
  };
}

/// @p count random scripts (capacities 1 … 12, 20 … 200 ops).
inline std::vector<AdmissionScript> random_scripts(Rng& rng, int count) {
  std::vector<AdmissionScript> scripts;
  for (int i = 0; i < count; ++i) {
    AdmissionScript s{rng.integer(1, 8), rng.integer(0, 4), "",
                      "a random script (" + std::to_string(i + 1) + " of " + std::to_string(count) + ")"};
    int64_t held = 0;  // by the contract, so that a release always has a place to give back
    for (int64_t n = rng.integer(20, 200); n > 0; --n) {
      if (held > 0 && rng.integer(0, 2) == 0) {
        s.ops += 'r';
        --held;
      } else {
        s.ops += 'a';
        held = std::min(held + 1, s.max_running + s.max_waiting);
      }
    }
    scripts.push_back(std::move(s));
  }
  return scripts;
}

/// A run of threads at one admission counter.
struct HammerCase {
  int64_t max_running = 1, max_waiting = 0;
  int threads = 8;
  int64_t attempts = 100000;  ///< try_admit() calls per thread
  int round_threads = 3;      ///< threads racing for the last place, each round
  int64_t rounds = 2000;      ///< rounds of the race for the last place (fewer when time runs out)
};

/// What hammer() counted (trivially copyable: it comes back from the sandbox as it is).
struct HammerStats {
  int64_t capacity = 0;
  int64_t most_held = 0;       ///< the most places held at once, counted by the test's side
  int64_t over_capacity = 0;   ///< admissions that made the places held exceed capacity
  int64_t most_in_flight = 0;  ///< the largest in_flight() seen while holding a place
  int64_t admitted = 0, refused = 0;
  int64_t final_in_flight = 0;  ///< in_flight() once every thread has released its places
  // The race for the last place (last_place_rounds()).
  int64_t rounds = 0;            ///< rounds run
  int64_t rounds_over = 0;       ///< rounds where more than one thread got the last place
  int64_t most_in_a_round = 0;   ///< the most threads admitted in one round
  int64_t rounds_none = 0;       ///< rounds where no thread got it (a free place refused)
  int64_t prefill_refused = 0;   ///< places below capacity refused to the filling thread
  int64_t rounds_left_over = 0;  ///< rounds after which in_flight() was not 0 once all was released
};

/// What the threads do before each operation of the counter under test (SharedCounter's hook in
/// the contract; the wrong fixtures' counters call it too): nothing, a yield or a short spin, at
/// random — so that another thread often runs between two operations of one, on a machine of any
/// number of cores and load, and a two-step check-then-increment loses its race.
inline void interleaving_hook() {
  thread_local uint64_t state =
      0x9E3779B97F4A7C15ull ^ uint64_t(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
  const uint64_t pick = state % 8;
  if (pick < 4) return;
  if (pick < 7) {
    std::this_thread::yield();
    return;
  }
  for (int spin = 0; spin < 200; ++spin) std::atomic_signal_fence(std::memory_order_seq_cst);  // kept by the compiler
}

/// Installs a hook for the duration of a scope (hammer()'s), removes it after.
template <class SetHook>
class HookInstalled {
 public:
  explicit HookInstalled(const SetHook& set) : set_(set) { set_(&interleaving_hook); }
  ~HookInstalled() { set_(nullptr); }
  HookInstalled(const HookInstalled&) = delete;
  HookInstalled& operator=(const HookInstalled&) = delete;

 private:
  const SetHook& set_;
};

/// The race for the last place, @p c.rounds times: this thread fills capacity − 1 places, then
/// @p c.round_threads threads waiting at a spin barrier call try_admit() at the same moment —
/// exactly one may get the place. Then every place is released and in_flight() must be 0. Adds
/// its counts to @p stats. A check and an increment that are two steps lose this race whenever two
/// of the threads run at once (the free-running hammer may not meet that moment on a busy
/// machine); the rounds stop at the first lost one, or after 3 s.
template <class A>
void last_place_rounds(A& admission, const HammerCase& c, HammerStats& stats) {
  const int64_t capacity = admission.capacity();
  std::atomic<int64_t> phase{0};  // 2r + 1: round r open; 2r + 2: closed
  std::atomic<int64_t> arrived{0}, admitted{0}, released{0};
  std::atomic<bool> stop{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const auto fail = [&] {
    const std::lock_guard lock(error_mutex);
    if (!first_error) first_error = std::current_exception();
    stop.store(true);
  };
  // Spin (the threads must be running when the round opens), yielding now and then.
  const auto wait_until = [&](const auto& ready) {
    for (int spins = 0; !ready() && !stop.load(std::memory_order_relaxed); ++spins)
      if (spins > 256) std::this_thread::yield();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < c.round_threads; ++t)
    threads.emplace_back([&] {
      try {
        for (int64_t r = 0; !stop.load(); ++r) {
          wait_until([&] { return phase.load() >= 2 * r + 1; });
          if (stop.load() || phase.load() != 2 * r + 1) break;
          const bool got = admission.try_admit();
          if (got) admitted.fetch_add(1);
          arrived.fetch_add(1);
          wait_until([&] { return phase.load() != 2 * r + 1; });
          if (got) admission.release();
          released.fetch_add(1);
        }
      } catch (...) {
        fail();
      }
    });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  try {
    for (int64_t r = 0; r < c.rounds && !stop.load() && std::chrono::steady_clock::now() < deadline; ++r) {
      int64_t filled = 0;
      for (int64_t i = 0; i + 1 < capacity; ++i) {
        if (admission.try_admit())
          ++filled;
        else
          ++stats.prefill_refused;
      }
      arrived.store(0), admitted.store(0), released.store(0);
      phase.store(2 * r + 1);  // open: the threads race for the one place left
      wait_until([&] { return arrived.load() == c.round_threads; });
      const int64_t got = admitted.load();
      phase.store(2 * r + 2);  // closed: the winners give their place back
      wait_until([&] { return released.load() == c.round_threads; });
      for (int64_t i = 0; i < filled; ++i) admission.release();
      if (stop.load()) break;
      ++stats.rounds;
      stats.most_in_a_round = std::max(stats.most_in_a_round, got);
      if (got > 1) ++stats.rounds_over;
      if (got == 0) ++stats.rounds_none;
      if (admission.in_flight() != 0) ++stats.rounds_left_over;
      if (stats.rounds_over > 0 || stats.rounds_left_over > 0) break;  // found: no need to go on
    }
  } catch (...) {
    fail();
  }
  stop.store(true);
  phase.store(std::numeric_limits<int64_t>::max());  // every thread leaves its loop
  for (std::thread& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

/// Threads that call try_admit() and, when admitted, count the place as held (here, with an atomic
/// of the test's), read in_flight(), give the place up and release() it — @p c.attempts times each,
/// all at once; then last_place_rounds(). @p set_hook(f) installs f as the hook of the counter
/// under test (SharedCounter::hook), interleaving_hook() meanwhile, nullptr after. A student call
/// that throws stops every thread; the exception is rethrown here.
template <class A, class SetHook>
HammerStats hammer(A& admission, const HammerCase& c, const SetHook& set_hook) {
  const HookInstalled<SetHook> hooked(set_hook);
  std::atomic<int64_t> held{0}, most_held{0}, over{0}, most_in_flight{0}, admitted{0}, refused{0};
  std::atomic<bool> stop{false}, go{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const int64_t capacity = admission.capacity();
  const auto raise_max = [](std::atomic<int64_t>& max, int64_t value) {
    int64_t seen = max.load();
    while (value > seen && !max.compare_exchange_weak(seen, value)) {
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < c.threads; ++t)
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();  // start together
      int64_t mine_admitted = 0, mine_refused = 0;
      try {
        for (int64_t i = 0; i < c.attempts && !stop.load(std::memory_order_relaxed); ++i) {
          if (!admission.try_admit()) {
            ++mine_refused;
            continue;
          }
          ++mine_admitted;
          const int64_t now = held.fetch_add(1) + 1;
          if (now > capacity) over.fetch_add(1);
          raise_max(most_held, now);
          raise_max(most_in_flight, admission.in_flight());
          if ((i + t) % 7 == 0) std::this_thread::yield();  // hold the place a while, sometimes
          held.fetch_sub(1);
          admission.release();
        }
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        stop.store(true);
      }
      admitted.fetch_add(mine_admitted);
      refused.fetch_add(mine_refused);
    });
  go.store(true);
  for (std::thread& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
  HammerStats stats;
  stats.capacity = capacity;
  stats.most_held = most_held.load();
  stats.over_capacity = over.load();
  stats.most_in_flight = most_in_flight.load();
  stats.admitted = admitted.load();
  stats.refused = refused.load();
  stats.final_in_flight = admission.in_flight();
  if (stats.final_in_flight == 0) last_place_rounds(admission, c, stats);
  return stats;
}

inline std::string capacity_minus_one(const HammerStats& s) {
  return std::to_string(s.capacity - 1);
}

/// Runs one hammer case through the code under test.
using HammerFn = std::function<HammerStats(const HammerCase&)>;

/// The threads never held more than capacity() places, none were lost, every attempt answered.
inline ::testing::AssertionResult hammer_holds(const HammerFn& run, const HammerCase& c) {
  const HammerStats s = run(c);
  const std::string where = "max_running " + std::to_string(c.max_running) + ", max_waiting " +
                            std::to_string(c.max_waiting) + " (capacity " +
                            std::to_string(c.max_running + c.max_waiting) + "), " + std::to_string(c.threads) +
                            " threads × " + std::to_string(c.attempts) + " try_admit() each";
  if (s.capacity != c.max_running + c.max_waiting)
    return ::testing::AssertionFailure() << where << ": capacity() is " << s.capacity;
  if (s.admitted + s.refused != int64_t(c.threads) * c.attempts)
    return ::testing::AssertionFailure() << where << ": " << s.admitted << " admitted + " << s.refused
                                         << " refused ≠ the " << int64_t(c.threads) * c.attempts << " calls";
  if (s.admitted == 0) return ::testing::AssertionFailure() << where << ": no try_admit() was ever true";
  if (s.over_capacity > 0 || s.most_held > s.capacity || s.most_in_flight > s.capacity)
    return ::testing::AssertionFailure()
           << where << ": " << s.over_capacity << " admissions went over capacity — at one moment " << s.most_held
           << " places were held at once and in_flight() read as much as " << s.most_in_flight << "; capacity is "
           << s.capacity
           << "\n  a check and an increment that are two steps race: two threads both read capacity − 1, both pass "
              "the check, both add one. Make them one atomic step (a compare_exchange_weak loop, or a mutex around "
              "both)";
  if (s.final_in_flight != 0)
    return ::testing::AssertionFailure()
           << where << ": after every thread released what it held, in_flight() is " << s.final_in_flight
           << ", expected 0 — places were " << (s.final_in_flight > 0 ? "lost" : "given back twice")
           << ": concurrent updates of a plain integer lose some (use std::atomic's fetch_add / fetch_sub, or a "
              "mutex)";
  if (s.rounds_over > 0)
    return ::testing::AssertionFailure()
           << where << ", then " << c.round_threads << " threads at once racing for the last place: in round "
           << s.rounds << ", " << s.most_in_a_round << " of them got it (one place was free, " << capacity_minus_one(s)
           << " held)\n  a check and an increment that are two steps race: two threads both read capacity − 1, both "
              "pass the check, both add one. Make them one atomic step (a compare_exchange_weak loop, or a mutex "
              "around both)";
  if (s.rounds_left_over > 0)
    return ::testing::AssertionFailure()
           << where << ", then " << c.round_threads << " threads racing for the last place: after round " << s.rounds
           << " every place was released, yet in_flight() is not 0 — concurrent updates of a plain integer lose "
              "some (use std::atomic's fetch_add / fetch_sub, or a mutex)";
  if (s.prefill_refused > 0 || s.rounds_none > 0)
    return ::testing::AssertionFailure() << where << ", then threads racing for the last place: " << s.prefill_refused
                                         << " admissions below capacity and " << s.rounds_none
                                         << " races for the free last place (of " << s.rounds
                                         << ") were refused — a place is refused only when capacity() are held";
  if (s.rounds == 0) return ::testing::AssertionFailure() << where << ": no round of the race for the last place ran";
  return ::testing::AssertionSuccess();
}

/// Small capacities against 8 threads (most attempts contend for the last place).
inline std::vector<HammerCase> hammer_cases() {
  return {{1, 0, 8, 20000}, {2, 1, 8, 20000}, {1, 2, 6, 20000}, {4, 0, 8, 20000}};
}

// ---- Retry-After ----

/// One question to retry_after_seconds.
struct RetryCase {
  int64_t in_flight, capacity, max_running;
  double mean_service_seconds;
  std::string lesson;
};

using RetryRunFn = std::function<Answers<int64_t>(std::span<const RetryCase> cases)>;

/// Retry-After by the contract and the classic mistakes, written here.
enum class RetryRule {
  contract,
  no_ceil,      ///< rounded down (int64 of the quotient)
  no_plus_one,  ///< ahead = in_flight − capacity
  no_divide,    ///< ahead · S (the max_running servers in parallel forgotten)
  no_clamp,     ///< no clamp to [1, 3600]
};

inline std::string describe(RetryRule rule) {
  switch (rule) {
    case RetryRule::contract:
      return "the contract";
    case RetryRule::no_ceil:
      return "the quotient rounded down: Retry-After rounds UP to whole seconds (a client told less retries too "
             "early)";
    case RetryRule::no_plus_one:
      return "ahead = in_flight − capacity: a place frees for the refused client once in_flight − capacity + 1 "
             "requests have left";
    case RetryRule::no_divide:
      return "ahead · S: max_running requests are served at once, so they leave at max_running / S per second — "
             "divide by max_running";
    case RetryRule::no_clamp:
      return "no clamp: the answer is at least 1 and at most 3600";
  }
  return "?";
}

inline int64_t retry_by(RetryRule rule, const RetryCase& c) {
  if (!(c.mean_service_seconds > 0)) return 1;
  int64_t ahead = c.in_flight - c.capacity + (rule == RetryRule::no_plus_one ? 0 : 1);
  if (ahead < 1) ahead = 1;
  double seconds = double(ahead) * c.mean_service_seconds;
  if (rule != RetryRule::no_divide) seconds /= double(c.max_running);
  seconds = rule == RetryRule::no_ceil ? std::floor(seconds) : std::ceil(seconds);
  if (rule == RetryRule::no_clamp) return seconds > 9e18 ? std::numeric_limits<int64_t>::max() : int64_t(seconds);
  return int64_t(std::min(std::max(seconds, 1.0), 3600.0));
}

inline RetryRunFn retry_runner(RetryRule rule) {
  return [rule](std::span<const RetryCase> cases) {
    Answers<int64_t> out;
    for (const RetryCase& c : cases) out.answers.push_back(retry_by(rule, c));
    return out;
  };
}

/// Every answer equals the lab's serving::retry_after_seconds and the model's.
inline ::testing::AssertionResult retries_match(const RetryRunFn& run, const std::vector<RetryCase>& cases) {
  const Answers<int64_t> got = run(cases);
  for (size_t k = 0; k < cases.size(); ++k) {
    const RetryCase& c = cases[k];
    const int64_t lab = serving::retry_after_seconds(c.in_flight, c.capacity, c.max_running, c.mean_service_seconds);
    if (lab != retry_by(RetryRule::contract, c))
      return ::testing::AssertionFailure()
             << "lab bug: serving::retry_after_seconds and the model disagree on " << quote_text(c.lesson);
    const std::string where = (c.lesson.empty() ? "" : c.lesson + ":\n  ") + "retry_after_seconds(in_flight " +
                              std::to_string(c.in_flight) + ", capacity " + std::to_string(c.capacity) +
                              ", max_running " + std::to_string(c.max_running) + ", mean_service_seconds " +
                              show(c.mean_service_seconds) + ")";
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << where << "\n  no answer: " << missing;
    if (got.answers[k] == lab) continue;
    const int64_t ahead = std::max<int64_t>(1, c.in_flight - c.capacity + 1);
    ::testing::AssertionResult failure = ::testing::AssertionFailure();
    failure << where << ": expected " << lab << ", got " << got.answers[k];
    if (c.mean_service_seconds > 0)
      failure << "\n  worked out: ahead = max(1, " << c.in_flight << " − " << c.capacity << " + 1) = " << ahead
              << "; ceil(" << ahead << " · " << show(c.mean_service_seconds) << " / " << c.max_running << ") = ceil("
              << show(double(ahead) * c.mean_service_seconds / double(c.max_running)) << "), in [1, 3600]";
    else
      failure << "\n  nothing measured yet (S ≤ 0 or NaN): the answer is 1";
    for (const RetryRule rule : {RetryRule::no_ceil, RetryRule::no_plus_one, RetryRule::no_divide, RetryRule::no_clamp})
      if (got.answers[k] == retry_by(rule, c))
        return failure << "\n  exactly what gives this answer: " << describe(rule);
    return failure;
  }
  return ::testing::AssertionSuccess();
}

/// ch09.h's worked example, exact quotients, the clamps, nothing measured.
inline std::vector<RetryCase> hand_retries() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {
      {8, 8, 4, 2.5, "ch09.h's worked example: 8 held of 8, S 2.5 s, 4 running: ceil(0.625) = 1"},
      {15, 8, 4, 2.5, "ch09.h's worked example: 15 held, ahead 8: 8 · 2.5 / 4 = 5 exactly"},
      {8, 8, 4, 30.0, "ch09.h's worked example: S 30 s: ceil(7.5) = 8"},
      {12, 10, 2, 3.0, "ahead 3, 3 · 3 / 2 = 4.5 → 5"},
      {20, 10, 1, 0.25, "ahead 11, 11 · 0.25 = 2.75 → 3"},
      {10, 10, 8, 0.5, "less than a second: at least 1"},
      {5, 10, 2, 6.0, "fewer held than the capacity (a stale count): ahead is at least 1 → 3"},
      {100, 10, 1, 600.0, "ahead 91 · 600 s: clamped to 3600"},
      {9, 8, 4, 1e300, "an enormous S: clamped to 3600"},
      {9, 8, 4, 0.0, "nothing measured yet (S = 0): 1"},
      {9, 8, 4, -2.0, "a negative S: 1"},
      {9, 8, 4, nan, "S is NaN: 1"},
  };
}

/// @p count random questions (S log-uniform over 10 ms … 20 min, exact multiples of 1/4 s too).
inline std::vector<RetryCase> random_retries(SeededRng& rng, int count) {
  std::vector<RetryCase> cases;
  for (int i = 0; i < count; ++i) {
    const int64_t running = rng.integer(1, 256), capacity = running + rng.integer(0, 256);
    const double s = rng.integer(0, 3) == 0
                         ? 0.25 * double(rng.integer(1, 400))
                         : 0.01 * std::pow(120000.0, std::uniform_real_distribution<double>(0.0, 1.0)(rng.engine()));
    cases.push_back({rng.integer(0, 2 * capacity + 8), capacity, running, s,
                     "a random question (" + std::to_string(i + 1) + " of " + std::to_string(count) + ")"});
  }
  return cases;
}

}  // namespace inferlab::testing::ch09
