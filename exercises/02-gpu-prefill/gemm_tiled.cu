// Exercise 2.3 — tiled matrix product C = A·B with shared-memory tiles. See ch02.h for the task.
#include "02-gpu-prefill/ch02.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kTile = 16;  // the block is kTile × kTile threads; the tiles are kTile × kTile floats

// c[row][col] = Σ_t a[row][t] · b[t][col] for a [m, k], b [k, n], c [m, n], row-major.
// Thread (x, y) of block (bx, by) owns row = by·16 + y and col = bx·16 + x.
__global__ void gemm_tiled_kernel(const float* a, const float* b, float* c, int m, int n, int k) {
  // TODO(student): declare two __shared__ float [kTile][kTile] tiles (conflict-free here: no padding
  // needed, see chapter 02's lesson, §3). For k0 = 0, 16, 32, … < k:
  // thread (x, y) loads a[row][k0 + x] into the A tile and b[k0 + y][col] into the B tile (0
  // where the element lies outside a or b); __syncthreads(); add the 16 products
  // a_tile[y][t] * b_tile[t][x] to its sum; __syncthreads(). Then store the sum if (row, col)
  // lies inside c. No early return: every thread must reach every barrier. (roughly 20 lines)
}

}  // namespace

void gemm_tiled(const Tensor<float>& a, const Tensor<float>& b, Tensor<float>& c) {
  require(a.rank() == 2, "a.shape", to_string(a.shape()), "must be [M, K]");
  require(b.rank() == 2 && b.dim(0) == a.dim(1), "b.shape", to_string(b.shape()),
          "must be [K, N] with K = a.shape[1] = " + std::to_string(a.dim(1)));
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  require(c.shape() == Shape{m, n}, "c.shape", to_string(c.shape()), "must be [M, N] = " + to_string(Shape{m, n}));
  require(m > 0 && n > 0 && k > 0, "M·N·K", m * n * k, "every dimension must be ≥ 1");

  throw NotImplemented("gemm_tiled");  // TODO(student): delete this line once gemm_tiled_kernel is written

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
