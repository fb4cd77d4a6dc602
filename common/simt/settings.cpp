// The emulator's settings: the schedule (set_schedule(), else SIMT_SCHEDULE), the number of
// workers (set_workers(), else SIMT_WORKERS), the checks (set_checks(), else SIMT_CHECK) and the
// fiber stack size (SIMT_STACK_KIB).

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "simt/detail/engine.h"

namespace simt {
namespace detail {
namespace {

// ---- settings ---------------------------------------------------------------------------------

std::mutex settings_mutex;
bool schedule_set = false;
Schedule current_schedule;
int worker_count = 0;
bool checks_set = false;
Checks current_checks;

Schedule schedule_from_environment() {
  const char* text = std::getenv("SIMT_SCHEDULE");
  if (text == nullptr || *text == '\0') return {};
  return Schedule::parse(text);
}

int workers_from_environment() {
  if (const char* text = std::getenv("SIMT_WORKERS"); text != nullptr && *text != '\0') {
    const int count = std::atoi(text);
    if (count >= 1) return count;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

size_t stack_bytes() {
  static const size_t bytes = [] {
    size_t kib = SIMT_ASAN ? 1024 : 256;
    if (const char* text = std::getenv("SIMT_STACK_KIB"); text != nullptr && std::atoi(text) >= 16)
      kib = static_cast<size_t>(std::atoi(text));
    return kib * 1024;
  }();
  return bytes;
}

}  // namespace detail

// ---- public controls --------------------------------------------------------------------------

Schedule Schedule::parse(std::string_view text) {
  if (text == "forward") return {Order::forward, 0};
  if (text == "reverse") return {Order::reverse, 0};
  if (text.starts_with("random:") && text.size() > 7) {
    const std::string digits(text.substr(7));
    char* end = nullptr;
    const uint64_t seed = std::strtoull(digits.c_str(), &end, 10);
    if (end != nullptr && *end == '\0') return {Order::random, seed};
  }
  throw std::invalid_argument("SIMT_SCHEDULE = " + std::string(text) + ": must be forward, reverse or random:SEED");
}

std::string Schedule::to_string() const {
  switch (order) {
    case Order::forward:
      return "forward";
    case Order::reverse:
      return "reverse";
    case Order::random:
      return "random:" + std::to_string(seed);
  }
  return "?";
}

Schedule schedule() {
  std::lock_guard lock(detail::settings_mutex);
  if (!detail::schedule_set) {
    detail::current_schedule = detail::schedule_from_environment();
    detail::schedule_set = true;
  }
  return detail::current_schedule;
}

void set_schedule(Schedule value) {
  std::lock_guard lock(detail::settings_mutex);
  detail::current_schedule = value;
  detail::schedule_set = true;
}

int workers() {
  std::lock_guard lock(detail::settings_mutex);
  if (detail::worker_count == 0) detail::worker_count = detail::workers_from_environment();
  return detail::worker_count;
}

Checks Checks::parse(std::string_view text) {
  if (text == "all") return Checks{};
  if (text == "none") return Checks{false, false, false};
  Checks result{false, false, false};
  std::string_view rest = text;
  for (bool more = true; more;) {
    const size_t comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    more = comma != std::string_view::npos;
    if (name == "memcheck")
      result.memcheck = true;
    else if (name == "racecheck")
      result.racecheck = true;
    else if (name == "initcheck")
      result.initcheck = true;
    else
      throw std::invalid_argument("SIMT_CHECK = " + std::string(text) +
                                  ": must be all, none, or a comma list of memcheck, racecheck, initcheck");
    if (more) rest = rest.substr(comma + 1);
  }
  return result;
}

std::string Checks::to_string() const {
  if (memcheck && racecheck && initcheck) return "all";
  if (!any()) return "none";
  std::string text;
  for (const auto& [on, name] : {std::pair{memcheck, "memcheck"}, {racecheck, "racecheck"}, {initcheck, "initcheck"}})
    if (on) {
      // Appended piece by piece: `"," + std::string(name)` inserts the literal in front of a
      // temporary, which GCC 12 at -O2/-O3 reports as an overlapping memcpy (-Wrestrict): a false
      // positive, GCC bug 105329. Two appends say the same without the temporary.
      if (!text.empty()) text += ',';
      text += name;
    }
  return text;
}

Checks checks() {
  std::lock_guard lock(detail::settings_mutex);
  if (!detail::checks_set) {
    const char* text = std::getenv("SIMT_CHECK");
    detail::current_checks = text == nullptr || *text == '\0' ? Checks{} : Checks::parse(text);
    detail::checks_set = true;
  }
  return detail::current_checks;
}

void set_checks(Checks value) {
  std::lock_guard lock(detail::settings_mutex);
  detail::current_checks = value;
  detail::checks_set = true;
}

void set_workers(int count) {
  if (count < 1) throw std::invalid_argument("simt::set_workers: count = " + std::to_string(count) + ": must be >= 1");
  std::lock_guard lock(detail::settings_mutex);
  detail::worker_count = count;
}

}  // namespace simt
