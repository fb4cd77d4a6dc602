#pragma once
// Given host plumbing of the chapter-04 exercises (nothing to write here): a device copy of an
// int8 tensor. The float buffers (DeviceTensor) and check_cuda are chapter 02's
// (02-gpu-prefill/device_tensor.cuh), the lengths chapter 03's (03-kv-cache-decode/
// device_lengths.cuh). Compiled for sim and cuda like the .cu files that include it.
#include <cstdint>

#include "02-gpu-prefill/device_tensor.cuh"
#include "03-kv-cache-decode/device_lengths.cuh"

namespace inferlab::INFERLAB_BACKEND_NS::student {

// A device copy of a host int8 tensor, freed on destruction.
class DeviceInt8Tensor {
 public:
  explicit DeviceInt8Tensor(const Tensor<int8_t>& host) : bytes_(size_t(host.size())) {
    if (bytes_ == 0) return;
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), bytes_), "cudaMalloc");
    check_cuda(cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice), "cudaMemcpy (int8 upload)");
  }
  DeviceInt8Tensor(const DeviceInt8Tensor&) = delete;
  DeviceInt8Tensor& operator=(const DeviceInt8Tensor&) = delete;
  ~DeviceInt8Tensor() {
    if (data_ != nullptr) cudaFree(data_);
  }

  // The device pointer, to pass to a kernel.
  const int8_t* data() const { return data_; }

 private:
  int8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
