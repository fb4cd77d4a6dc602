#pragma once
// Given host plumbing of the chapter-03 exercises (nothing to write here): the per-sequence
// lengths on the device. The float buffers (DeviceTensor), check_cuda and blocks_for are
// chapter 02's, from 02-gpu-prefill/device_tensor.cuh. Compiled for sim and cuda like the .cu
// files that include it, so everything lives in namespace inferlab::INFERLAB_BACKEND_NS::student.
#include <cstdint>
#include <vector>

#include "02-gpu-prefill/device_tensor.cuh"

namespace inferlab::INFERLAB_BACKEND_NS::student {

// A device copy of the lengths (one int per sequence, as the kernels read them), freed on
// destruction.
class DeviceLengths {
  static_assert(sizeof(int) == sizeof(int32_t), "the kernels read the lengths as int");

 public:
  explicit DeviceLengths(const std::vector<int32_t>& lengths) : count_(lengths.size()) {
    if (count_ == 0) return;
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()), "cudaMalloc");
    check_cuda(cudaMemcpy(data_, lengths.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy (lengths)");
  }
  DeviceLengths(const DeviceLengths&) = delete;
  DeviceLengths& operator=(const DeviceLengths&) = delete;
  ~DeviceLengths() {
    if (data_ != nullptr) cudaFree(data_);
  }

  // The device pointer, to pass to a kernel.
  const int* data() const { return data_; }

 private:
  size_t bytes() const { return count_ * sizeof(int); }
  int* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
