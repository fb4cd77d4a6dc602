// Warm-up W1 — indexing: a 2-D grid-stride elementwise kernel: a straightforward answer.
// See exercises/02-gpu-prefill/ch02.h.
#include <algorithm>

#include "02-gpu-prefill/ch02.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kBlockX = 32;  // threads along a row: one warp, 32 consecutive columns
constexpr int kBlockY = 8;   // rows per block
constexpr int kMaxGrid = 4;  // blocks per grid dimension (a real launch: a few waves of the SMs)

// out[r][c] = row_scale[r] · x[r][c] + col_bias[c] over a [rows, cols] row-major matrix.
// Thread (x, y) of block (bx, by) starts at row by·8 + y, column bx·32 + x, and strides by the
// whole grid in each dimension until it passes the end.
__global__ void scale_add_2d_kernel(const float* x, const float* row_scale, const float* col_bias, float* out,
                                    int rows, int cols) {
  const int row_stride = gridDim.y * blockDim.y, col_stride = gridDim.x * blockDim.x;
  for (int r = blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += row_stride) {  // the bounds check
    const float scale = row_scale[r];
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += col_stride)  // is the loop's condition
      out[size_t(r) * cols + c] = scale * x[size_t(r) * cols + c] + col_bias[c];
  }
}

}  // namespace

void scale_add_2d(const Tensor<float>& x, const Tensor<float>& row_scale, const Tensor<float>& col_bias,
                  Tensor<float>& out) {
  require(x.rank() == 2, "x.shape", to_string(x.shape()), "must be [rows, cols]");
  const int64_t rows = x.dim(0), cols = x.dim(1);
  require(row_scale.shape() == Shape{rows}, "row_scale.shape", to_string(row_scale.shape()),
          "must be [rows] = [" + std::to_string(rows) + "]");
  require(col_bias.shape() == Shape{cols}, "col_bias.shape", to_string(col_bias.shape()),
          "must be [cols] = [" + std::to_string(cols) + "]");
  require(out.shape() == x.shape(), "out.shape", to_string(out.shape()), "must equal x.shape " + to_string(x.shape()));
  if (rows == 0 || cols == 0) return;

  const DeviceBuffer<float> d_x(x), d_scale(row_scale), d_bias(col_bias);
  auto d_out = DeviceBuffer<float>::poisoned(out.size());
  const dim3 block(kBlockX, kBlockY);
  const dim3 grid(unsigned(std::min(blocks_for(cols, kBlockX), kMaxGrid)),
                  unsigned(std::min(blocks_for(rows, kBlockY), kMaxGrid)));
  check_cuda(simt::launch(scale_add_2d_kernel, grid, block, 0, nullptr, static_cast<const float*>(d_x.data()),
                          static_cast<const float*>(d_scale.data()), static_cast<const float*>(d_bias.data()),
                          d_out.data(), int(rows), int(cols)),
             "scale_add_2d_kernel");
  check_cuda(cudaDeviceSynchronize(), "scale_add_2d_kernel");
  d_out.download(out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
