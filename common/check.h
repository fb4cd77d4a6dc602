#pragma once
/// @file check.h
/// Argument validation: bad input becomes a clear std::invalid_argument naming the argument,
/// never undefined behaviour.

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace inferlab {

/// Throws std::invalid_argument("<name> = <value>: <rule>") unless @p ok.
/// @param ok    the condition that valid input satisfies
/// @param name  the argument's name as the caller sees it (e.g. "seq_len")
/// @param value the offending value, printed with operator<<
/// @param rule  what a valid value looks like (e.g. "must be > 0")
template <class T>
void require(bool ok, std::string_view name, const T& value, std::string_view rule) {
  if (ok) return;
  std::ostringstream message;
  message << name << " = " << value << ": " << rule;
  throw std::invalid_argument(message.str());
}

/// Throws std::invalid_argument unless @p value > 0.
inline void require_positive(std::string_view name, long long value) {
  require(value > 0, name, value, "must be > 0");
}

/// The error thrown by an exercise stub that the student has not written yet.
/// Its message is always "not implemented yet: <exercise>".
class NotImplemented : public std::logic_error {
 public:
  /// @param exercise the exercise's name, e.g. "softmax_row"
  explicit NotImplemented(std::string_view exercise)
      : std::logic_error("not implemented yet: " + std::string(exercise)) {}
};

}  // namespace inferlab
