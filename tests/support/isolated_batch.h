#pragma once
/// @file isolated_batch.h
/// A batch of student calls in ONE sandboxed child (tests/support/isolation.h), each answer sent
/// back as bytes: the graded tests of chapter 09 draw all their inputs first, run the student's
/// code on every one of them in one child, and only then compute the expected answers and
/// compare (chapter 08's test_student.cpp does the same with its own copy).
///
/// The child sends the answers as one string, [8-byte length, bytes …] per input, and stops at
/// the first input the call throws on; that input then runs alone, in a child of its own, for
/// what it threw (NotImplemented stays "not implemented yet: …"). A child that crashes or exits
/// loses the whole batch: halving the batch then finds the first input it fails on, and the
/// answers before it.

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "common/check.h"
#include "tests/support/isolation.h"

namespace inferlab::testing {

/// The answers of a batch, in input order; fewer than the inputs when the call stopped (threw,
/// crashed) at input answers.size(), and then @ref error says how.
struct BatchAnswers {
  std::vector<std::string> answers;  ///< one per input answered, as the bytes the call returned
  std::string error;                 ///< why the answers stop early ("" when all came back)
};

/// Runs `answer(k)` — a student call whose answer comes back as a std::string of bytes — for
/// every k = 0 … @p count − 1 in one sandboxed child and brings the answers back.
template <class AnswerOne>
BatchAnswers isolated_batch(size_t count, const AnswerOne& answer) {
  const auto run_first = [&](size_t n) {
    return isolated_result([&] {  // in the child: the student's calls, nothing else
      std::string flat;
      for (size_t k = 0; k < n; ++k) {
        std::string one;
        try {
          one = answer(k);
        } catch (...) {
          break;
        }
        const uint64_t length = one.size();
        flat.append(reinterpret_cast<const char*>(&length), sizeof length);
        flat += one;
      }
      return flat;
    });
  };
  std::string flat, batch_failure;
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
    if (good == 0) flat.clear();
  }
  BatchAnswers result;
  for (size_t at = 0; at < flat.size() && result.answers.size() < count;) {
    uint64_t length = 0;
    if (flat.size() - at >= sizeof length) std::memcpy(&length, flat.data() + at, sizeof length);
    if (flat.size() - at < sizeof length || length > flat.size() - at - sizeof length) {
      result.error = "its answers came back garbled (the sandboxed child wrote over the test's memory?)";
      return result;
    }
    at += sizeof length;
    result.answers.push_back(flat.substr(at, size_t(length)));
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

/// Writes numbers and strings into the bytes of an isolated answer.
class AnswerWriter {
 public:
  /// Appends the 8 bytes of @p value.
  void number(int64_t value) { bytes_.append(reinterpret_cast<const char*>(&value), sizeof value); }
  /// Appends the 8 bytes of @p value.
  void real(double value) { bytes_.append(reinterpret_cast<const char*>(&value), sizeof value); }
  /// Appends @p text's length and bytes.
  void text(const std::string& text) {
    number(int64_t(text.size()));
    bytes_ += text;
  }
  /// The bytes so far.
  std::string str() && { return std::move(bytes_); }

 private:
  std::string bytes_;
};

/// Reads back what an AnswerWriter wrote; a short or garbled answer reads as zeros and empty
/// strings, and ok() turns false.
class AnswerReader {
 public:
  /// Reads @p bytes.
  explicit AnswerReader(const std::string& bytes) : bytes_(bytes) {}
  /// The next number.
  int64_t number() {
    int64_t value = 0;
    take(&value, sizeof value);
    return value;
  }
  /// The next real.
  double real() {
    double value = 0;
    take(&value, sizeof value);
    return value;
  }
  /// The next string.
  std::string text() {
    const int64_t length = number();
    if (length < 0 || uint64_t(length) > bytes_.size() - at_) {
      ok_ = false;
      return {};
    }
    std::string out = bytes_.substr(at_, size_t(length));
    at_ += size_t(length);
    return out;
  }
  /// False once a read ran past the end.
  bool ok() const { return ok_; }

 private:
  void take(void* out, size_t n) {
    if (bytes_.size() - at_ < n) {
      ok_ = false;
      at_ = bytes_.size();
      return;
    }
    std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
  }
  const std::string& bytes_;
  size_t at_ = 0;
  bool ok_ = true;
};

}  // namespace inferlab::testing
