#include "runtime/tokenizer/stop_strings.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace inferlab::tokenizer {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  if (stops_.size() > kMaxStops)
    throw std::invalid_argument("stop: " + std::to_string(stops_.size()) + " strings, at most " +
                                std::to_string(kMaxStops) + " are allowed");
  for (size_t i = 0; i < stops_.size(); ++i)
    if (stops_[i].empty()) throw std::invalid_argument("stop[" + std::to_string(i) + "]: must not be empty");
}

std::string StopStringMatcher::push(std::string_view piece) {
  if (stopped()) return {};
  held_.append(piece);
  // 1. The match that completes first (generation stops at the token that completes one): the
  //    least end; at one end, the longer string, which starts earlier. The held part could not
  //    match alone, but it can together with the new piece.
  size_t at = std::string::npos, end = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t found = held_.find(stops_[i]);
    if (found == std::string::npos) continue;
    const size_t found_end = found + stops_[i].size();
    if (found_end < end || (found_end == end && found < at)) {
      at = found;
      end = found_end;
      matched_ = i;
    }
  }
  if (at != std::string::npos) {
    std::string shown = held_.substr(0, at);
    held_.clear();
    return shown;
  }
  // 2. No match: hold back the longest suffix that is a proper prefix of some stop string (a
  //    full one would have matched above); show the rest.
  size_t keep = 0;
  for (const std::string& stop : stops_)
    for (size_t n = std::min(stop.size() - 1, held_.size()); n > keep; --n)
      if (held_.compare(held_.size() - n, n, stop, 0, n) == 0) {
        keep = n;
        break;
      }
  std::string shown = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return shown;
}

std::string StopStringMatcher::flush() {
  return std::exchange(held_, {});
}

}  // namespace inferlab::tokenizer
