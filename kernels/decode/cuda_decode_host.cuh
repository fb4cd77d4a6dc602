#pragma once
// The host-tensor side of the CUDA decode versions (compiled for sim and cuda): what every
// DecodeFn wrapper does around its device-level call. The kernels and their launch are in
// cuda_decode.cuh.
#include "kernels/decode/decode.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS {

// What every host-tensor decode wrapper does around its device-level call: uploads @p q,
// poisons the device output (an element the kernel forgets stays NaN), calls
// @p queue(q_device, out_device) — which queues the work on the default stream — then checks
// the launch, waits (errors name @p name) and downloads @p out. Checking shapes and uploading
// the cache are the caller's.
template <class Queue>
void decode_on_host_tensors(const Tensor<float>& q, Tensor<float>& out, const char* name, const Queue& queue) {
  DeviceBuffer<float> q_device(size_t(q.size()));
  q_device.upload(q.data());
  DeviceBuffer<float> out_device(size_t(out.size()));
  out_device.poison();
  queue(static_cast<const float*>(q_device.data()), out_device.data());
  check_cuda(cudaGetLastError(), name);
  check_cuda(cudaDeviceSynchronize(), name);
  out_device.download(out.data());
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
