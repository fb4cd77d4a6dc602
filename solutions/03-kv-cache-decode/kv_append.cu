// Exercise 3.1 — append the new token's K and V to the KV cache: a straightforward answer.
// See exercises/03-kv-cache-decode/ch03.h.
#include <string>

#include "03-kv-cache-decode/ch03.h"
#include "03-kv-cache-decode/device_lengths.cuh"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kAppendThreads = 64;

// Slot lengths[b] of KV head g of sequence b ← k_new[b][g] (in K) and v_new[b][g] (in V), for
// block (g, b). Caches [batch][num_kv_heads][max_seq_len][head_dim]; k_new, v_new
// [batch][num_kv_heads][head_dim].
__global__ void kv_append_kernel(float* k_cache, float* v_cache, const int* lengths, const float* k_new,
                                 const float* v_new, int num_kv_heads, int max_seq_len, int head_dim) {
  const int g = blockIdx.x, b = blockIdx.y;
  const int slot = lengths[b];
  if (slot < 0 || slot >= max_seq_len) return;  // a bad length loses the token, never corrupts the cache
  float* k_row = k_cache + ((size_t(b) * num_kv_heads + g) * max_seq_len + slot) * head_dim;
  float* v_row = v_cache + ((size_t(b) * num_kv_heads + g) * max_seq_len + slot) * head_dim;
  const size_t source = (size_t(b) * num_kv_heads + g) * head_dim;
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {  // consecutive threads, consecutive addresses
    k_row[c] = k_new[source + c];
    v_row[c] = v_new[source + c];
  }
}

}  // namespace

void kv_append(Tensor<float>& k_cache, Tensor<float>& v_cache, std::vector<int32_t>& lengths,
               const Tensor<float>& k_new, const Tensor<float>& v_new) {
  check_rank(k_cache, 4, "k_cache");
  const int64_t batch = k_cache.dim(0), num_kv_heads = k_cache.dim(1), max_seq_len = k_cache.dim(2),
                head_dim = k_cache.dim(3);
  require(batch > 0 && num_kv_heads > 0 && max_seq_len > 0 && head_dim > 0, "k_cache.shape", to_string(k_cache.shape()),
          "must be [batch, num_kv_heads, max_seq_len, head_dim], every size ≥ 1");
  require(batch <= 65535, "batch", batch, "must be ≤ 65535 (grid.y)");
  check_shape(v_cache, k_cache.shape(), "v_cache");
  check_shape(k_new, Shape{batch, num_kv_heads, head_dim}, "k_new");
  check_shape(v_new, Shape{batch, num_kv_heads, head_dim}, "v_new");
  require(int64_t(lengths.size()) == batch, "lengths.size()", lengths.size(),
          "must equal batch = " + std::to_string(batch));
  for (int64_t b = 0; b < batch; ++b) {  // a full sequence: refuse before anything is written
    const std::string name = "lengths[" + std::to_string(b) + "]";
    require(lengths[size_t(b)] >= 0, name, lengths[size_t(b)], "must be ≥ 0");
    require(lengths[size_t(b)] < max_seq_len, name, lengths[size_t(b)],
            "sequence " + std::to_string(b) + " is full (max_seq_len = " + std::to_string(max_seq_len) +
                "): appending would write past the end of its cache");
  }

  // The whole cache travels to the device and back so that the grader sees every byte; an
  // engine keeps the cache on the device and moves only the new token (2·d floats per head).
  DeviceBuffer<float> d_k_cache(k_cache), d_v_cache(v_cache);  // written by the kernel, downloaded after
  const DeviceBuffer<float> d_k_new(k_new), d_v_new(v_new);
  const DeviceBuffer<int> d_lengths = upload_lengths(lengths);
  check_cuda(
      simt::launch(kv_append_kernel, dim3(unsigned(num_kv_heads), unsigned(batch)), dim3(kAppendThreads), 0, nullptr,
                   d_k_cache.data(), d_v_cache.data(), d_lengths.data(), static_cast<const float*>(d_k_new.data()),
                   static_cast<const float*>(d_v_new.data()), int(num_kv_heads), int(max_seq_len), int(head_dim)),
      "kv_append_kernel");
  check_cuda(cudaDeviceSynchronize(), "kv_append_kernel");
  d_k_cache.download(k_cache);
  d_v_cache.download(v_cache);
  for (int32_t& length : lengths) ++length;  // the new token is cached
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
