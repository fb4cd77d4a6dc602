#pragma once
/// @file student_answers.h
/// What the graded checks of chapters 07–12 get back from the code under test (the student's, in a
/// sandboxed child; a wrong fixture's, in process): its answers to a batch of inputs, in input order,
/// and why they stop early when they do. One definition for every chapter's student_check.h.

#include <cstddef>
#include <exception>
#include <span>
#include <string>
#include <vector>

namespace inferlab::testing {

/// The answers of the code under test to a batch of inputs, in input order. Fewer answers than
/// inputs: it stopped (threw, crashed) at input answers.size(), and @ref error says how.
template <class T>
struct Answers {
  std::vector<T> answers;  ///< one per input answered
  std::string error;       ///< why the answers stop early ("" when all came back)
};

/// "" when answer @p k came back; else why not.
template <class T>
std::string missing_answer(const Answers<T>& got, size_t k) {
  if (k < got.answers.size()) return "";
  return got.error.empty() ? "no answer came back for this input" : got.error;
}

/// The answers of @p answer_one to @p inputs, in this process, one after the other; the first
/// input it throws on ends the batch, its message in Answers::error (the wrong fixtures' runners,
/// and the runtime's own functions run through a chapter's checks).
template <class Answer, class Input, class AnswerOne>
Answers<Answer> answer_each(std::span<const Input> inputs, const AnswerOne& answer_one) {
  Answers<Answer> result;
  result.answers.reserve(inputs.size());
  for (const Input& input : inputs) {
    try {
      result.answers.push_back(answer_one(input));
    } catch (const std::exception& error) {
      result.error = std::string("it threw: ") + error.what();
      break;
    }
  }
  return result;
}

}  // namespace inferlab::testing
