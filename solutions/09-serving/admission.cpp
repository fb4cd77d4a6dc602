// Exercise 9.3 — admission control: a straightforward answer (the lab's is
// runtime/serving/admission.cpp). See exercises/09-serving/ch09.h.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "09-serving/ch09.h"
#include "common/check.h"

namespace inferlab::student {

StudentAdmission::StudentAdmission(int64_t max_running, int64_t max_waiting)
    : max_running_(max_running), max_waiting_(max_waiting) {
  require_positive("max_running", max_running);
  require(max_waiting >= 0, "max_waiting", max_waiting, "must be ≥ 0");
}

int64_t StudentAdmission::retry_after_seconds(double mean_service_seconds) const {
  return student::retry_after_seconds(in_flight(), capacity(), max_running_, mean_service_seconds);
}

bool StudentAdmission::try_admit() {
  // The check and the increment as one atomic step: the exchange fails (and reloads held) when
  // another thread changed the count since it was read.
  int64_t held = in_flight_.load();
  do {
    if (held >= capacity()) return false;
  } while (!in_flight_.compare_exchange_weak(held, held + 1));
  return true;
}

void StudentAdmission::release() {
  in_flight_.fetch_sub(1);
}

int64_t retry_after_seconds(int64_t in_flight, int64_t capacity, int64_t max_running, double mean_service_seconds) {
  if (!(mean_service_seconds > 0)) return 1;  // nothing measured yet (≤ 0 or NaN)
  const int64_t ahead = std::max<int64_t>(1, in_flight - capacity + 1);
  const double seconds = std::ceil(double(ahead) * mean_service_seconds / double(max_running));
  return int64_t(std::clamp(seconds, 1.0, 3600.0));
}

}  // namespace inferlab::student
