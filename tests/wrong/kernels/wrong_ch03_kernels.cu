// Chapter-03 wrong fixtures (see wrong_ch03_kernels.h). One warp per (query head, sequence):
// lane l scores keys l, l+32, …; warp shuffles give the max and the sum; lane l then sums
// p_j·v_j for dims l, l+32, … . Simple on purpose: the mistakes are the point.
#include "tests/wrong/kernels/wrong_ch03_kernels.h"

#include <cmath>

#include "kernels/decode/decode.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch03 {

namespace {

__device__ inline float cached(const float* p) {
  return *p;
}
__device__ inline float cached(const __half* p) {
  return __half2float(*p);
}

template <DecodeFixture kFixture, class T>
__global__ void decode_warp(const float* q, const T* k, const T* v, const int* lengths, float* out, int num_heads,
                            int num_kv_heads, int max_seq_len, int head_dim) {
  SIMT_DYNAMIC_SHARED(float, probs);  // [max_seq_len + 1]
  const unsigned full = 0xffffffffu;
  const int h = blockIdx.x, b = blockIdx.y, lane = threadIdx.x;
  const int g = kFixture == DecodeFixture::gqa_modulo ? h % num_kv_heads : h / (num_heads / num_kv_heads);
  const int keys = kFixture == DecodeFixture::one_past_end ? lengths[b] + 1 : lengths[b];
  const T* K = k + (size_t(b) * num_kv_heads + g) * size_t(max_seq_len) * head_dim;
  const T* V = v + (size_t(b) * num_kv_heads + g) * size_t(max_seq_len) * head_dim;
  const float* q_row = q + (size_t(b) * num_heads + h) * head_dim;
  const float scale = 1.0f / sqrtf(float(head_dim));

  float local_max = -INFINITY;
  for (int j = lane; j < keys; j += 32) {
    float dot = 0.0f;
    for (int c = 0; c < head_dim; ++c) dot += q_row[c] * cached(K + size_t(j) * head_dim + c);
    probs[j] = dot * scale;
    local_max = fmaxf(local_max, probs[j]);
  }
  for (int offset = 16; offset > 0; offset /= 2) local_max = fmaxf(local_max, __shfl_xor_sync(full, local_max, offset));
  float local_sum = 0.0f;
  for (int j = lane; j < keys; j += 32) {
    probs[j] = __expf(probs[j] - local_max);
    local_sum += probs[j];
  }
  for (int offset = 16; offset > 0; offset /= 2) local_sum += __shfl_xor_sync(full, local_sum, offset);
  __syncwarp();  // every lane's probabilities are written before any lane reads them all
  for (int c = lane; c < head_dim; c += 32) {
    float acc = 0.0f;
    for (int j = 0; j < keys; ++j) acc += probs[j] * cached(V + size_t(j) * head_dim + c);
    out[(size_t(b) * num_heads + h) * head_dim + c] = acc / local_sum;
  }
}

template <DecodeFixture kFixture, class T>
void run(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  DeviceBuffer<T> k(cache.bytes_per_tensor() / sizeof(T)), v(cache.bytes_per_tensor() / sizeof(T));
  check_cuda(cudaMemcpy(k.data(), cache.k_bytes().data(), cache.bytes_per_tensor(), cudaMemcpyHostToDevice), "upload K");
  check_cuda(cudaMemcpy(v.data(), cache.v_bytes().data(), cache.bytes_per_tensor(), cudaMemcpyHostToDevice), "upload V");
  DeviceBuffer<int> lengths(size_t(s.batch));
  lengths.upload(reinterpret_cast<const int*>(cache.lengths().data()));
  DeviceBuffer<float> d_q(size_t(q.size())), d_out(size_t(out.size()));
  d_q.upload(q.data());
  d_out.poison();
  check_cuda(simt::launch(decode_warp<kFixture, T>, dim3(unsigned(s.num_heads), unsigned(s.batch)), dim3(32),
                          size_t(s.max_seq_len + 1) * sizeof(float), nullptr, static_cast<const float*>(d_q.data()),
                          static_cast<const T*>(k.data()), static_cast<const T*>(v.data()),
                          static_cast<const int*>(lengths.data()), d_out.data(), int(s.num_heads), int(s.num_kv_heads),
                          int(s.max_seq_len), int(s.head_dim)),
             "decode_warp");
  check_cuda(cudaDeviceSynchronize(), "decode_warp");
  d_out.download(out.data());
}

template <DecodeFixture kFixture>
void run_any(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  if (cache.dtype() == KvDtype::fp16) {
    run<kFixture, __half>(q, cache, out);
  } else {
    run<kFixture, float>(q, cache, out);
  }
}

}  // namespace

void decode(DecodeFixture fixture, const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  switch (fixture) {
    case DecodeFixture::correct:
      return run_any<DecodeFixture::correct>(q, cache, out);
    case DecodeFixture::one_past_end:
      return run_any<DecodeFixture::one_past_end>(q, cache, out);
    case DecodeFixture::gqa_modulo:
      return run_any<DecodeFixture::gqa_modulo>(q, cache, out);
  }
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch03
