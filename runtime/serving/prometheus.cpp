#include "runtime/serving/prometheus.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace inferlab::serving {

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  if (bounds_.empty()) throw std::invalid_argument("Histogram: upper_bounds is empty");
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]))
      throw std::invalid_argument("Histogram: upper_bounds[" + std::to_string(i) + "] = " +
                                  prometheus_number(bounds_[i]) + " must be finite (+Inf is implied)");
    if (i > 0 && !(bounds_[i] > bounds_[i - 1]))
      throw std::invalid_argument("Histogram: upper_bounds[" + std::to_string(i) + "] = " +
                                  prometheus_number(bounds_[i]) + " must be above upper_bounds[" +
                                  std::to_string(i - 1) + "] = " + prometheus_number(bounds_[i - 1]));
  }
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::observe(double value) {
  if (std::isnan(value)) throw std::invalid_argument("Histogram::observe: value is NaN");
  // The first bound ≥ value (le: less or equal); past every bound, the +Inf bucket.
  const auto bucket = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  const std::lock_guard lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

HistogramSnapshot Histogram::snapshot() const {
  HistogramSnapshot h;
  h.upper_bounds = bounds_;
  const std::lock_guard lock(mutex_);
  uint64_t running = 0;
  for (const uint64_t c : counts_) h.cumulative.push_back(running += c);
  h.sum = sum_;
  h.count = count_;
  return h;
}

std::string prometheus_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, end);
}

std::string escape_label_value(const std::string& value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {
std::string with_labels(const std::string& name, const Labels& labels) {
  if (labels.empty()) return name;
  std::string out = name + "{";
  for (size_t i = 0; i < labels.size(); ++i)
    out += (i ? "," : "") + labels[i].first + "=\"" + escape_label_value(labels[i].second) + "\"";
  return out + "}";
}
}  // namespace

void MetricsText::family(const std::string& name, const std::string& type, const std::string& help) {
  text_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void MetricsText::sample(const std::string& name, const Labels& labels, double value) {
  text_ += with_labels(name, labels) + " " + prometheus_number(value) + "\n";
}

void MetricsText::scalar(const std::string& name, const std::string& type, const std::string& help,
                         const Labels& labels, double value) {
  family(name, type, help);
  sample(name, labels, value);
}

void MetricsText::histogram(const std::string& name, const std::string& help, const Labels& labels,
                            const HistogramSnapshot& h) {
  family(name, "histogram", help);
  for (size_t i = 0; i <= h.upper_bounds.size(); ++i) {
    Labels with_le = labels;
    with_le.emplace_back("le", i < h.upper_bounds.size() ? prometheus_number(h.upper_bounds[i]) : "+Inf");
    sample(name + "_bucket", with_le, double(h.cumulative[i]));
  }
  sample(name + "_sum", labels, h.sum);
  sample(name + "_count", labels, double(h.count));
}

}  // namespace inferlab::serving
