// Warm-up W3 — a tiled transpose through shared memory: a straightforward answer.
// See exercises/02-gpu-prefill/ch02.h.
#include "02-gpu-prefill/ch02.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kTile = 32;       // the block moves one kTile × kTile tile
constexpr int kBlockRows = 8;   // blockDim.y: each thread moves kTile / kBlockRows = 4 elements

// out[c][r] = in[r][c] for in [rows, cols] and out [cols, rows], row-major. Block (bx, by) moves
// the tile whose top-left element is in[by·32][bx·32].
__global__ void transpose_tiled_kernel(const float* in, float* out, int rows, int cols) {
  // One float of padding per row: the 32 elements of a tile column fall in 32 different
  // shared-memory banks (with [32][32] they would all sit in one bank: 32-way conflicts).
  __shared__ float tile[kTile][kTile + 1];
  const int x = threadIdx.x, y = threadIdx.y;
  // Read: consecutive threads read consecutive columns of one row of in (coalesced).
  const int col = blockIdx.x * kTile + x;
  for (int i = y; i < kTile; i += kBlockRows) {
    const int row = blockIdx.y * kTile + i;
    if (row < rows && col < cols) tile[i][x] = in[size_t(row) * cols + col];
  }
  __syncthreads();  // the whole tile is in shared memory before any thread reads a column of it
  // Write: the block indices swap; consecutive threads write consecutive columns of one row of
  // out (coalesced again) and read a column of the tile.
  const int out_col = blockIdx.y * kTile + x;  // a row index of in
  for (int i = y; i < kTile; i += kBlockRows) {
    const int out_row = blockIdx.x * kTile + i;  // a column index of in
    if (out_row < cols && out_col < rows) out[size_t(out_row) * rows + out_col] = tile[x][i];
  }
}

}  // namespace

void transpose_tiled(const Tensor<float>& in, Tensor<float>& out) {
  require(in.rank() == 2, "in.shape", to_string(in.shape()), "must be [rows, cols]");
  const int64_t rows = in.dim(0), cols = in.dim(1);
  require(out.shape() == Shape{cols, rows}, "out.shape", to_string(out.shape()),
          "must be [cols, rows] = " + to_string(Shape{cols, rows}));
  if (rows == 0 || cols == 0) return;

  const DeviceBuffer<float> d_in(in);
  auto d_out = DeviceBuffer<float>::poisoned(out.size());
  const dim3 grid(unsigned(blocks_for(cols, kTile)), unsigned(blocks_for(rows, kTile)));
  check_cuda(simt::launch(transpose_tiled_kernel, grid, dim3(kTile, kBlockRows), 0, nullptr,
                          static_cast<const float*>(d_in.data()), d_out.data(), int(rows), int(cols)),
             "transpose_tiled_kernel");
  check_cuda(cudaDeviceSynchronize(), "transpose_tiled_kernel");
  d_out.download(out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
