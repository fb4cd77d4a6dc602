// Exercise 9.3 — admission control: a thread-safe count of the requests held, never above the
// capacity, and the Little's-law Retry-After of a refused request. See ch09.h for the task and a
// worked example.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "09-serving/ch09.h"
#include "common/check.h"

namespace inferlab::student {

// ---- given ----

StudentAdmission::StudentAdmission(int64_t max_running, int64_t max_waiting)
    : max_running_(max_running), max_waiting_(max_waiting) {
  require_positive("max_running", max_running);
  require(max_waiting >= 0, "max_waiting", max_waiting, "must be ≥ 0");
}

int64_t StudentAdmission::retry_after_seconds(double mean_service_seconds) const {
  return student::retry_after_seconds(in_flight(), capacity(), max_running_, mean_service_seconds);
}

// ---- the exercise ----

bool StudentAdmission::try_admit() {
  throw NotImplemented("StudentAdmission::try_admit");  // TODO(student): delete this line once written

  // TODO(student): held = in_flight_.load(); loop: if held ≥ capacity() return false; else try
  // in_flight_.compare_exchange_weak(held, held + 1) — it fails (and reloads held) when another
  // thread changed the count in between: then check again. Return true once it succeeds.
  // (roughly 6 lines)
  return false;
}

void StudentAdmission::release() {
  throw NotImplemented("StudentAdmission::release");  // TODO(student): delete this line once written

  // TODO(student): one place fewer, atomically. (1 line)
}

int64_t retry_after_seconds(int64_t in_flight, int64_t capacity, int64_t max_running, double mean_service_seconds) {
  throw NotImplemented("retry_after_seconds");  // TODO(student): delete this line once written

  // TODO(student): 1 when !(mean_service_seconds > 0) (≤ 0 or NaN); ahead = max(1, in_flight −
  // capacity + 1); seconds = ceil(double(ahead) · mean_service_seconds / double(max_running)),
  // clamped to [1, 3600] in double (it may be +Inf), returned as int64_t. (roughly 5 lines)
  (void)in_flight, (void)capacity, (void)max_running, (void)mean_service_seconds;
  return 1;
}

}  // namespace inferlab::student
