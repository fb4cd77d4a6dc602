#pragma once
// Device-side helpers shared by the CUDA versions (compiled for both sim and cuda; see
// simt/simt.h): an error check that throws, and an owning device buffer.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "simt/simt.h"

namespace inferlab::INFERLAB_BACKEND_NS {

// Throws std::runtime_error("<what>: <CUDA error>") unless @p status is cudaSuccess.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// A device allocation of @p count elements of T, freed on destruction.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count_ > 0) check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(T)), "cudaMalloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), count_(other.count_) {
    other.data_ = nullptr;
    other.count_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }

  T* data() const { return data_; }
  size_t size() const { return count_; }

  // Copies @p host (count elements) in.
  void upload(const T* host) {
    check_cuda(cudaMemcpy(data_, host, count_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
  }
  // Copies the buffer out to @p host (count elements).
  void download(T* host) const {
    check_cuda(cudaMemcpy(host, data_, count_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
  }
  // Fills every byte with 0xFF (NaN for floats): a kernel that forgets an element is caught.
  void poison() { check_cuda(cudaMemset(data_, 0xFF, count_ * sizeof(T)), "cudaMemset (poison)"); }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace inferlab::INFERLAB_BACKEND_NS
