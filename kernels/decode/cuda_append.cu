// cuda/append — chapter 03: write one new token's K and V into the KV cache.
//
// Every decode step first appends the new token (its K and V, computed by the layer's
// projections) to each sequence's cache, then runs decode attention over lengths[b] + 1 tokens.
//
// Launch: grid (num_kv_heads, batch), block 128; block (g, b) copies k_new[b][g] and v_new[b][g]
// (head_dim fp32 each) into slot lengths[b] of KV head g of sequence b, converted to the
// cache's type (fp16: round to nearest even, as the host KvCache does). Consecutive threads
// write consecutive elements: coalesced. Bytes: 2·d·(4 + e) per (sequence, KV head); no FLOPs.
//
// Capacity: the host checks that no sequence is full before launching (KvCache::check_append
// throws std::invalid_argument); the kernel also refuses a slot outside [0, max_seq_len), so a
// caller that skipped the check loses the token instead of corrupting the next head's cache.
#include "kernels/decode/cuda_decode.cuh"
#include "kernels/decode/cuda_decode.h"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

constexpr int kAppendThreads = 128;

__device__ inline void store_cached(float* at, float x) {
  *at = x;
}
__device__ inline void store_cached(__half* at, float x) {
  *at = __float2half_rn(x);
}

template <class T>
__global__ void kv_append_kernel(T* k_cache, T* v_cache, const int* lengths, const float* k_new, const float* v_new,
                                 int num_kv_heads, int max_seq_len, int head_dim) {
  const int g = blockIdx.x, b = blockIdx.y;
  const int slot = lengths[b];
  if (slot < 0 || slot >= max_seq_len) return;  // full (or corrupt): never write past the end
  const size_t dst = ((size_t(b) * num_kv_heads + g) * size_t(max_seq_len) + slot) * head_dim;
  const size_t src = (size_t(b) * num_kv_heads + g) * head_dim;
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    store_cached(k_cache + dst + c, k_new[src + c]);
    store_cached(v_cache + dst + c, v_new[src + c]);
  }
}

}  // namespace

template <class T>
void kv_append_device(const DeviceKvCacheOf<T>& cache, const float* k_new, const float* v_new, cudaStream_t stream) {
  const KvCacheShape& s = cache.shape;
  require(s.batch <= 65535, "batch", s.batch, "must be ≤ 65535 (grid.y) for cuda/append");
  check_cuda(simt::launch(kv_append_kernel<T>, dim3(unsigned(s.num_kv_heads), unsigned(s.batch)), dim3(kAppendThreads),
                          0, stream, cache.k, cache.v, cache.lengths, k_new, v_new, int(s.num_kv_heads),
                          int(s.max_seq_len), int(s.head_dim)),
             "kv_append_kernel");
}

template void kv_append_device<float>(const DeviceKvCacheOf<float>&, const float*, const float*, cudaStream_t);
template void kv_append_device<__half>(const DeviceKvCacheOf<__half>&, const float*, const float*, cudaStream_t);

namespace {

template <class T>
void append_host(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.check_append(k_new, v_new);  // a full sequence throws here, before anything is written
  const DeviceKvCacheCopy<T> device_cache(cache);
  DeviceBuffer<float> k_device(size_t(k_new.size())), v_device(size_t(v_new.size()));
  k_device.upload(k_new.data());
  v_device.upload(v_new.data());
  kv_append_device(device_cache.view(), k_device.data(), v_device.data(), nullptr);
  check_cuda(cudaGetLastError(), "cuda/append");
  check_cuda(cudaDeviceSynchronize(), "cuda/append");
  device_cache.download(cache);
  cache.commit_append();
}

}  // namespace

void kv_append_cuda(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  if (cache.dtype() == KvDtype::fp16) {
    append_host<__half>(cache, k_new, v_new);
  } else {
    append_host<float>(cache, k_new, v_new);
  }
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
