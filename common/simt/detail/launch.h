#pragma once
/// @file launch.h
/// simt::launch and the emulator's controls (g++ only; included by simt/simt.h).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <source_location>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

/// The SIMT emulator: CUDA kernels on the CPU (see simt/simt.h).
namespace simt {

/// The order in which the threads of a block run between two synchronisation points, and the
/// order in which blocks are handed to workers. A correct kernel gives the same bytes under every
/// order; a missing barrier usually does not.
enum class Order {
  forward,  ///< thread 0, 1, 2, … (blocks in order)
  reverse,  ///< the last thread first (blocks in reverse order)
  random,   ///< a shuffle drawn from the seed, redrawn at every barrier (blocks shuffled too)
};

/// A thread order plus its seed (used by Order::random only).
struct Schedule {
  Order order = Order::forward;  ///< which order
  uint64_t seed = 0;             ///< the shuffle's seed for Order::random

  /// Parses "forward", "reverse" or "random:SEED"; throws std::invalid_argument otherwise.
  static Schedule parse(std::string_view text);
  /// "forward", "reverse" or "random:SEED" (parse() reads it back).
  std::string to_string() const;
  /// Two schedules are equal when order and (for random) seed are.
  bool operator==(const Schedule&) const = default;
};

/// The schedule of the next launches: set_schedule(), else SIMT_SCHEDULE, else forward.
Schedule schedule();
/// Sets the schedule for the next launches of the whole process.
void set_schedule(Schedule schedule);

/// Sets a schedule for the lifetime of this object and restores the previous one afterwards.
class ScopedSchedule {
 public:
  /// Switches to @p schedule.
  explicit ScopedSchedule(Schedule schedule) : previous_(simt::schedule()) { set_schedule(schedule); }
  /// Restores the previous schedule.
  ~ScopedSchedule() { set_schedule(previous_); }
  ScopedSchedule(const ScopedSchedule&) = delete;             ///< not copyable
  ScopedSchedule& operator=(const ScopedSchedule&) = delete;  ///< not copyable

 private:
  Schedule previous_;
};

/// The emulator's compute-sanitizer: the checks it runs on every launch (all of them unless
/// set_checks() or SIMT_CHECK say otherwise). A check that fires stops the faulty thread before
/// its access, and its report (kernel, block, thread, source line) becomes the launch's sticky
/// error. See docs/pages/sanitizer.md.
struct Checks {
  bool memcheck = true;   ///< out-of-bounds, misaligned, null and freed accesses; host code touching device memory
  bool racecheck = true;  ///< shared-memory hazards: two threads, one writing, no barrier between them
  bool initcheck = true;  ///< reads of shared memory the block never wrote, of device memory never written

  /// Parses "all", "none" or a comma-separated list of memcheck, racecheck, initcheck; throws
  /// std::invalid_argument otherwise.
  static Checks parse(std::string_view text);
  /// "all", "none" or the list of the enabled checks (parse() reads it back).
  std::string to_string() const;
  /// Whether any check is on.
  bool any() const { return memcheck || racecheck || initcheck; }
  /// Two settings are equal when every check is.
  bool operator==(const Checks&) const = default;
};

/// Whether the kernels of this build carry the checks' instrumentation (false under the asan and
/// tsan presets, where AddressSanitizer / ThreadSanitizer check instead).
bool checks_compiled();
/// The checks of the next launches: set_checks(), else SIMT_CHECK, else all.
Checks checks();
/// Sets the checks for the next launches of the whole process.
void set_checks(Checks checks);

/// Sets the checks for the lifetime of this object and restores the previous ones afterwards.
class ScopedChecks {
 public:
  /// Switches to @p checks.
  explicit ScopedChecks(Checks checks) : previous_(simt::checks()) { set_checks(checks); }
  /// Restores the previous checks.
  ~ScopedChecks() { set_checks(previous_); }
  ScopedChecks(const ScopedChecks&) = delete;             ///< not copyable
  ScopedChecks& operator=(const ScopedChecks&) = delete;  ///< not copyable

 private:
  Checks previous_;
};

/// Loads the program's line tables and symbols now, so that later reports can name source lines
/// even where files can no longer be opened (a test's sandbox calls it before it closes the door).
void prepare_reports();

/// OS threads that run blocks: set_workers(), else SIMT_WORKERS, else the number of cores.
int workers();
/// Sets the number of worker threads for the next launches (≥ 1).
void set_workers(int count);

/// The full message of the most recent error (kernel, block, threads, source lines), or "" when
/// there was none since the last cudaDeviceReset().
std::string last_error_message();

/// Bytes copied by cudaMemcpy (and cudaMemcpyAsync) since the program started, by direction:
/// what a program moves between host and device memory, counted by the emulator itself — so a
/// test can check that a resident model runner's step moves only its plan up and its logits
/// down (the transfers a PCIe or NVLink-C2C link would carry on a GPU). Thread-safe.
struct TransferCounts {
  uint64_t host_to_device = 0;    ///< uploads
  uint64_t device_to_host = 0;    ///< downloads
  uint64_t device_to_device = 0;  ///< copies within device memory
};
/// The counts so far.
TransferCounts transfer_counts();

/// Whether device memory is closed to host code: outside launches and the runtime's calls
/// (cudaMemcpy, cudaMemset, cuBLAS) a host dereference of a device pointer faults, as on a GPU,
/// and the emulator reports the host line and where the memory was allocated, then aborts. On
/// unless SIMT_HOST_ACCESS=allow (see docs/pages/sanitizer.md).
bool host_access_checked();

/// Bytes of device memory (cudaMalloc) currently allocated by this process.
size_t device_bytes_in_use();
/// The most device memory allocated at once since the last reset_device_bytes_peak() (or the
/// start): a test reads it after a call to bound the call's scratch memory.
size_t device_bytes_peak();
/// Starts a new peak measurement: the peak becomes the bytes allocated now.
void reset_device_bytes_peak();

/// What the emulator knows about the most recent launch (for test reports).
struct LaunchRecord {
  std::string kernel;       ///< the kernel's name (demangled symbol, or the launch site)
  std::string launched_at;  ///< "file:line" of the simt::launch call
  uint3 grid{};             ///< grid dimensions
  uint3 block{};            ///< block dimensions
  size_t shared_bytes = 0;  ///< dynamic shared memory per block
};
/// The most recent launch of this process (empty before the first).
LaunchRecord last_launch();
/// Kernel launches this process has made (every simt::launch call that reached the emulator,
/// whether or not it ran): a graded test reads it before and after a call to tell a kernel that
/// ran on the device from host code that computed the answer itself.
uint64_t launch_count();

/// One thread's write to a watched byte range (see watch_writes()).
struct WatchedWrite {
  std::string kernel;  ///< the kernel that ran
  uint3 block{};       ///< blockIdx of the writer
  uint3 thread{};      ///< threadIdx of the writer
  std::string from;    ///< where that thread resumed ("kernel start" or a barrier's file:line)
  std::string to;      ///< where it stopped next ("exit" or a barrier's file:line)
};
/// While watching, after every stretch that a thread runs between two synchronisation points
/// the emulator compares @p bytes bytes at @p address with their previous value and records the
/// thread if they changed — so a test can name who last wrote a differing output. Slow; meant
/// for a rerun after a failure. Pass nullptr to stop watching.
void watch_writes(const void* address, size_t bytes);
/// The writes recorded since watch_writes() started, oldest first.
std::vector<WatchedWrite> watched_writes();

/// @cond SIMT_DETAIL
namespace detail {

/// A non-owning reference to a callable `void()`.
class BlockBody {
 public:
  template <class F>
  explicit BlockBody(F& body) : object_(&body), call_([](void* o) { (*static_cast<F*>(o))(); }) {}
  void operator()() const { call_(object_); }

 private:
  void* object_;
  void (*call_)(void*);
};

/// A pointer argument of a launch: reports name the argument whose allocation a fault touched.
struct PointerArgument {
  const void* value;
  const char* type;  // mangled (typeid().name())
  unsigned index;    // 0-based position in the kernel's parameter list
};

struct LaunchRequest {
  const void* kernel;
  uint3 grid;
  uint3 block;
  size_t shared_bytes;
  std::source_location site;
  BlockBody body;
  const PointerArgument* pointers = nullptr;
  unsigned pointer_count = 0;
  // The launching frame's copy of the arguments (and the call that hands them to each thread):
  // the only host memory that every thread reads.
  uintptr_t frame_low = 0, frame_high = 0;
};

template <class... Objects>
void frame_span(uintptr_t& low, uintptr_t& high, const Objects&... objects) {
  low = ~uintptr_t{0};
  high = 0;
  ((low = std::min(low, reinterpret_cast<uintptr_t>(&objects)),
    high = std::max(high, reinterpret_cast<uintptr_t>(&objects) + sizeof(Objects))),
   ...);
}

template <class Tuple, size_t... I>
unsigned collect_pointers(const Tuple& parameters, PointerArgument* out, std::index_sequence<I...>) {
  unsigned count = 0;
  (
      [&] {
        using T = std::tuple_element_t<I, Tuple>;
        if constexpr (std::is_pointer_v<T>)
          out[count++] = PointerArgument{static_cast<const void*>(std::get<I>(parameters)), typeid(T).name(),
                                         static_cast<unsigned>(I)};
      }(),
      ...);
  return count;
}

cudaError_t run_launch(const LaunchRequest& request);

}  // namespace detail

inline namespace sim_abi {

/// The grid argument of launch(): a dim3 or a count, remembering the call site for messages.
struct GridArg {
  GridArg(dim3 dims, std::source_location site = std::source_location::current())
      : dims{dims.x, dims.y, dims.z}, site(site) {}
  GridArg(unsigned count, std::source_location site = std::source_location::current())
      : dims{count, 1, 1}, site(site) {}
  uint3 dims;
  std::source_location site;
};

/// @endcond

/// Runs @p kernel over @p grid blocks of @p block threads with @p shared_bytes of dynamic shared
/// memory, as `kernel<<<grid, block, shared_bytes, stream>>>(args...)` would on a GPU.
///
/// The arguments are converted to the kernel's parameter types once; every thread gets its own
/// copy. The launch is synchronous (@p stream orders nothing). Returns cudaSuccess,
/// cudaErrorInvalidConfiguration / cudaErrorInvalidValue for a launch a GPU would refuse
/// (> 1024 threads, too much shared memory), or the sticky cudaErrorLaunchFailure when a check
/// fails (barrier divergence, deadlock, a shuffle naming exited threads, an exception) — see
/// last_error_message().
template <class... Params, class... Args>
cudaError_t launch(void (*kernel)(Params...), GridArg grid, dim3 block, size_t shared_bytes,
                   [[maybe_unused]] cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "simt::launch: wrong number of kernel arguments");
  using Parameters = std::tuple<std::decay_t<Params>...>;
  Parameters parameters(std::forward<Args>(args)...);
  auto body = [&]() { std::apply(kernel, parameters); };
  detail::PointerArgument pointers[sizeof...(Params) + 1];
  const unsigned pointer_count =
      detail::collect_pointers(parameters, pointers, std::make_index_sequence<sizeof...(Params)>{});
  detail::LaunchRequest request{reinterpret_cast<const void*>(kernel), grid.dims, uint3{block.x, block.y, block.z},
                                shared_bytes, grid.site, detail::BlockBody(body), pointers, pointer_count};
  detail::frame_span(request.frame_low, request.frame_high, parameters, body, kernel, request);
  return detail::run_launch(request);
}

}  // namespace sim_abi
}  // namespace simt
