// Exercise 9.1 — stop strings in a stream: a straightforward answer (the lab's is
// runtime/tokenizer/stop_strings.cpp). See exercises/09-serving/ch09.h.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "09-serving/ch09.h"
#include "common/check.h"

namespace inferlab::student {

StopStringFilter::StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
  if (stops_.size() > kMaxStops)
    throw std::invalid_argument("stop: " + std::to_string(stops_.size()) + " strings, at most " +
                                std::to_string(kMaxStops) + " are allowed");
  for (size_t i = 0; i < stops_.size(); ++i)
    if (stops_[i].empty()) throw std::invalid_argument("stop[" + std::to_string(i) + "]: must not be empty");
}

std::string StopStringFilter::push(std::string_view piece) {
  if (stopped()) return {};
  held_.append(piece);
  // 1. The match completed first: the least end; at one end the earlier start (the longer).
  size_t best_start = std::string::npos, best_end = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t start = held_.find(stops_[i]);  // its first occurrence ends first
    if (start == std::string::npos) continue;
    const size_t end = start + stops_[i].size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
      matched_ = i;
    }
  }
  if (stopped()) {
    std::string shown = held_.substr(0, best_start);
    held_.clear();
    return shown;
  }
  // 2. No match: hold the longest suffix that is a proper prefix of a stop string.
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

std::string StopStringFilter::flush() {
  return std::exchange(held_, {});
}

}  // namespace inferlab::student
