#pragma once
/// @file prediction_check.h
/// "Predict, then measure": the check behind every chapter's prediction questions
/// (exercises/NN-slug/predictions.h). A question is asked over several scenarios — a worked one
/// from the lesson, odd ones, fresh random ones — so a hard-coded number cannot pass; each
/// scenario's answer is worked out in the test from first principles (never by the lab's cost or
/// analysis code, which a student could call) and compared within a tolerance that suits a
/// prediction. A failure names the scenario, the expected value and its ingredients, what the
/// student answered, which classic mistake gives that answer when one does, and the lesson's
/// section.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace inferlab::testing {

/// A wrong way to answer a question and the value it gives in one scenario (so a failure can say
/// "that is what you get if you …").
struct KnownMistake {
  std::string what;  ///< "the article's model (scores moved once)"
  double value;      ///< what that mistake answers in this scenario
};

/// One scenario of a prediction question and the student's answer to it.
struct Prediction {
  std::string inputs;                  ///< the scenario in words: "L = 2048, d = 128, fp16"
  double expected;                     ///< worked out in the test from first principles
  std::string working;                 ///< the formula with its ingredients: "4·L²·d / (2·(4·L² + 4·L·d)) = …"
  double got;                          ///< the student's prediction
  std::vector<KnownMistake> mistakes;  ///< classic wrong answers in this scenario
};

/// A number for a message: 4 significant digits, or an integer as it is.
inline std::string prediction_number(double x) {
  char buffer[64];
  if (std::isfinite(x) && x == std::round(x) && std::abs(x) < 1e15)
    std::snprintf(buffer, sizeof buffer, "%.0f", x);
  else
    std::snprintf(buffer, sizeof buffer, "%.4g", x);
  return buffer;
}

/// Whether @p got is @p expected within the relative tolerance @p relative or the absolute one
/// @p absolute (NaN and Inf never are, unless expected).
inline bool prediction_close(double got, double expected, double relative, double absolute) {
  if (std::isinf(expected)) return got == expected;
  if (!std::isfinite(got)) return false;
  return std::abs(got - expected) <= std::max(absolute, relative * std::abs(expected));
}

/// Passes when every prediction is within @p relative (e.g. 0.01 for 1%) or @p absolute of its
/// expected value; otherwise a message naming the question (@p question, with its units), each
/// wrong scenario (at most 4 listed), the mistake its answer matches when one does, the lesson
/// (@p lesson: "chapters/01-naive-cpu-attention/README.md §2") and the seed of the fresh
/// scenarios (@p seed_note, from seed_note()).
inline ::testing::AssertionResult predictions_match(const std::string& question, const std::vector<Prediction>& predictions,
                                                    double relative, double absolute, const std::string& lesson,
                                                    const std::string& seed_note) {
  std::ostringstream out;
  size_t wrong = 0;
  for (const Prediction& p : predictions) {
    if (prediction_close(p.got, p.expected, relative, absolute)) continue;
    if (++wrong > 4) continue;
    out << "\n  " << p.inputs << ": expected " << prediction_number(p.expected) << ", you predicted "
        << prediction_number(p.got);
    if (std::isfinite(p.got) && p.expected != 0.0)
      out << " (" << prediction_number(p.got / p.expected) << "× the expected value)";
    out << "\n    worked out: " << p.working;
    for (const KnownMistake& m : p.mistakes)
      if (prediction_close(p.got, m.value, std::max(relative, 1e-6), absolute) &&
          !prediction_close(m.value, p.expected, relative, absolute)) {
        out << "\n    your answer is what " << m.what << " gives";
        break;
      }
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  std::ostringstream head;
  head << "Prediction " << question << ": " << wrong << " of " << predictions.size()
       << " scenarios are off by more than ";
  if (relative > 0.0) head << prediction_number(relative * 100.0) << "%";
  if (relative > 0.0 && absolute > 0.0) head << " (or " << prediction_number(absolute) << ")";
  if (relative == 0.0) head << prediction_number(absolute);
  head << out.str();
  if (wrong > 4) head << "\n  … and " << (wrong - 4) << " more";
  head << "\n  The lesson works it out: " << lesson << ". " << seed_note;
  return ::testing::AssertionFailure() << head.str();
}

}  // namespace inferlab::testing
