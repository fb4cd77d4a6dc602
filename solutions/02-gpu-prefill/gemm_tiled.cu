// Exercise 2.3 — tiled matrix product C = A·B with shared-memory tiles: a straightforward answer.
// See exercises/02-gpu-prefill/ch02.h.
#include "02-gpu-prefill/ch02.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kTile = 16;  // the block is kTile × kTile threads; the tiles are kTile × kTile floats

// c[row][col] = Σ_t a[row][t] · b[t][col] for a [m, k], b [k, n], c [m, n], row-major.
// Thread (x, y) of block (bx, by) owns row = by·16 + y and col = bx·16 + x.
__global__ void gemm_tiled_kernel(const float* a, const float* b, float* c, int m, int n, int k) {
  // No padding needed: in the inner loop the threads of a warp read one row of b_tile (16
  // consecutive banks) and one element of a_tile per y (a broadcast), so no two of them collide
  // on a shared-memory bank.
  __shared__ float a_tile[kTile][kTile];
  __shared__ float b_tile[kTile][kTile];
  const int x = threadIdx.x, y = threadIdx.y;
  const int row = blockIdx.y * kTile + y, col = blockIdx.x * kTile + x;
  float sum = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    // One element of each tile per thread; outside a or b, 0 adds nothing to the sum.
    a_tile[y][x] = (row < m && k0 + x < k) ? a[size_t(row) * k + k0 + x] : 0.0f;
    b_tile[y][x] = (k0 + y < k && col < n) ? b[size_t(k0 + y) * n + col] : 0.0f;
    __syncthreads();  // both tiles are complete before any thread reads them
    for (int t = 0; t < kTile; ++t) sum += a_tile[y][t] * b_tile[t][x];
    __syncthreads();  // every thread is done reading before the next step overwrites the tiles
  }
  if (row < m && col < n) c[size_t(row) * n + col] = sum;
}

}  // namespace

void gemm_tiled(const Tensor<float>& a, const Tensor<float>& b, Tensor<float>& c) {
  require(a.rank() == 2, "a.shape", to_string(a.shape()), "must be [M, K]");
  require(b.rank() == 2 && b.dim(0) == a.dim(1), "b.shape", to_string(b.shape()),
          "must be [K, N] with K = a.shape[1] = " + std::to_string(a.dim(1)));
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  require(c.shape() == Shape{m, n}, "c.shape", to_string(c.shape()), "must be [M, N] = " + to_string(Shape{m, n}));
  require(m > 0 && n > 0 && k > 0, "M·N·K", m * n * k, "every dimension must be ≥ 1");

  const DeviceBuffer<float> d_a(a), d_b(b);
  auto d_c = DeviceBuffer<float>::poisoned(c.size());
  const dim3 grid(blocks_for(n, kTile), blocks_for(m, kTile));
  check_cuda(
      simt::launch(gemm_tiled_kernel, grid, dim3(kTile, kTile), 0, nullptr, static_cast<const float*>(d_a.data()),
                   static_cast<const float*>(d_b.data()), d_c.data(), int(m), int(n), int(k)),
      "gemm_tiled_kernel");
  check_cuda(cudaDeviceSynchronize(), "gemm_tiled_kernel");
  d_c.download(c);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
