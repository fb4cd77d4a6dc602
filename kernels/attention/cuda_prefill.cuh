#pragma once
// Shared host plumbing of the chapter-02 CUDA versions (compiled for sim and cuda): the device
// copy of one attention problem, and the host-tensor entry point that every version uses.
#include <cmath>
#include <functional>

#include "kernels/attention/attention.h"
#include "kernels/device_buffer.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

// One prefill attention problem in device memory (layouts as in attention.h).
struct DeviceAttention {
  const float* q = nullptr;  // [num_heads, seq_len, head_dim]
  const float* k = nullptr;  // [num_kv_heads, seq_len, head_dim]
  const float* v = nullptr;  // [num_kv_heads, seq_len, head_dim]
  float* out = nullptr;      // [num_heads, seq_len, head_dim]
  AttentionShape shape;
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(shape.head_dim)); }
};

// Copies q/k/v to the device, poisons the device output, runs @p body, checks for launch and
// execution errors, and copies the output back into @p out (which must have q's shape).
inline void run_on_device(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                          Tensor<float>& out, const std::function<void(const DeviceAttention&)>& body) {
  const AttentionShape shape = attention_shape(q, k, v, causal);
  check_attention_output(out, shape);
  DeviceBuffer<float> d_q(size_t(q.size())), d_k(size_t(k.size())), d_v(size_t(v.size())), d_out(size_t(out.size()));
  d_q.upload(q.data());
  d_k.upload(k.data());
  d_v.upload(v.data());
  d_out.poison();
  body(DeviceAttention{d_q.data(), d_k.data(), d_v.data(), d_out.data(), shape});
  check_cuda(cudaGetLastError(), "kernel launch");
  check_cuda(cudaDeviceSynchronize(), "kernel execution");
  d_out.download(out.data());
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
