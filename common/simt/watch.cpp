// simt::watch_writes(): after every stretch that a thread runs between two synchronisation
// points, compares the watched bytes with their previous value and records the thread if they
// changed — so a test can name who last wrote a differing output.

#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "simt/detail/device_memory.h"
#include "simt/detail/engine.h"

namespace simt {
namespace detail {

Watch watch;

void record_watch(Worker& w, Lane& lane) {
  std::lock_guard lock(watch.mutex);
  if (watch.address == nullptr) return;
  if (std::memcmp(watch.snapshot.data(), watch.address, watch.snapshot.size()) == 0) return;
  std::memcpy(watch.snapshot.data(), watch.address, watch.snapshot.size());
  WatchedWrite write;
  write.kernel = w.launch->kernel;
  write.block = blockIdx;
  write.thread = lane.thread;
  write.from = lane.has_resumed_from
                   ? "after " + std::string(op_name(lane.resumed_from_op)) + " at " + where(lane.resumed_from)
                   : "kernel start";
  write.to = lane.state == State::exited ? "exit" : std::string(op_name(lane.op)) + " at " + where(lane.site);
  watch.writes.push_back(std::move(write));
}

void snapshot_watch() {
  if (watch.active.load()) {  // host writes between launches are nobody's thread
    std::lock_guard watch_lock(watch.mutex);
    if (watch.address != nullptr) std::memcpy(watch.snapshot.data(), watch.address, watch.snapshot.size());
  }
}

}  // namespace detail

// ---- public controls --------------------------------------------------------------------------

void watch_writes(const void* address, size_t bytes) {
  std::lock_guard lock(detail::watch.mutex);
  detail::watch.writes.clear();
  if (address == nullptr || bytes == 0) {
    detail::watch.address = nullptr;
    detail::watch.active = false;
    return;
  }
  detail::watch.address = static_cast<const unsigned char*>(address);
  const detail::DeviceAccess access;  // the watched bytes are device memory
  detail::watch.snapshot.assign(detail::watch.address, detail::watch.address + bytes);
  detail::watch.active = true;
}

std::vector<WatchedWrite> watched_writes() {
  std::lock_guard lock(detail::watch.mutex);
  return detail::watch.writes;
}

}  // namespace simt
