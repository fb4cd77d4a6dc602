#include "runtime/serving/admission.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace inferlab::serving {

AdmissionControl::Ticket::~Ticket() {
  if (owner_ != nullptr) --owner_->in_flight_;
}

AdmissionControl::AdmissionControl(int64_t max_running, int64_t max_waiting)
    : max_running_(max_running), max_waiting_(max_waiting) {
  require_positive("max_running", max_running);
  require(max_waiting >= 0, "max_waiting", max_waiting, "must be ≥ 0");
}

std::optional<AdmissionControl::Ticket> AdmissionControl::try_admit() {
  int64_t held = in_flight_.load();
  do {
    if (held >= capacity()) return std::nullopt;
  } while (!in_flight_.compare_exchange_weak(held, held + 1));
  return Ticket(this);
}

int64_t AdmissionControl::retry_after_seconds(double mean_service_seconds) const {
  return serving::retry_after_seconds(in_flight(), capacity(), max_running_, mean_service_seconds);
}

int64_t retry_after_seconds(int64_t in_flight, int64_t capacity, int64_t max_running, double mean_service_seconds) {
  if (!(mean_service_seconds > 0) || max_running < 1) return 1;
  const int64_t ahead = std::max<int64_t>(1, in_flight - capacity + 1);
  const double seconds = std::ceil(double(ahead) * mean_service_seconds / double(max_running));
  return int64_t(std::clamp(seconds, 1.0, 3600.0));
}

}  // namespace inferlab::serving
