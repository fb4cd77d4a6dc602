#pragma once
// Shared plumbing of the chapter-02 CUDA versions (compiled for sim and cuda). Each version has
// two layers:
//
//   device level   attention_naive_device, attention_tiled_device, attention_cublas_device<T>:
//                  inputs and output already in device memory, scratch (the H×L×L scores) passed
//                  in by the caller, work queued on a stream, no copy, no allocation, no wait.
//                  This is what a model would call, and what the benchmark times
//                  (cuda_timing.cu): PCIe copies and cudaMalloc would otherwise dominate.
//   host tensors   attention_cuda_naive, … (cuda_attention.h): the AttentionFn signature that
//                  tests and the CLI use. A thin wrapper: DeviceAttentionCopy copies Q, K, V in,
//                  the wrapper allocates the scratch and calls the device level, then
//                  DeviceAttentionCopy waits, checks and copies O out.
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/half.h"
#include "kernels/attention/attention.h"
#include "simt/cublas.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS {

// One prefill attention problem in device memory (layouts as in attention.h). Q, K and V are
// stored as T (float, or __half / __nv_bfloat16 for the 16-bit cuBLAS variants); O is fp32.
template <class T>
struct DeviceAttentionOf {
  const T* q = nullptr;  // [num_heads, seq_len, head_dim]
  const T* k = nullptr;  // [num_kv_heads, seq_len, head_dim]
  const T* v = nullptr;  // [num_kv_heads, seq_len, head_dim]
  float* out = nullptr;  // [num_heads, seq_len, head_dim]
  AttentionShape shape;
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(shape.head_dim)); }
};
using DeviceAttention = DeviceAttentionOf<float>;

// Elements of the scratch score matrix S (and of P) every version needs: num_heads × L × L.
inline size_t score_elements(const AttentionShape& shape) {
  return size_t(shape.num_heads) * size_t(shape.seq_len) * size_t(shape.seq_len);
}

// ---- The device level (one definition per .cu file). Each queues its kernels on @p stream and
// returns without waiting; launch errors throw std::runtime_error, execution errors surface at
// the caller's next synchronisation. ----

// cuda/naive (cuda_naive.cu). @p scores: score_elements() floats of scratch.
void attention_naive_device(const DeviceAttention& problem, float* scores, cudaStream_t stream);

// cuda/tiled (cuda_tiled.cu). @p scores: score_elements() floats of scratch.
void attention_tiled_device(const DeviceAttention& problem, float* scores, cudaStream_t stream);

// cuda/cublas (T = float), cuda/cublas_fp16 (__half), cuda/cublas_bf16 (__nv_bfloat16)
// (cuda_cublas.cu). @p scores: score_elements() floats; @p probs: score_elements() T. @p handle
// is created once by the caller (cublasCreate costs milliseconds); it is bound to @p stream.
template <class T>
void attention_cublas_device(const DeviceAttentionOf<T>& problem, float* scores, T* probs, cublasHandle_t handle,
                             cudaStream_t stream);

// ---- The host side of the host-tensor entry points ----

// The 16 bits of @p x rounded to nearest-even as T (__half or __nv_bfloat16).
template <class T>
uint16_t bits_16(float x) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>);
  return std::is_same_v<T, __half> ? float_to_half_bits(x) : float_to_bfloat16_bits(x);
}

// Copies @p host to a new device buffer of T (rounded on the host for 16-bit T).
template <class T>
DeviceBuffer<T> upload_as(const Tensor<float>& host) {
  DeviceBuffer<T> device(size_t(host.size()));
  if constexpr (std::is_same_v<T, float>) {
    device.upload(host.data());
  } else {
    std::vector<uint16_t> bits(size_t(host.size()));
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = bits_16<T>(host[int64_t(i)]);
    check_cuda(cudaMemcpy(device.data(), bits.data(), bits.size() * sizeof(uint16_t), cudaMemcpyHostToDevice),
               "cudaMemcpy (upload 16-bit)");
  }
  return device;
}

// The device copy of one host problem: checks the shapes of q, k, v and out (as every CPU
// version does), uploads Q, K, V as T, allocates O and poisons it (NaN), so an element the
// kernels forget is caught. finish() waits for the device and copies O back.
template <class T>
class DeviceAttentionCopy {
 public:
  DeviceAttentionCopy(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                      const Tensor<float>& out)
      : shape_(checked_shape(q, k, v, causal, out)),
        q_(upload_as<T>(q)),
        k_(upload_as<T>(k)),
        v_(upload_as<T>(v)),
        out_(size_t(out.size())) {
    out_.poison();
  }

  const AttentionShape& shape() const { return shape_; }
  DeviceAttentionOf<T> view() const { return {q_.data(), k_.data(), v_.data(), out_.data(), shape_}; }

  // Waits for every queued kernel, turns a launch or execution error into std::runtime_error
  // naming @p version, and copies O into @p out.
  void finish(Tensor<float>& out, const char* version) const {
    check_cuda(cudaGetLastError(), version);
    check_cuda(cudaDeviceSynchronize(), version);
    out_.download(out.data());
  }

 private:
  static AttentionShape checked_shape(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                      bool causal, const Tensor<float>& out) {
    const AttentionShape shape = attention_shape(q, k, v, causal);
    check_attention_output(out, shape);
    return shape;
  }

  AttentionShape shape_;
  DeviceBuffer<T> q_, k_, v_;
  DeviceBuffer<float> out_;
};

}  // namespace inferlab::INFERLAB_BACKEND_NS
