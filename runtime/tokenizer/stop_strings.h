#pragma once
/// @file stop_strings.h
/// Stop strings (the OpenAI API's `stop`, chapter 09): generation ends where the *text* first
/// contains one of them, and the stop string itself is never shown. The text arrives a token at
/// a time, and a stop string often spans a token boundary ("\n\n" as "\n" + "\n", "User:" as
/// "User" + ":"), so a streaming server cannot show a piece as soon as it has it: the end of what
/// it holds may be the beginning of a stop string. StopStringMatcher holds back exactly that —
/// the longest suffix of the unshown text that is a proper prefix of some stop string — and
/// shows the rest.
///
/// Which match: the one *completed* first, as generation stops at the token that completes a
/// stop string — in "xaby" with stops "aby" and "b", "b" completes first (the text shown is
/// "xa"), although "aby" starts earlier. At one end the longer string (it starts earlier) wins.
///
/// Guarantees (tests/09-serving/test_stop_strings.cpp, against a search of the whole text over
/// random ways of cutting it into pieces): the pieces push() returns, then flush()'s,
/// concatenated, equal the whole text cut before the stop string that ends first (the whole text
/// when none occurs) — whatever the cuts; no piece ever holds a stop string or a part of one
/// that is then matched; text is held back only while it may still become a match. Pieces of
/// whole UTF-8 characters stay whole (a valid stop string starts on a character's first byte).
///
/// Cost: a push is O((held + piece) · Σ|stop|); what is held is shorter than the longest stop.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab::tokenizer {

/// Finds stop strings in a text that arrives in pieces.
class StopStringMatcher {
 public:
  /// At most kMaxStops strings, each non-empty; throws std::invalid_argument naming the bad one
  /// ("stop[1]: must not be empty"). No strings: nothing ever stops, nothing is held back.
  explicit StopStringMatcher(std::vector<std::string> stops = {});

  /// The most stop strings a request may give (the OpenAI API's limit).
  static constexpr size_t kMaxStops = 4;

  /// Adds @p piece; returns the text that can be shown now. Once a stop string has matched
  /// (stopped() becomes true) the returned text ends just before it, and every later push
  /// returns "".
  std::string push(std::string_view piece);
  /// The end of the text: returns what was held back (nothing after a match), then "".
  std::string flush();

  /// True once a stop string has matched.
  bool stopped() const { return matched_ != npos; }
  /// The stop string that matched (empty before a match).
  std::string_view matched() const { return stopped() ? std::string_view(stops_[matched_]) : std::string_view(); }
  /// The text held back now: a proper prefix of some stop string.
  const std::string& held() const { return held_; }

 private:
  static constexpr size_t npos = static_cast<size_t>(-1);
  std::vector<std::string> stops_;
  std::string held_;
  size_t matched_ = npos;
};

}  // namespace inferlab::tokenizer
