// The launch: validates it like a GPU, then spreads its blocks over the calling thread and a
// pool of worker OS threads (SIMT_WORKERS), one launch at a time.

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "simt/detail/device_memory.h"
#include "simt/detail/engine.h"

namespace simt {
namespace detail {
namespace {

// ---- worker pool ------------------------------------------------------------------------------

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  // Runs the launch's blocks on the calling thread plus (helpers) pool threads.
  void run(Launch& launch, unsigned helpers) {
    while (threads_.size() < helpers) threads_.emplace_back([this, index = threads_.size()] { loop(index); });
    {
      std::lock_guard lock(mutex_);
      job_ = &launch;
      helpers_ = helpers;
      pending_ = helpers;
      ++generation_;
    }
    if (helpers > 0) wake_.notify_all();
    run_blocks(launch);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  void loop(size_t index) {
    uint64_t seen = 0;
    for (;;) {
      Launch* job = nullptr;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && index < helpers_); });
        if (stopping_) return;
        seen = generation_;
        job = job_;
      }
      run_blocks(*job);
      {
        std::lock_guard lock(mutex_);
        --pending_;
      }
      done_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  Launch* job_ = nullptr;
  size_t helpers_ = 0;
  size_t pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

std::mutex launch_mutex;  // one launch at a time (the emulator is one device)
LaunchRecord last_record;
uint64_t launches = 0;  // launch_count()

}  // namespace

// ---- the launch entry point -------------------------------------------------------------------

cudaError_t run_launch(const LaunchRequest& request) {
  std::lock_guard lock(launch_mutex);
  static const bool death_callbacks_installed = [] {
    install_sanitizer_death_callbacks();
    return true;
  }();
  (void)death_callbacks_installed;
  ++launches;
  if (const cudaError_t sticky = sticky_error(); sticky != cudaSuccess) return sticky;
  Launch launch;
  launch.request = &request;
  launch.kernel = kernel_name(request.kernel, request.site);
  launch.schedule = schedule();
  launch.checks = checks();
  last_record = LaunchRecord{launch.kernel, where(request.site), request.grid, request.block, request.shared_bytes};

  const uint3 b = request.block, g = request.grid;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  const std::string name = "simt: launch of '" + launch.kernel + "' at " + where(request.site) + ": ";
  if (b.x == 0 || b.y == 0 || b.z == 0 || g.x == 0 || g.y == 0 || g.z == 0)
    return set_error(cudaErrorInvalidConfiguration,
                     name + "grid " + dims(g) + " / block " + dims(b) + " has a zero dimension", false);
  if (threads > kMaxThreadsPerBlock || b.x > 1024 || b.y > 1024 || b.z > 64)
    return set_error(cudaErrorInvalidConfiguration,
                     name + "blockDim " + dims(b) + " = " + std::to_string(threads) +
                         " threads; a block holds at most 1024 (x, y <= 1024, z <= 64)",
                     false);
  if (g.x > 2147483647u || g.y > 65535 || g.z > 65535)
    return set_error(cudaErrorInvalidConfiguration, name + "gridDim " + dims(g) + " exceeds (2^31-1, 65535, 65535)",
                     false);
  const int limit = max_dynamic_shared_bytes(request.kernel);
  if (request.shared_bytes > static_cast<size_t>(limit))
    return set_error(
        cudaErrorInvalidValue,
        name + std::to_string(request.shared_bytes) + " bytes of dynamic shared memory exceed the limit of " +
            std::to_string(limit) +
            (limit == kDefaultSharedBytes ? " (raise it with cudaFuncSetAttribute(kernel, "
                                            "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), up to 227 KiB)"
                                          : ""),
        false);

  launch.blocks = uint64_t{g.x} * g.y * g.z;
  launch.threads = static_cast<unsigned>(threads);
  if (launch.schedule.order == Order::random && launch.blocks > 1) {
    SplitMix rng{launch.schedule.seed ^ 0x5bd1e995ull};
    launch.offset = rng() % launch.blocks;
    do launch.stride = rng() % launch.blocks;
    while (launch.stride == 0 || std::gcd(launch.stride, launch.blocks) != 1);
  }
  static Pool pool;
  const unsigned helpers =
      static_cast<unsigned>(std::min<uint64_t>(static_cast<uint64_t>(workers()), launch.blocks)) - 1;
  {
    const DeviceAccess access;  // device memory is the kernel's while it runs
    snapshot_watch();
    try {
      pool.run(launch, helpers);
    } catch (const std::exception& e) {
      launch.fail(std::string("simt: the emulator failed: ") + e.what());
    }
  }
  if (launch.failed) return set_error(cudaErrorLaunchFailure, launch.error, true);
  return cudaSuccess;
}

}  // namespace detail

// ---- public controls --------------------------------------------------------------------------

LaunchRecord last_launch() {
  std::lock_guard lock(detail::launch_mutex);
  return detail::last_record;
}

uint64_t launch_count() {
  std::lock_guard lock(detail::launch_mutex);
  return detail::launches;
}

}  // namespace simt
