// Exercise 2.2 — row softmax with warp shuffles and a block reduction: the solution with a
// student's bug (tests/grading/grade_bugs.py): block_reduce's second __syncthreads() is gone,
// so the second reduction's write of a slot races with the first one's read of it (racecheck).
// See exercises/02-gpu-prefill/ch02.h.
#include <cmath>

#include "02-gpu-prefill/ch02.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxWarps = 1024 / kWarpSize;  // a block holds at most 1024 threads

// The max (kMax) or the sum of @p value over the 32 lanes of the calling warp; every lane gets
// the result. Every lane of the warp must call it (the mask is 0xffffffff).
template <bool kMax>
__device__ float warp_reduce(float value) {
  // Butterfly: after the step with offset o, every lane holds the result over its group of
  // 2·o lanes; after offset 1 that group is the whole warp.
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = kMax ? fmaxf(value, other) : value + other;
  }
  return value;
}

// The max (kMax) or the sum of @p value over the whole block; every thread gets the result.
// @p slots: shared memory for one float per warp. Every thread of the block must call it.
template <bool kMax>
__device__ float block_reduce(float value, float* slots) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  value = warp_reduce<kMax>(value);
  if (lane == 0) slots[warp] = value;  // BUG(missing-barrier): the next call's write, while a slow warp still reads
  __syncthreads();  // every warp's result is in slots before any thread reads them
  value = warp_reduce<kMax>(lane < warps ? slots[lane] : (kMax ? -INFINITY : 0.0f));
  return value;
}

// probs[row] = softmax(scores[row]) for row = blockIdx.x; the threads of the block stride
// through the row (j = threadIdx.x, threadIdx.x + blockDim.x, …).
__global__ void softmax_rows_kernel(const float* scores, float* probs, int row_len) {
  __shared__ float slots[kMaxWarps];
  const float* s = scores + size_t(blockIdx.x) * row_len;
  float* p = probs + size_t(blockIdx.x) * row_len;

  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < row_len; j += blockDim.x) local_max = fmaxf(local_max, s[j]);
  const float row_max = block_reduce<true>(local_max, slots);  // finite: the row has a finite entry

  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < row_len; j += blockDim.x) local_sum += expf(s[j] - row_max);  // exp(−∞) = 0
  const float inv_sum = 1.0f / block_reduce<false>(local_sum, slots);

  for (int j = threadIdx.x; j < row_len; j += blockDim.x) p[j] = expf(s[j] - row_max) * inv_sum;
}

}  // namespace

void softmax_rows(const Tensor<float>& scores, Tensor<float>& probs, int threads_per_block) {
  require(scores.rank() == 2, "scores.shape", to_string(scores.shape()), "must be [rows, row_len]");
  require(probs.shape() == scores.shape(), "probs.shape", to_string(probs.shape()),
          "must equal scores.shape " + to_string(scores.shape()));
  require(threads_per_block >= 32 && threads_per_block <= 1024 && threads_per_block % 32 == 0, "threads_per_block",
          threads_per_block, "must be a multiple of 32 from 32 to 1024");
  const int64_t rows = scores.dim(0), row_len = scores.dim(1);
  if (rows == 0) return;

  const DeviceBuffer<float> d_scores(scores);
  auto d_probs = DeviceBuffer<float>::poisoned(probs.size());
  check_cuda(simt::launch(softmax_rows_kernel, dim3(unsigned(rows)), dim3(unsigned(threads_per_block)), 0, nullptr,
                          static_cast<const float*>(d_scores.data()), d_probs.data(), int(row_len)),
             "softmax_rows_kernel");
  check_cuda(cudaDeviceSynchronize(), "softmax_rows_kernel");
  d_probs.download(probs);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
