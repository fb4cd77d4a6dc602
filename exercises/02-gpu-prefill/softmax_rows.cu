// Exercise 2.2 — row softmax with warp shuffles and a block reduction. See ch02.h for the task.
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
  // TODO(student): five __shfl_xor_sync(0xffffffff, value, offset) steps, offset 16, 8, 4, 2, 1,
  // each combining value with the other lane's (fmaxf or +). (roughly 4 lines)
  return value;
}

// The max (kMax) or the sum of @p value over the whole block; every thread gets the result.
// @p slots: shared memory for one float per warp. Every thread of the block must call it.
template <bool kMax>
__device__ float block_reduce(float value, float* slots) {
  // TODO(student): reduce within the warp; lane 0 writes the warp's result to slots[warp];
  // __syncthreads(); every warp reduces slots[0..warps-1] (a lane past the number of warps
  // contributes -INFINITY for a max, 0 for a sum); __syncthreads() again so that the next call
  // cannot overwrite slots that are still being read. (roughly 8 lines)
  return value;
}

// probs[row] = softmax(scores[row]) for row = blockIdx.x; the threads of the block stride
// through the row (j = threadIdx.x, threadIdx.x + blockDim.x, …).
__global__ void softmax_rows_kernel(const float* scores, float* probs, int row_len) {
  [[maybe_unused]] __shared__ float slots[kMaxWarps];  // block_reduce's scratch: one float per warp
  // TODO(student): the row's max (block_reduce<true>), then the sum of exp(s - max)
  // (block_reduce<false>), then write exp(s - max) / sum for every j of the row. Every thread
  // calls both reductions, even one with no element of the row. (roughly 12 lines)
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

  throw NotImplemented("softmax_rows");  // TODO(student): delete this line once softmax_rows_kernel is written

  const DeviceBuffer<float> d_scores(scores);
  auto d_probs = DeviceBuffer<float>::poisoned(probs.size());
  check_cuda(simt::launch(softmax_rows_kernel, dim3(unsigned(rows)), dim3(unsigned(threads_per_block)), 0, nullptr,
                          static_cast<const float*>(d_scores.data()), d_probs.data(), int(row_len)),
             "softmax_rows_kernel");
  check_cuda(cudaDeviceSynchronize(), "softmax_rows_kernel");
  d_probs.download(probs);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
