// cuda/decode_split — chapter 05: split-KV decode (flash-decoding) on a GPU.
// (The algorithm, the exact reduce and the choice of S: split_kv.h.)
//
// cuda/decode (chapter 03) runs one block per (query head, sequence): at batch 1 with 8 heads
// that is 8 blocks on a GPU of 132 SMs, and the block holds the scores of the whole context in
// shared memory, so a context past ~50K tokens does not even fit. Here each (head, sequence) is
// cut into S splits:
//
//   partial kernel   grid (num_heads, batch, S), block kThreads = 128 (4 warps), dynamic shared
//                    memory ⌈max_length / S⌉ floats (the split's scores). Block (h, b, s) takes
//                    keys split_range(lengths[b], S, s):
//                      pass 1 (K)  one warp per key, lanes over head_dim, butterfly
//                                  __shfl_xor_sync → scores[j] in shared memory;
//                      softmax     block_reduce (softmax_warp.cuh) of the max, p_j = exp(s_j − m)
//                                  in place, block_reduce of the sum l;
//                      pass 2 (V)  thread c accumulates Σ p_j·v_j[c] (consecutive threads read
//                                  consecutive elements of a row: coalesced);
//                    writes acc (unnormalised), m and l. An empty split writes 0, −inf, 0.
//   reduce kernel    grid (num_heads, batch), block kThreads: m = max_s m_s, then
//                    out[c] = Σ_s exp(m_s − m)·acc_s[c] / Σ_s exp(m_s − m)·l_s.
//
// Cost: decode's 4·L·d FLOPs per query head and its K/V bytes (read once per query head, the
// GQA group's other heads mostly from L2), plus S·(d + 2) floats per head written and read back.
#include <cmath>
#include <string>

#include "common/ceil_div.h"
#include "kernels/decode/cuda_decode_host.cuh"
#include "kernels/fused/cuda_decode_split.cuh"
#include "kernels/fused/cuda_decode_split.h"
#include "kernels/primitives/softmax_warp.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadDim = 512;

template <class T, class Layout>
__global__ void decode_split_partial_kernel(const float* q, KvRows<T, float, Layout> cache, float* part_acc, float* part_max,
                                            float* part_sum, int num_heads, int group_size, int head_dim,
                                            int num_splits, int max_split, float scale) {
  SIMT_DYNAMIC_SHARED(float, scores);  // [max_split]: the split's scores, then exp(s − m)
  __shared__ float q_scaled[kMaxHeadDim];
  __shared__ float slots[32];  // block_reduce's one float per warp
  const unsigned full = 0xffffffffu;
  const int h = blockIdx.x, b = blockIdx.y, split = blockIdx.z;
  const int g = h / group_size;
  const int L = cache.lengths[b];
  const int per_split = ceil_div(L, num_splits);  // split_range() of split_kv.h
  const int begin = min(L, split * per_split), end = min(L, begin + per_split);
  const int n = end - begin;
  const size_t row = (size_t(b) * num_heads + h) * num_splits + split;
  float* acc_out = part_acc + row * head_dim;
  if (n <= 0 || n > max_split) {  // uniform over the block: no thread waits at a barrier below
    // Empty: weight 0 in the reduce. Longer than the host's bound: NaN, never an overflow.
    for (int c = threadIdx.x; c < head_dim; c += blockDim.x) acc_out[c] = n <= 0 ? 0.0f : NAN;
    if (threadIdx.x == 0) {
      part_max[row] = n <= 0 ? -INFINITY : NAN;
      part_sum[row] = n <= 0 ? 0.0f : NAN;
    }
    return;
  }
  const float* q_row = q + (size_t(b) * num_heads + h) * head_dim;
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) q_scaled[c] = q_row[c] * scale;
  __syncthreads();  // q_scaled is complete before any warp's dot product reads it

  // Pass 1: warp w scores keys begin + w, begin + w + kWarps, …; the loop bound is uniform over
  // the warp, so all 32 lanes take part in every shuffle.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int j = begin + warp; j < end; j += kWarps) {
    const T* k_row = cache.k + size_t(cache.layout.row(b, g, j)) * head_dim;  // where the layout keeps key j
    float dot = 0.0f;
    for (int c = lane; c < head_dim; c += 32) dot += q_scaled[c] * cached_to_float(k_row[c]);
    for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(full, dot, offset);
    if (lane == 0) scores[j - begin] = dot;
  }
  __syncthreads();  // every score is in shared memory before the softmax reads them

  // The sum's first barrier also publishes the probabilities to every thread.
  const SoftmaxStats softmax = block_softmax_numerators(scores, n, slots);

  // Pass 2: thread c owns output element c (and c + blockDim.x, …).
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j)
      acc += scores[j] * cached_to_float(cache.v[size_t(cache.layout.row(b, g, begin + j)) * head_dim + c]);
    acc_out[c] = acc;
  }
  if (threadIdx.x == 0) {
    part_max[row] = softmax.max;
    part_sum[row] = softmax.sum;
  }
}

__global__ void decode_split_reduce_kernel(const float* part_acc, const float* part_max, const float* part_sum,
                                           float* out, int num_heads, int head_dim, int num_splits) {
  const size_t row = size_t(blockIdx.y) * num_heads + blockIdx.x;  // (sequence, head)
  const float* maxes = part_max + row * num_splits;
  const float* sums = part_sum + row * num_splits;
  float m = -INFINITY;
  for (int s = 0; s < num_splits; ++s) m = fmaxf(m, maxes[s]);
  float total = 0.0f;
  for (int s = 0; s < num_splits; ++s)
    if (sums[s] != 0.0f) total += __expf(maxes[s] - m) * sums[s];
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    float o = 0.0f;
    for (int s = 0; s < num_splits; ++s)
      if (sums[s] != 0.0f) o += __expf(maxes[s] - m) * part_acc[(row * num_splits + s) * head_dim + c];
    out[row * head_dim + c] = o / total;
  }
}

}  // namespace

SplitPolicy cuda_split_policy() {
  int device = 0, sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute (multiprocessors)");
  return {4 * int64_t(sms), 256, kMaxSplitTokens};
}

template <class T, class Layout>
void decode_split_device(const DeviceDecode<T, float, Layout>& p, const DeviceSplitPartials& partials,
                         cudaStream_t stream) {
  const DecodeShape& s = p.shape;
  const int S = partials.num_splits;
  require(S >= 1, "num_splits", S, "must be ≥ 1 (1 = one split per sequence)");
  require(s.head_dim <= kMaxHeadDim, "head_dim", s.head_dim,
          "must be ≤ " + std::to_string(kMaxHeadDim) + " for cuda/decode_split");
  require(p.max_length > 0 && p.max_length <= s.max_seq_len, "max_length", p.max_length,
          "must be in [1, max_seq_len = " + std::to_string(s.max_seq_len) + "]");
  require(s.batch <= 65535 && S <= 65535, "batch", s.batch, "and num_splits must be ≤ 65535 (grid.y, grid.z)");
  const int64_t max_split = ceil_div(p.max_length, S);
  require(max_split <= kMaxSplitTokens, "num_splits", S,
          "leaves splits of " + std::to_string(max_split) + " keys; at most " + std::to_string(kMaxSplitTokens) +
              " fit in shared memory: use at least " +
              std::to_string(ceil_div(p.max_length, kMaxSplitTokens)) + " splits");
  const dim3 heads_by_batch(unsigned(s.num_heads), unsigned(s.batch));
  check_cuda(
      simt::launch(decode_split_partial_kernel<T, Layout>, dim3(unsigned(s.num_heads), unsigned(s.batch), unsigned(S)),
                   dim3(kThreads), size_t(max_split) * sizeof(float), stream, p.q, p.cache, partials.acc,
                   partials.max, partials.sum, int(s.num_heads), int(s.group_size()), int(s.head_dim), S,
                   int(max_split), 1.0f / std::sqrt(static_cast<float>(s.head_dim))),
      "decode_split_partial_kernel");
  check_cuda(simt::launch(decode_split_reduce_kernel, heads_by_batch, dim3(kThreads), 0, stream, partials.acc,
                          partials.max, partials.sum, p.out, int(s.num_heads), int(s.head_dim), S),
             "decode_split_reduce_kernel");
}

template void decode_split_device<float>(const DeviceDecode<float>&, const DeviceSplitPartials&, cudaStream_t);
template void decode_split_device<__half>(const DeviceDecode<__half>&, const DeviceSplitPartials&, cudaStream_t);
template void decode_split_device<float, PagedLayout>(const DeviceDecode<float, float, PagedLayout>&,
                                                      const DeviceSplitPartials&, cudaStream_t);
template void decode_split_device<__half, PagedLayout>(const DeviceDecode<__half, float, PagedLayout>&,
                                                       const DeviceSplitPartials&, cudaStream_t);

namespace {

template <class T>
void decode_split_host(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out, int64_t num_splits) {
  require(num_splits >= 1, "num_splits", num_splits, "must be ≥ 1 (1 = one split per sequence)");
  const DecodeShape shape = decode_shape(q, cache);
  check_decode_output(out, shape);
  const DeviceKvCache device_cache(cache);
  const size_t rows = size_t(shape.batch * shape.num_heads * num_splits);
  DeviceBuffer<float> acc(rows * size_t(shape.head_dim)), maxes(rows), sums(rows);
  acc.poison();  // a partial the partial kernel forgets poisons the reduce
  maxes.poison();
  sums.poison();
  decode_on_host_tensors(q, out, "cuda/decode_split", [&](const float* q_device, float* out_device) {
    device_cache.with_rows<T>(0, [&](const auto& rows) {
      using Layout = std::decay_t<decltype(rows.layout)>;
      const DeviceDecode<T, float, Layout> problem{q_device, rows, out_device, shape, int(cache.max_length())};
      decode_split_device(problem, {acc.data(), maxes.data(), sums.data(), int(num_splits)}, nullptr);
    });
  });
}

}  // namespace

void decode_split_cuda(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out, int64_t num_splits) {
  if (cache.dtype() == KvDtype::fp16) {
    decode_split_host<__half>(q, cache, out, num_splits);
  } else {
    decode_split_host<float>(q, cache, out, num_splits);
  }
}

void decode_split_cuda(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  decode_split_cuda(q, cache, out, choose_num_splits(s.batch * s.num_heads, cache.max_length(), cuda_split_policy()));
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
