// Deliberately wrong kernels: the emulator (or the schedule helper, or ASan/UBSan) must catch
// each one with a message naming the kernel, the block, the thread and the source line.
#include "simt_test_kernels.h"

namespace inferlab::INFERLAB_BACKEND_NS::simt_tests {

constexpr int kThreads = 64;

__global__ void missing_barrier_after_load_kernel(const float* in, float* out, int count) {
  __shared__ float tile[kThreads];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < count ? in[i] : 0.0f;
  // BUG: no __syncthreads() here: the neighbour may not have written its element yet.
  if (i < count) out[i] = tile[(threadIdx.x + 1) % kThreads];
}

cudaError_t missing_barrier_after_load(const float* in, float* out, int count) {
  return simt::launch(missing_barrier_after_load_kernel, (count + kThreads - 1) / kThreads, kThreads, 0, nullptr, in,
                      out, count);
}

constexpr int kTile = 16;

__global__ void matmul_missing_second_barrier_kernel(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float a_tile[kTile][kTile];
  __shared__ float b_tile[kTile][kTile + 1];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    a_tile[threadIdx.y][threadIdx.x] =
        row < m && k0 + static_cast<int>(threadIdx.x) < k ? a[row * k + k0 + threadIdx.x] : 0.0f;
    b_tile[threadIdx.y][threadIdx.x] =
        col < n && k0 + static_cast<int>(threadIdx.y) < k ? b[(k0 + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();  // tiles loaded
    for (int i = 0; i < kTile; ++i) acc += a_tile[threadIdx.y][i] * b_tile[i][threadIdx.x];
    // BUG: no __syncthreads() here: a fast thread overwrites the tiles while others still read.
  }
  if (row < m && col < n) c[row * n + col] = acc;
}

cudaError_t matmul_missing_second_barrier(const float* a, const float* b, float* c, int m, int n, int k) {
  const dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  return simt::launch(matmul_missing_second_barrier_kernel, grid, dim3(kTile, kTile), 0, nullptr, a, b, c, m, n, k);
}

__global__ void block_sums_unsynced_tail_kernel(const float* values, int count, float* partial) {
  __shared__ float sums[128];
  float mine = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) mine += values[i];
  sums[threadIdx.x] = mine;
  __syncthreads();
  if (threadIdx.x < 64) sums[threadIdx.x] += sums[threadIdx.x + 64];
  __syncthreads();
  if (threadIdx.x < 32) {
    // BUG: the pre-Volta "warp-synchronous" tail: assumes the 32 lanes run in lockstep.
    sums[threadIdx.x] += sums[threadIdx.x + 32];
    sums[threadIdx.x] += sums[threadIdx.x + 16];
    sums[threadIdx.x] += sums[threadIdx.x + 8];
    sums[threadIdx.x] += sums[threadIdx.x + 4];
    sums[threadIdx.x] += sums[threadIdx.x + 2];
    sums[threadIdx.x] += sums[threadIdx.x + 1];
    if (threadIdx.x == 0) partial[blockIdx.x] = sums[0];
  }
}

cudaError_t block_sums_unsynced_tail(const float* values, int count, float* partial, int blocks) {
  return simt::launch(block_sums_unsynced_tail_kernel, blocks, 128, 0, nullptr, values, count, partial);
}

__global__ void barrier_in_branch_kernel(float* out) {
  if (threadIdx.x < 16) {
    out[threadIdx.x] = 1.0f;
    __syncthreads();  // BUG: only threads 0..15 get here
  } else {
    out[threadIdx.x] = 2.0f;
    __syncthreads();  // ... and threads 16..31 here: a different barrier
  }
}

cudaError_t barrier_in_branch(float* out) {
  return simt::launch(barrier_in_branch_kernel, 2, 32, 0, nullptr, out);
}

__global__ void barrier_after_early_exit_kernel(float* out) {
  if (threadIdx.x == 0) return;  // BUG: thread 0 leaves, the others wait for it below
  out[threadIdx.x] = 1.0f;
  __syncthreads();
}

cudaError_t barrier_after_early_exit(float* out) {
  return simt::launch(barrier_after_early_exit_kernel, 1, 32, 0, nullptr, out);
}

__global__ void shuffle_exited_lane_kernel(float* out) {
  if (threadIdx.x >= 16) return;  // lanes 16..31 exit
  // BUG: the full mask names lanes 16..31, which have exited.
  const float v = __shfl_down_sync(0xffffffffu, static_cast<float>(threadIdx.x), 1);
  out[threadIdx.x] = v;
}

cudaError_t shuffle_exited_lane(float* out) {
  return simt::launch(shuffle_exited_lane_kernel, 1, 32, 0, nullptr, out);
}

__global__ void out_of_bounds_write_kernel(float* out, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= count) out[i] = 1.0f;  // BUG: <= writes out[count]
}

cudaError_t out_of_bounds_write(float* out, int count) {
  return simt::launch(out_of_bounds_write_kernel, (count + 32) / 32, 32, 0, nullptr, out, count);
}

__global__ void static_shared_overflow_kernel(float* out) {
  __shared__ float tile[32];
  tile[threadIdx.x] = 1.0f;  // BUG: 33 threads, 32 elements
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x % 32];
}

cudaError_t static_shared_overflow(float* out) {
  return simt::launch(static_shared_overflow_kernel, 1, 33, 0, nullptr, out);
}

__global__ void shuffle_missing_lanes_kernel(float* out) {
  // BUG: with 33 threads, the second warp has one lane, but the mask names 32.
  out[threadIdx.x] = __shfl_sync(0xffffffffu, static_cast<float>(threadIdx.x), 0);
}

cudaError_t shuffle_missing_lanes(float* out) {
  return simt::launch(shuffle_missing_lanes_kernel, 1, 33, 0, nullptr, out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::simt_tests
