// The CUDA runtime as the emulator provides it: device memory is host memory, launches and copies
// are synchronous, and errors follow CUDA's rules (kernel faults are sticky).

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "simt/detail/device_memory.h"
#include "simt/internal.h"

namespace simt::detail {
namespace {

std::mutex error_mutex;
cudaError_t last_error = cudaSuccess;
cudaError_t sticky = cudaSuccess;
std::string error_text;

std::mutex memory_mutex;
std::map<uintptr_t, size_t> host_allocations;  // cudaMallocHost: base -> bytes

std::mutex attribute_mutex;
std::unordered_map<const void*, int> dynamic_shared_limits;

struct Stream {};  // streams order nothing: launches and copies are synchronous
struct Event {
  std::chrono::steady_clock::time_point time;
  bool recorded = false;
};

bool quiet() {
  static const bool value = [] {
    const char* text = std::getenv("SIMT_QUIET");
    return text != nullptr && *text != '\0' && *text != '0';
  }();
  return value;
}

cudaError_t fail(cudaError_t error, const std::string& what) {
  return set_error(error, "simt: " + what, false);
}

bool is_device(const void* pointer) {
  return in_device_heap(reinterpret_cast<uintptr_t>(pointer));
}

size_t physical_memory() {
  return static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

bool in_pinned_host_memory(uintptr_t address, size_t bytes) {
  std::lock_guard lock(memory_mutex);
  auto it = host_allocations.upper_bound(address);
  if (it == host_allocations.begin()) return false;
  --it;
  return address - it->first + bytes <= it->second;
}

cudaError_t sticky_error() {
  std::lock_guard lock(error_mutex);
  return sticky;
}

cudaError_t set_error(cudaError_t error, const std::string& message, bool is_sticky) {
  {
    std::lock_guard lock(error_mutex);
    if (sticky != cudaSuccess) return sticky;  // the first fault wins, as on a GPU
    last_error = error;
    if (is_sticky) sticky = error;
    error_text = message;
  }
  if (!quiet()) std::fprintf(stderr, "%s\n", message.c_str());
  return error;
}

void reset_errors() {
  std::lock_guard lock(error_mutex);
  last_error = cudaSuccess;
  sticky = cudaSuccess;
  error_text.clear();
}

int max_dynamic_shared_bytes(const void* kernel) {
  std::lock_guard lock(attribute_mutex);
  const auto it = dynamic_shared_limits.find(kernel);
  return it == dynamic_shared_limits.end() ? kDefaultSharedBytes : it->second;
}

void set_max_dynamic_shared_bytes(const void* kernel, int bytes) {
  std::lock_guard lock(attribute_mutex);
  dynamic_shared_limits[kernel] = bytes;
}

}  // namespace simt::detail

namespace simt {
size_t device_bytes_in_use() {
  return detail::device_bytes_now();
}
size_t device_bytes_peak() {
  return detail::device_bytes_high_water();
}
void reset_device_bytes_peak() {
  detail::reset_device_high_water();
}
std::string last_error_message() {
  std::lock_guard lock(detail::error_mutex);
  return detail::error_text;
}
}  // namespace simt

using simt::detail::fail;
using simt::detail::sticky_error;

// ---- memory -----------------------------------------------------------------------------------

cudaError_t simt_cudaMalloc(void** pointer, size_t bytes) {
  if (pointer == nullptr) return fail(cudaErrorInvalidValue, "cudaMalloc: the result pointer is null");
  if (const cudaError_t e = sticky_error(); e != cudaSuccess) return e;
  // Page-aligned (cudaMalloc promises 256 bytes) and followed by a guard page: see device_memory.h.
  // Poisoned (every byte 0xFF: reading an element nobody wrote shows up as NaN or -1).
  void* memory = simt::detail::device_allocate(bytes, simt::detail::capture_call_site());
  if (memory == nullptr) {
    *pointer = nullptr;
    return fail(cudaErrorMemoryAllocation, "cudaMalloc: out of memory for " + std::to_string(bytes) + " bytes");
  }
  *pointer = memory;
  return cudaSuccess;
}

cudaError_t simt_cudaFree(void* pointer) {
  if (pointer == nullptr) return sticky_error();
  if (!simt::detail::device_release(pointer))
    return fail(cudaErrorInvalidValue, "cudaFree: the pointer was not returned by cudaMalloc (or was freed already)");
  return sticky_error();
}

cudaError_t simt_cudaMallocHost(void** pointer, size_t bytes) {
  if (pointer == nullptr) return fail(cudaErrorInvalidValue, "cudaMallocHost: the result pointer is null");
  void* memory = nullptr;
  if (posix_memalign(&memory, 256, bytes == 0 ? 1 : bytes) != 0)
    return fail(cudaErrorMemoryAllocation, "cudaMallocHost: out of memory");
  std::lock_guard lock(simt::detail::memory_mutex);
  simt::detail::host_allocations[reinterpret_cast<uintptr_t>(memory)] = bytes;
  *pointer = memory;
  return cudaSuccess;
}

cudaError_t simt_cudaFreeHost(void* pointer) {
  if (pointer == nullptr) return cudaSuccess;
  {
    std::lock_guard lock(simt::detail::memory_mutex);
    if (simt::detail::host_allocations.erase(reinterpret_cast<uintptr_t>(pointer)) == 0) pointer = nullptr;
  }
  if (pointer == nullptr)
    return fail(cudaErrorInvalidValue, "cudaFreeHost: the pointer was not returned by cudaMallocHost");
  std::free(pointer);
  return cudaSuccess;
}

namespace {
// Bytes by direction (simt::transfer_counts()); host to host copies are counted and not reported.
std::atomic<uint64_t> copied_host_to_device{0}, copied_device_to_host{0}, copied_device_to_device{0},
    copied_host_to_host{0};
}  // namespace

simt::TransferCounts simt::transfer_counts() {
  return {copied_host_to_device.load(), copied_device_to_host.load(), copied_device_to_device.load()};
}

cudaError_t simt_cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (const cudaError_t e = sticky_error(); e != cudaSuccess) return e;
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue, "cudaMemcpy: a null pointer");
  std::string problem;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice ||
                          (kind == cudaMemcpyDefault && simt::detail::is_device(dst));
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice ||
                          (kind == cudaMemcpyDefault && simt::detail::is_device(src));
  if (dst_device) problem = simt::detail::device_range_problem(dst, bytes, "the destination");
  if (problem.empty() && src_device) problem = simt::detail::device_range_problem(src, bytes, "the source");
  if (!problem.empty())
    return fail(cudaErrorInvalidValue, "cudaMemcpy of " + std::to_string(bytes) + " bytes: " + problem);
  const simt::detail::DeviceAccess access;  // the copy engine may touch device memory
  std::memmove(dst, src, bytes);
  if (dst_device) simt::detail::mark_device_written(dst, bytes);
  (dst_device ? (src_device ? copied_device_to_device : copied_host_to_device)
              : (src_device ? copied_device_to_host : copied_host_to_host))
      .fetch_add(bytes, std::memory_order_relaxed);
  return cudaSuccess;
}

cudaError_t simt_cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  return simt_cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t simt_cudaMemset(void* pointer, int value, size_t bytes) {
  if (const cudaError_t e = sticky_error(); e != cudaSuccess) return e;
  if (bytes == 0) return cudaSuccess;
  if (const std::string problem = simt::detail::device_range_problem(pointer, bytes, "the pointer"); !problem.empty())
    return fail(cudaErrorInvalidValue, "cudaMemset of " + std::to_string(bytes) + " bytes: " + problem);
  const simt::detail::DeviceAccess access;
  std::memset(pointer, value, bytes);
  simt::detail::mark_device_written(pointer, bytes);
  return cudaSuccess;
}

cudaError_t simt_cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t) {
  return simt_cudaMemset(pointer, value, bytes);
}

cudaError_t simt_cudaMemcpyToSymbolAddress(void* symbol, const void* src, size_t bytes, size_t offset) {
  if (const cudaError_t e = sticky_error(); e != cudaSuccess) return e;
  const simt::detail::DeviceAccess access;  // the source may be device memory
  std::memcpy(static_cast<char*>(symbol) + offset, src, bytes);
  return cudaSuccess;
}

cudaError_t simt_cudaMemcpyFromSymbolAddress(void* dst, const void* symbol, size_t bytes, size_t offset) {
  if (const cudaError_t e = sticky_error(); e != cudaSuccess) return e;
  const simt::detail::DeviceAccess access;  // the destination may be device memory
  std::memcpy(dst, static_cast<const char*>(symbol) + offset, bytes);
  return cudaSuccess;
}

cudaError_t simt_cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  const size_t total = simt::detail::physical_memory();
  if (total_bytes != nullptr) *total_bytes = total;
  const size_t used = simt::detail::device_bytes_now();
  if (free_bytes != nullptr) *free_bytes = total > used ? total - used : 0;
  return cudaSuccess;
}

// ---- device and errors ------------------------------------------------------------------------

cudaError_t simt_cudaDeviceSynchronize() {
  return sticky_error();
}

cudaError_t simt_cudaDeviceReset() {
  simt::detail::reset_errors();
  return cudaSuccess;
}

cudaError_t simt_cudaGetLastError() {
  std::lock_guard lock(simt::detail::error_mutex);
  const cudaError_t error = simt::detail::last_error;
  if (simt::detail::sticky == cudaSuccess) simt::detail::last_error = cudaSuccess;
  return error;
}

cudaError_t simt_cudaPeekAtLastError() {
  std::lock_guard lock(simt::detail::error_mutex);
  return simt::detail::last_error;
}

const char* simt_cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorInvalidDeviceFunction:
      return "cudaErrorInvalidDeviceFunction";
    default:
      return "cudaErrorUnknown";
  }
}

const char* simt_cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorInvalidDeviceFunction:
      return "invalid device function";
    default:
      return "unknown error";
  }
}

cudaError_t simt_cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue, "cudaGetDeviceCount: null pointer");
  *count = 1;
  return cudaSuccess;
}

cudaError_t simt_cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue, "cudaGetDevice: null pointer");
  *device = 0;
  return cudaSuccess;
}

cudaError_t simt_cudaSetDevice(int device) {
  if (device != 0)
    return fail(cudaErrorInvalidDevice,
                "cudaSetDevice(" + std::to_string(device) + "): the emulator has one device, 0");
  return cudaSuccess;
}

// The fake device: an sm_80-like GPU whose "multiprocessors" are the emulator's workers.
cudaError_t simt_cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (p == nullptr) return fail(cudaErrorInvalidValue, "cudaGetDeviceProperties: null pointer");
  if (device != 0) return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties: the emulator has one device, 0");
  std::memset(static_cast<void*>(p), 0, sizeof(*p));
  std::snprintf(p->name, sizeof(p->name), "SIMT emulator (sm_80-like, %d CPU workers)", simt::workers());
  p->totalGlobalMem = simt::detail::physical_memory();
  p->sharedMemPerBlock = simt::detail::kDefaultSharedBytes;
  p->sharedMemPerBlockOptin = simt::detail::kMaxSharedBytesOptin;
  p->sharedMemPerMultiprocessor = 228 * 1024;
  p->regsPerBlock = 65536;
  p->regsPerMultiprocessor = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = simt::detail::kMaxThreadsPerBlock;
  p->maxThreadsDim[0] = 1024;
  p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647;
  p->maxGridSize[1] = 65535;
  p->maxGridSize[2] = 65535;
  p->maxThreadsPerMultiProcessor = 2048;
  p->totalConstMem = 65536;
  p->major = 8;
  p->minor = 0;
  p->multiProcessorCount = simt::workers();
  p->l2CacheSize = 40 * 1024 * 1024;
  p->memoryBusWidth = 5120;
  return cudaSuccess;
}

cudaError_t simt_cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (value == nullptr || device != 0)
    return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: null pointer or device != 0");
  cudaDeviceProp p;
  simt_cudaGetDeviceProperties(&p, 0);
  switch (attribute) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = p.maxThreadsPerBlock;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(p.sharedMemPerBlock);
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.sharedMemPerBlockOptin);
      break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = static_cast<int>(p.sharedMemPerMultiprocessor);
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = p.multiProcessorCount;
      break;
    case cudaDevAttrWarpSize:
      *value = p.warpSize;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = p.major;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = p.minor;
      break;
    case cudaDevAttrL2CacheSize:
      *value = p.l2CacheSize;
      break;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
      *value = p.maxThreadsPerMultiProcessor;
      break;
    default:
      return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute " +
                                             std::to_string(static_cast<int>(attribute)) + " is not emulated");
  }
  return cudaSuccess;
}

cudaError_t simt_cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attribute, int value) {
  if (kernel == nullptr) return fail(cudaErrorInvalidDeviceFunction, "cudaFuncSetAttribute: null kernel");
  if (attribute == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > simt::detail::kMaxSharedBytesOptin)
      return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, " + std::to_string(value) +
                                             "): must be between 0 and 232448 (227 KiB)");
    simt::detail::set_max_dynamic_shared_bytes(kernel, std::max(value, simt::detail::kDefaultSharedBytes));
  }
  return cudaSuccess;  // other attributes (carveout, …) change nothing in the emulator
}

// ---- streams and events -----------------------------------------------------------------------

cudaError_t simt_cudaStreamCreate(cudaStream_t* stream) {
  return simt_cudaStreamCreateWithFlags(stream, 0);
}

cudaError_t simt_cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  if (stream == nullptr) return fail(cudaErrorInvalidValue, "cudaStreamCreate: null pointer");
  *stream = reinterpret_cast<cudaStream_t>(new simt::detail::Stream{});
  return cudaSuccess;
}

cudaError_t simt_cudaStreamDestroy(cudaStream_t stream) {
  delete reinterpret_cast<simt::detail::Stream*>(stream);
  return cudaSuccess;
}

cudaError_t simt_cudaStreamSynchronize(cudaStream_t) {
  return sticky_error();
}
cudaError_t simt_cudaStreamQuery(cudaStream_t) {
  return sticky_error();
}
cudaError_t simt_cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) {
  return sticky_error();
}

cudaError_t simt_cudaEventCreate(cudaEvent_t* event) {
  return simt_cudaEventCreateWithFlags(event, 0);
}

cudaError_t simt_cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  if (event == nullptr) return fail(cudaErrorInvalidValue, "cudaEventCreate: null pointer");
  *event = reinterpret_cast<cudaEvent_t>(new simt::detail::Event{});
  return cudaSuccess;
}

cudaError_t simt_cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<simt::detail::Event*>(event);
  return cudaSuccess;
}

cudaError_t simt_cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: null event");
  auto* e = reinterpret_cast<simt::detail::Event*>(event);
  e->time = std::chrono::steady_clock::now();
  e->recorded = true;
  return sticky_error();
}

cudaError_t simt_cudaEventSynchronize(cudaEvent_t) {
  return sticky_error();
}
cudaError_t simt_cudaEventQuery(cudaEvent_t) {
  return sticky_error();
}

cudaError_t simt_cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end) {
  if (milliseconds == nullptr || start == nullptr || end == nullptr)
    return fail(cudaErrorInvalidValue, "cudaEventElapsedTime: null argument");
  const auto* a = reinterpret_cast<simt::detail::Event*>(start);
  const auto* b = reinterpret_cast<simt::detail::Event*>(end);
  if (!a->recorded || !b->recorded)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was never recorded");
  *milliseconds = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return cudaSuccess;
}
