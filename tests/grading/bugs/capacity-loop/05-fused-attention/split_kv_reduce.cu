// Exercise 5.3 — the split-KV reduce: merge the partial outputs of the KV slices of every
// (sequence, head) into the exact attention output: the solution with a student's bug
// (tests/grading/grade_bugs.py): the total sums the array's capacity (kMaxSplits weights), not
// the num_splits this launch wrote, so it reads shared memory no thread wrote (initcheck). See
// exercises/05-fused-attention/ch05.h.
#include <cmath>
#include <string>

#include "05-fused-attention/ch05.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kReduceThreads = 64;
constexpr int kMaxSplits = 256;  // the weights of every slice fit in shared memory

// out[b][h] = Σ_s w_s·o_s / Σ_s w_s with w_s = exp(m_s − max_s m_s)·l_s, for block (h, b).
// partial_out [batch][num_heads][num_splits][head_dim]; partial_max, partial_sum
// [batch][num_heads][num_splits]; out [batch][num_heads][head_dim].
__global__ void split_kv_reduce_kernel(const float* partial_out, const float* partial_max, const float* partial_sum,
                                       float* out, int num_heads, int num_splits, int head_dim) {
  __shared__ float weights[kMaxSplits];
  const size_t row = size_t(blockIdx.y) * num_heads + blockIdx.x;  // (b, h)
  const float* m = partial_max + row * num_splits;
  const float* l = partial_sum + row * num_splits;
  const float* o = partial_out + row * num_splits * head_dim;

  float max_all = -INFINITY;  // finite: at least one slice is not empty
  for (int s = 0; s < num_splits; ++s) max_all = fmaxf(max_all, m[s]);
  for (int s = threadIdx.x; s < num_splits; s += blockDim.x)
    weights[s] = l[s] > 0.0f ? expf(m[s] - max_all) * l[s] : 0.0f;
  __syncthreads();  // every weight is in shared memory before any thread sums them

  float total = 0.0f;
  for (int s = 0; s < kMaxSplits; ++s) total += weights[s];  // BUG(capacity-loop)
  const float inv_total = 1.0f / total;
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < num_splits; ++s)
      if (weights[s] > 0.0f) acc += weights[s] * o[size_t(s) * head_dim + c];  // an empty slice's o_s may be NaN
    out[row * head_dim + c] = acc * inv_total;
  }
}

}  // namespace

void split_kv_reduce(const Tensor<float>& partial_out, const Tensor<float>& partial_max,
                     const Tensor<float>& partial_sum, Tensor<float>& out) {
  check_rank(partial_out, 4, "partial_out");
  const int64_t batch = partial_out.dim(0), num_heads = partial_out.dim(1), num_splits = partial_out.dim(2),
                head_dim = partial_out.dim(3);
  require(batch > 0 && num_heads > 0 && num_splits > 0 && head_dim > 0, "partial_out.shape",
          to_string(partial_out.shape()), "must be [batch, num_heads, num_splits, head_dim], every size ≥ 1");
  require(batch <= 65535, "batch", batch, "must be ≤ 65535 (grid.y)");
  require(num_splits <= kMaxSplits, "num_splits", num_splits,
          "must be ≤ " + std::to_string(kMaxSplits) + " (the weights live in shared memory)");
  check_shape(partial_max, Shape{batch, num_heads, num_splits}, "partial_max");
  check_shape(partial_sum, Shape{batch, num_heads, num_splits}, "partial_sum");
  check_shape(out, Shape{batch, num_heads, head_dim}, "out");
  for (int64_t row = 0; row < batch * num_heads; ++row) {  // every (b, h) needs a token somewhere
    bool any = false;
    for (int64_t s = 0; s < num_splits; ++s) {
      const float l = partial_sum[row * num_splits + s];
      require(l >= 0.0f,
              "partial_sum[" + std::to_string(row / num_heads) + "][" + std::to_string(row % num_heads) + "][" +
                  std::to_string(s) + "]",
              l, "must be ≥ 0 (0 for an empty slice)");
      any = any || l > 0.0f;
    }
    require(any, "partial_sum[" + std::to_string(row / num_heads) + "][" + std::to_string(row % num_heads) + "]",
            "all 0", "at least one slice of every sequence and head must hold a token");
  }

  const DeviceBuffer<float> d_partial_out(partial_out), d_partial_max(partial_max), d_partial_sum(partial_sum);
  auto d_out = DeviceBuffer<float>::poisoned(out.size());
  check_cuda(
      simt::launch(split_kv_reduce_kernel, dim3(unsigned(num_heads), unsigned(batch)), dim3(kReduceThreads), 0, nullptr,
                   static_cast<const float*>(d_partial_out.data()), static_cast<const float*>(d_partial_max.data()),
                   static_cast<const float*>(d_partial_sum.data()), d_out.data(), int(num_heads), int(num_splits),
                   int(head_dim)),
      "split_kv_reduce_kernel");
  check_cuda(cudaDeviceSynchronize(), "split_kv_reduce_kernel");
  d_out.download(out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
