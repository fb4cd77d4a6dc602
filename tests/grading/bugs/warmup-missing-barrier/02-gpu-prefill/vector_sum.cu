// Warm-up W2 with the bug students make most: the tree's steps without the barrier between them
// (step s/2 reads what other threads wrote in step s). Graded by tests/grading/grade_bugs.py.
#include <algorithm>

#include "02-gpu-prefill/ch02.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxThreads = 1024;  // a block holds at most 1024 threads
constexpr int kMaxBlocks = 32;     // blocks of the first pass (each thread then adds several elements)

// out[blockIdx.x] = the sum of in[i] for i = blockIdx.x·blockDim.x + threadIdx.x, stepping by
// the whole grid. blockDim.x is a power of two from 32 to 1024.
__global__ void block_sum_kernel(const float* in, float* out, int n) {
  __shared__ float partial[kMaxThreads];
  const int t = threadIdx.x;
  float sum = 0.0f;
  for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) sum += in[i];
  partial[t] = sum;
  __syncthreads();  // barrier 1: every partial sum is written before any thread reads another's
  for (int s = blockDim.x / 2; s >= kWarpSize; s /= 2) {
    if (t < s) partial[t] += partial[t + s];  // BUG(warmup-missing-barrier): no barrier after this step
  }
  if (t < kWarpSize) {  // warp 0 finishes the last 32 values: shuffles need no barrier
    float value = partial[t];
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
    if (t == 0) out[blockIdx.x] = value;  // lane 0 holds the sum of lanes 0-31
  }
}

}  // namespace

void vector_sum(const Tensor<float>& x, Tensor<float>& sum, int threads_per_block) {
  require(x.rank() == 1 && x.size() >= 1, "x.shape", to_string(x.shape()), "must be [n] with n >= 1");
  require(sum.shape() == Shape{1}, "sum.shape", to_string(sum.shape()), "must be [1]");
  require(threads_per_block >= 32 && threads_per_block <= 1024 && (threads_per_block & (threads_per_block - 1)) == 0,
          "threads_per_block", threads_per_block, "must be a power of two from 32 to 1024");
  const int64_t n = x.size();
  const int blocks = std::min(blocks_for(n, threads_per_block), kMaxBlocks);

  const DeviceBuffer<float> d_x(x);
  auto d_partials = DeviceBuffer<float>::poisoned(size_t(blocks));
  auto d_sum = DeviceBuffer<float>::poisoned(1);
  // Blocks cannot wait for each other inside a launch: the second level is a second launch.
  check_cuda(simt::launch(block_sum_kernel, dim3(unsigned(blocks)), dim3(unsigned(threads_per_block)), 0, nullptr,
                          static_cast<const float*>(d_x.data()), d_partials.data(), int(n)),
             "block_sum_kernel (pass 1)");
  check_cuda(simt::launch(block_sum_kernel, dim3(1), dim3(unsigned(threads_per_block)), 0, nullptr,
                          static_cast<const float*>(d_partials.data()), d_sum.data(), blocks),
             "block_sum_kernel (pass 2)");
  check_cuda(cudaDeviceSynchronize(), "block_sum_kernel");
  d_sum.download(sum);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
