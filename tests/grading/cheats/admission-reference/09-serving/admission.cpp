// CHEAT (caught by the inspection: references): answers exercise 9.3's Retry-After with the
// server's own retry_after_seconds (runtime/serving/admission.h), declared here by hand (no include of
// tools/, which the inspection's include check would name as well), and its counter with a
// compare-exchange. The other exercises are the unmodified stubs.
#include <atomic>
#include <cstdint>

#include "09-serving/ch09.h"
#include "common/check.h"

namespace inferlab::serving {
int64_t retry_after_seconds(int64_t in_flight, int64_t capacity, int64_t max_running, double mean_service_seconds);
}  // namespace inferlab::serving

namespace inferlab::student {

StudentAdmission::StudentAdmission(int64_t max_running, int64_t max_waiting)
    : max_running_(max_running), max_waiting_(max_waiting) {
  require_positive("max_running", max_running);
}

int64_t StudentAdmission::retry_after_seconds(double mean_service_seconds) const {
  return student::retry_after_seconds(in_flight(), capacity(), max_running_, mean_service_seconds);
}

bool StudentAdmission::try_admit() {
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
  return inferlab::serving::retry_after_seconds(in_flight, capacity, max_running, mean_service_seconds);
}

}  // namespace inferlab::student
