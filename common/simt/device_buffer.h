#pragma once
/// @file device_buffer.h
/// The host side of a kernel launcher, for both compilers: an owning device buffer
/// (DeviceBuffer), an error check that throws (check_cuda) and the grid size (blocks_for).
///
/// Like simt/simt.h, which it includes, this header compiles under g++ (the SIMT emulator,
/// namespace `inferlab::sim`) and under nvcc (the real CUDA runtime, namespace `inferlab::cuda`):
/// everything lives in `inferlab::INFERLAB_BACKEND_NS`, so the reference kernels
/// (`inferlab::sim`), the exercises and solutions (`inferlab::sim::student`) and the emulator's
/// tests all find it without a `using`. A typical launcher:
///
/// @code
/// #include "simt/device_buffer.h"
/// namespace inferlab::INFERLAB_BACKEND_NS {
/// void scale(const Tensor<float>& in, Tensor<float>& out) {
///   const DeviceBuffer<float> d_in(in);                        // allocated and uploaded
///   auto d_out = DeviceBuffer<float>::poisoned(out.size());    // every byte 0xFF (NaN)
///   check_cuda(simt::launch(scale_kernel, blocks_for(in.size(), 128), 128, 0, nullptr, d_in.data(),
///                           d_out.data(), int(in.size())),
///              "scale_kernel");
///   check_cuda(cudaDeviceSynchronize(), "scale_kernel");
///   d_out.download(out);                                        // sizes must match
/// }
/// }  // namespace inferlab::INFERLAB_BACKEND_NS
/// @endcode
///
/// The host side of a transfer is a pointer (the buffer's size() elements are copied) or any
/// contiguous host array with `data()` and `size()` of the same element type — `std::vector<T>`,
/// `inferlab::Tensor<T>`, `std::span<T>` —, whose size must equal the buffer's.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "simt/simt.h"

namespace inferlab::INFERLAB_BACKEND_NS {

/// Throws std::runtime_error("<what>: <CUDA error>") unless @p status is cudaSuccess. On the sim
/// backend the emulator's full report of the most recent error (kernel, block, threads, source
/// lines; simt::last_error_message()) is appended on the next lines.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::string message = std::string(what) + ": " + cudaGetErrorString(status);
#if INFERLAB_BACKEND_IS_SIM
  if (const std::string details = simt::last_error_message(); !details.empty()) message += "\n" + details;
#endif
  throw std::runtime_error(message);
}

/// ⌈@p count / @p per_block⌉: how many blocks of @p per_block threads cover @p count threads.
inline int blocks_for(int64_t count, int per_block) {
  return static_cast<int>((count + per_block - 1) / per_block);
}

template <class T>
class DeviceBuffer;

/// @cond INTERNAL
namespace detail {
template <class A>
inline constexpr bool is_device_buffer = false;
template <class T>
inline constexpr bool is_device_buffer<DeviceBuffer<T>> = true;
}  // namespace detail
/// @endcond

/// A contiguous host array of T that a DeviceBuffer<T> can be filled from: `data()` (convertible
/// to `const T*`) and `size()` — std::vector<T>, inferlab::Tensor<T>, std::span<const T> …
template <class A, class T>
concept HostArrayOf = !detail::is_device_buffer<std::remove_cvref_t<A>> && requires(const A& array) {
  { array.data() } -> std::convertible_to<const T*>;
  { array.size() } -> std::convertible_to<size_t>;
};

/// A contiguous host array of T that a DeviceBuffer<T> can be copied into: `data()` (convertible
/// to `T*`) and `size()`.
template <class A, class T>
concept WritableHostArrayOf = !detail::is_device_buffer<std::remove_cvref_t<A>> && requires(A& array) {
  { array.data() } -> std::convertible_to<T*>;
  { array.size() } -> std::convertible_to<size_t>;
};

/// A device allocation of size() elements of T (cudaMalloc), freed on destruction (cudaFree).
/// Move-only. Every failing CUDA call throws std::runtime_error (check_cuda); a host array of the
/// wrong size throws std::invalid_argument.
///
/// A new buffer's contents are undefined on a GPU (the emulator fills every allocation with
/// 0xFF); poisoned() and poison() set every byte to 0xFF — NaN for float, -1 for integers — so
/// that an element a kernel forgets to write shows up in the result.
template <class T>
class DeviceBuffer {
 public:
  /// No allocation: size() == 0, data() == nullptr.
  DeviceBuffer() = default;

  /// Room for @p count elements, contents undefined (0xFF bytes in the emulator).
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count_ > 0) check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()), "cudaMalloc");
  }

  /// A device copy of @p host (as many elements).
  template <class A>
    requires HostArrayOf<A, T>
  explicit DeviceBuffer(const A& host) : DeviceBuffer(static_cast<size_t>(host.size())) {
    upload(static_cast<const T*>(host.data()));
  }

  /// Room for @p count elements, every byte 0xFF (NaN for float), on both backends: an output
  /// buffer whose unwritten elements must show up.
  static DeviceBuffer poisoned(size_t count) {
    DeviceBuffer buffer(count);
    buffer.poison();
    return buffer;
  }

  DeviceBuffer(const DeviceBuffer&) = delete;             ///< not copyable (one owner per allocation)
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;  ///< not copyable (one owner per allocation)
  /// Takes @p other's allocation; @p other is left empty.
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  /// Swaps allocations with @p other (which frees this one's on destruction).
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  /// Frees the allocation (errors are ignored: a destructor must not throw).
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }

  /// The device pointer, to pass to a kernel (nullptr when empty). Like a pointer, a const
  /// buffer still hands out a writable pointer: constness does not reach the device memory.
  T* data() const { return data_; }
  /// The number of elements.
  size_t size() const { return count_; }
  /// The number of bytes: size() · sizeof(T).
  size_t bytes() const { return count_ * sizeof(T); }

  /// Copies size() elements from @p host into the buffer.
  void upload(const T* host) {
    if (count_ > 0) check_cuda(cudaMemcpy(data_, host, bytes(), cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
  }
  /// Copies @p host, which must have size() elements, into the buffer.
  template <class A>
    requires HostArrayOf<A, T>
  void upload(const A& host) {
    check_host_size(static_cast<size_t>(host.size()), "upload");
    upload(static_cast<const T*>(host.data()));
  }

  /// Copies the buffer's size() elements to @p host.
  void download(T* host) const {
    if (count_ > 0) check_cuda(cudaMemcpy(host, data_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
  }
  /// Copies the buffer into @p host, which must have size() elements.
  template <class A>
    requires WritableHostArrayOf<A, T>
  void download(A& host) const {
    check_host_size(static_cast<size_t>(host.size()), "download");
    download(static_cast<T*>(host.data()));
  }
  /// The buffer's elements, copied into a new vector.
  std::vector<T> download() const {
    std::vector<T> host(count_);
    download(host.data());
    return host;
  }

  /// Sets every byte to 0xFF (NaN for float): an element that a kernel forgets to write fails.
  void poison() {
    if (count_ > 0) check_cuda(cudaMemset(data_, 0xFF, bytes()), "cudaMemset (poison)");
  }

 private:
  void check_host_size(size_t host_size, const char* what) const {
    if (host_size != count_)
      throw std::invalid_argument("DeviceBuffer::" + std::string(what) + ": the host array has " +
                                  std::to_string(host_size) + " elements, the device buffer " +
                                  std::to_string(count_));
  }

  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace inferlab::INFERLAB_BACKEND_NS
