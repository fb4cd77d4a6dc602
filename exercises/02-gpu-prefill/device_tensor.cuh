#pragma once
// Given host plumbing of the chapter-02 exercises (nothing to write here): a device copy of a
// host tensor, and an error check. Compiled for sim and cuda like the .cu files that include it,
// so everything lives in namespace inferlab::INFERLAB_BACKEND_NS::student.
#include <stdexcept>
#include <string>

#include "common/tensor.h"
#include "simt/simt.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

// Throws std::runtime_error("<what>: <CUDA error>") unless @p status is cudaSuccess. On the sim
// backend the emulator's full report (kernel, block, threads, source lines) is appended.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::string message = std::string(what) + ": " + cudaGetErrorString(status);
#if INFERLAB_BACKEND_IS_SIM
  if (const std::string details = simt::last_error_message(); !details.empty()) message += "\n" + details;
#endif
  throw std::runtime_error(message);
}

// A float buffer in device memory holding as many elements as a host tensor, freed on
// destruction.
class DeviceTensor {
 public:
  // Room for @p count floats, every byte 0xFF (NaN): an element no thread writes stays NaN.
  explicit DeviceTensor(int64_t count) : count_(size_t(count)) {
    if (count_ == 0) return;
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()), "cudaMalloc");
    check_cuda(cudaMemset(data_, 0xFF, bytes()), "cudaMemset");
  }
  // A copy of @p host.
  explicit DeviceTensor(const Tensor<float>& host) : DeviceTensor(host.size()) {
    if (count_ > 0) check_cuda(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  ~DeviceTensor() {
    if (data_ != nullptr) cudaFree(data_);
  }

  // The device pointer, to pass to a kernel.
  float* data() const { return data_; }

  // Copies the buffer into @p host, which must have as many elements.
  void download(Tensor<float>& host) const {
    if (size_t(host.size()) != count_) throw std::invalid_argument("DeviceTensor::download: wrong element count");
    if (count_ > 0)
      check_cuda(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
  }

 private:
  size_t bytes() const { return count_ * sizeof(float); }
  float* data_ = nullptr;
  size_t count_ = 0;
};

// ⌈count / per_block⌉: how many blocks cover @p count threads.
inline int blocks_for(int64_t count, int per_block) {
  return static_cast<int>((count + per_block - 1) / per_block);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
