// Exercise 9.2 — a Prometheus histogram: a straightforward answer (the lab's is
// runtime/serving/prometheus.cpp). See exercises/09-serving/ch09.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "09-serving/ch09.h"
#include "common/check.h"

namespace inferlab::student {

StudentHistogram::StudentHistogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  if (bounds_.empty()) throw std::invalid_argument("StudentHistogram: upper_bounds is empty");
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]))
      throw std::invalid_argument("StudentHistogram: upper_bounds[" + std::to_string(i) +
                                  "] = " + prometheus_number(bounds_[i]) + " must be finite (+Inf is implied)");
    if (i > 0 && !(bounds_[i] > bounds_[i - 1]))
      throw std::invalid_argument("StudentHistogram: upper_bounds[" + std::to_string(i) +
                                  "] = " + prometheus_number(bounds_[i]) + " must be above upper_bounds[" +
                                  std::to_string(i - 1) + "] = " + prometheus_number(bounds_[i - 1]));
  }
  counts_.assign(bounds_.size() + 1, 0);
}

void StudentHistogram::observe(double value) {
  if (std::isnan(value)) throw std::invalid_argument("StudentHistogram::observe: value is NaN");
  // le: the first bound ≥ value; past every bound, the +Inf bucket (index bounds_.size()).
  const auto bucket = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

namespace {

// name{k="v",…} — no braces without labels.
std::string with_labels(const std::string& name, const Labels& labels) {
  if (labels.empty()) return name;
  std::string out = name + "{";
  for (size_t i = 0; i < labels.size(); ++i)
    out += (i ? "," : "") + labels[i].first + "=\"" + escape_label_value(labels[i].second) + "\"";
  return out + "}";
}

}  // namespace

std::string StudentHistogram::exposition(const std::string& name, const std::string& help, const Labels& labels) const {
  std::string text = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t running = 0;  // cumulative: bucket le = b counts every observation ≤ b
  for (size_t i = 0; i < counts_.size(); ++i) {
    Labels with_le = labels;
    with_le.emplace_back("le", i < bounds_.size() ? prometheus_number(bounds_[i]) : "+Inf");
    running += counts_[i];
    text += with_labels(name + "_bucket", with_le) + " " + prometheus_number(double(running)) + "\n";
  }
  text += with_labels(name + "_sum", labels) + " " + prometheus_number(sum_) + "\n";
  text += with_labels(name + "_count", labels) + " " + prometheus_number(double(count_)) + "\n";
  return text;
}

}  // namespace inferlab::student
