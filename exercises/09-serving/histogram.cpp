// Exercise 9.2 — a Prometheus histogram: a value's bucket (le: the first bound ≥ it) and the
// cumulative text exposition. See ch09.h for the format and a worked example.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "09-serving/ch09.h"
#include "common/check.h"

namespace inferlab::student {

// ---- given ----

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

// ---- the exercise ----

void StudentHistogram::observe(double value) {
  // ---- given: the check ----
  if (std::isnan(value)) throw std::invalid_argument("StudentHistogram::observe: value is NaN");

  throw NotImplemented("StudentHistogram::observe");  // TODO(student): delete this line once written

  // TODO(student): the bucket is the index of the first bound ≥ value (std::lower_bound over
  // bounds_), bounds_.size() (+Inf) when none; one more in counts_[bucket], value added to sum_,
  // one more in count_. (roughly 5 lines)
}

std::string StudentHistogram::exposition(const std::string& name, const std::string& help, const Labels& labels) const {
  throw NotImplemented("StudentHistogram::exposition");  // TODO(student): delete this line once written

  // TODO(student): "# HELP name help\n# TYPE name histogram\n"; then for each bucket i (the
  // bounds, then "+Inf"): name_bucket{labels,le="bound"} and the RUNNING total of counts_ up to
  // i; then name_sum{labels} sum_ and name_count{labels} count_. Labels: key="escaped value"
  // joined by ",", le last; no braces at all when a line has no label. Numbers by
  // prometheus_number(). (roughly 15 lines)
  (void)name, (void)help, (void)labels;
  return {};
}

}  // namespace inferlab::student
