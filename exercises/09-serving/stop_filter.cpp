// Exercise 9.1 — stop strings in a stream of text pieces: hold back what may still become a stop
// string, show the rest, stop at the match that completes first. See ch09.h for the rules and a
// worked example.
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "09-serving/ch09.h"
#include "common/check.h"

namespace inferlab::student {

// ---- given ----

StopStringFilter::StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
  if (stops_.size() > kMaxStops)
    throw std::invalid_argument("stop: " + std::to_string(stops_.size()) + " strings, at most " +
                                std::to_string(kMaxStops) + " are allowed");
  for (size_t i = 0; i < stops_.size(); ++i)
    if (stops_[i].empty()) throw std::invalid_argument("stop[" + std::to_string(i) + "]: must not be empty");
}

// ---- the exercise ----

std::string StopStringFilter::push(std::string_view piece) {
  throw NotImplemented("StopStringFilter::push");  // TODO(student): delete this line once written

  // TODO(student): after a match (stopped()) return "". Otherwise append piece to held_, then:
  //   1. for each stop i, held_.find(stops_[i]) is its first occurrence; keep the one with the
  //      least end (found + size), at one end the one found earlier (the longer string), at one
  //      end and one start the lowest i. Found: matched_ = i, return the text before it, clear
  //      held_.
  //   2. none: keep = the longest n < |stop| (over every stop) with the last n bytes of held_ equal
  //      to the first n of the stop; return all but those n bytes, keep them in held_.
  // (roughly 22 lines)
  (void)piece;
  return {};
}

std::string StopStringFilter::flush() {
  throw NotImplemented("StopStringFilter::flush");  // TODO(student): delete this line once written

  // TODO(student): return what is held and empty held_ (std::exchange). (1 line)
  return {};
}

}  // namespace inferlab::student
