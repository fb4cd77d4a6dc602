#pragma once
// Shared plumbing of the chapter-03 CUDA code (compiled for sim and cuda). Two layers, as in
// chapter 02 (kernels/attention/cuda_prefill.cuh):
//
//   device level   decode_device<T>, kv_append_device<T>: the cache, the queries and the output
//                  already in device memory, work queued on a stream, no copy, no allocation,
//                  no wait. What a model calls every step and what the benchmark times.
//   host tensors   decode_cuda, kv_append_cuda (cuda_decode.h): the DecodeFn / KvAppendFn
//                  signatures that tests and the CLI use — a thin wrapper: DeviceKvCacheCopy
//                  uploads the host cache (poisoned tail included), the wrapper calls the
//                  device level, then waits, checks and copies back.
//
// T is the cache's element type on the device: float (KvDtype::fp32) or __half (fp16; the same
// 16 bits the host KvCache stores).
#include <cstdint>
#include <vector>

#include "kernels/decode/decode.h"
#include "kernels/device_buffer.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

// A contiguous KV cache in device memory (layout in kv_cache.h).
template <class T>
struct DeviceKvCacheOf {
  T* k = nullptr;                // [batch][num_kv_heads][max_seq_len][head_dim]
  T* v = nullptr;                // same
  const int* lengths = nullptr;  // [batch]: tokens cached per sequence
  KvCacheShape shape;
};

// One decode step in device memory: q and out [batch, num_heads, head_dim] (fp32).
template <class T>
struct DeviceDecodeOf {
  const float* q = nullptr;
  DeviceKvCacheOf<T> cache;
  float* out = nullptr;
  DecodeShape shape;
  // An upper bound on every lengths[b] (the host knows it: the scheduler's longest sequence).
  // It sizes the shared memory of the scores; a sequence longer than it gets NaN outputs
  // instead of a shared-memory overflow.
  int max_length = 0;
};

// cuda/decode (cuda_decode.cu): one block per (query head, sequence). Queues the kernel on
// @p stream. Throws std::invalid_argument when head_dim > 512 or the scores of max_length keys
// do not fit in this device's shared memory per block (chapter 05's split-KV decode then),
// std::runtime_error on a launch error.
template <class T>
void decode_device(const DeviceDecodeOf<T>& problem, cudaStream_t stream);

// The append kernel (cuda_append.cu): writes k_new and v_new ([batch, num_kv_heads, head_dim],
// fp32, converted to T) into slot lengths[b] of each sequence. It does not change lengths (the
// caller advances them, as the host-side scheduler owns them); a slot outside
// [0, max_seq_len) is skipped, never written — the host checks capacity first and throws.
template <class T>
void kv_append_device(const DeviceKvCacheOf<T>& cache, const float* k_new, const float* v_new, cudaStream_t stream);

// The device copy of a host KvCache: K and V bytes (poisoned tail included) and the lengths.
template <class T>
class DeviceKvCacheCopy {
 public:
  explicit DeviceKvCacheCopy(const KvCache& cache)
      : shape_(cache.shape()),
        k_(cache.bytes_per_tensor() / sizeof(T)),
        v_(cache.bytes_per_tensor() / sizeof(T)),
        lengths_(size_t(cache.shape().batch)) {
    check_cuda(cudaMemcpy(k_.data(), cache.k_bytes(), cache.bytes_per_tensor(), cudaMemcpyHostToDevice),
               "cudaMemcpy (upload K cache)");
    check_cuda(cudaMemcpy(v_.data(), cache.v_bytes(), cache.bytes_per_tensor(), cudaMemcpyHostToDevice),
               "cudaMemcpy (upload V cache)");
    lengths_.upload(reinterpret_cast<const int*>(cache.lengths().data()));
  }

  DeviceKvCacheOf<T> view() const { return {k_.data(), v_.data(), lengths_.data(), shape_}; }

  // Copies K and V back into @p cache (its lengths are the caller's business).
  void download(KvCache& cache) const {
    check_cuda(cudaMemcpy(cache.k_bytes(), k_.data(), cache.bytes_per_tensor(), cudaMemcpyDeviceToHost),
               "cudaMemcpy (download K cache)");
    check_cuda(cudaMemcpy(cache.v_bytes(), v_.data(), cache.bytes_per_tensor(), cudaMemcpyDeviceToHost),
               "cudaMemcpy (download V cache)");
  }

 private:
  KvCacheShape shape_;
  DeviceBuffer<T> k_, v_;
  DeviceBuffer<int> lengths_;
};

}  // namespace inferlab::INFERLAB_BACKEND_NS
