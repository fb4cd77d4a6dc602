// Warm-up W3 — a tiled transpose through shared memory. See ch02.h for the task.
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
  // One float of padding per row: a column of the tile spans the 32 shared-memory banks.
  [[maybe_unused]] __shared__ float tile[kTile][kTile + 1];
  // TODO(student): 1. read: col = blockIdx.x·32 + threadIdx.x; for i = threadIdx.y, +8, … < 32:
  // row = blockIdx.y·32 + i; if (row < rows && col < cols) tile[i][threadIdx.x] = in[row·cols + col].
  // __syncthreads().
  // 2. write: out_col = blockIdx.y·32 + threadIdx.x; for the same i: out_row = blockIdx.x·32 + i;
  // if (out_row < cols && out_col < rows) out[out_row·rows + out_col] = tile[threadIdx.x][i].
  // (roughly 12 lines)
}

}  // namespace

void transpose_tiled(const Tensor<float>& in, Tensor<float>& out) {
  require(in.rank() == 2, "in.shape", to_string(in.shape()), "must be [rows, cols]");
  const int64_t rows = in.dim(0), cols = in.dim(1);
  require(out.shape() == Shape{cols, rows}, "out.shape", to_string(out.shape()),
          "must be [cols, rows] = " + to_string(Shape{cols, rows}));
  if (rows == 0 || cols == 0) return;

  throw NotImplemented("transpose_tiled");  // TODO(student): delete this line once transpose_tiled_kernel is written

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
