// Chapter-02 warm-up fixtures: the warm-up kernels written right once and wrong in the ways
// students get them wrong (see wrong_ch02_warmup_kernels.h). tests/wrong/wrong_ch02_warmup.cpp
// runs them through the checks that grade the warm-ups and expects every mistake to be rejected.
// One kernel per mistake, so that a report names the mistake.
#include "tests/wrong/kernels/wrong_ch02_warmup_kernels.h"

#include <algorithm>

#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch02_warmup {

namespace {

constexpr unsigned kFullMask = 0xffffffffu;

// ---- W1: scale and add ------------------------------------------------------------------------

__global__ void scale_add_grid_stride(const float* x, const float* row_scale, const float* col_bias, float* out,
                                      int rows, int cols) {
  for (int r = blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += gridDim.y * blockDim.y)
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x)
      out[size_t(r) * cols + c] = row_scale[r] * x[size_t(r) * cols + c] + col_bias[c];
}

__global__ void scale_add_no_bounds_check(const float* x, const float* row_scale, const float* col_bias, float* out,
                                          int rows, int cols) {
  const int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  (void)rows;  // the mistake: r and c are never compared with rows and cols
  out[size_t(r) * cols + c] = row_scale[r] * x[size_t(r) * cols + c] + col_bias[c];
}

__global__ void scale_add_no_grid_stride(const float* x, const float* row_scale, const float* col_bias, float* out,
                                         int rows, int cols) {
  const int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows && c < cols) out[size_t(r) * cols + c] = row_scale[r] * x[size_t(r) * cols + c] + col_bias[c];
}

// ---- W2: block sum ----------------------------------------------------------------------------

template <SumFixture kFixture>
__global__ void block_sum(const float* in, float* out, int n) {
  __shared__ float partial[1024];
  const int t = threadIdx.x;
  float sum = 0.0f;
  for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) sum += in[i];
  partial[t] = sum;
  if (kFixture != SumFixture::missing_store_barrier) __syncthreads();
  const int last = kFixture == SumFixture::tree_stops_at_64 ? 64 : 32;
  for (int s = blockDim.x / 2; s >= last; s /= 2) {
    if (t < s) partial[t] += partial[t + s];
    if (kFixture != SumFixture::missing_tree_barrier) __syncthreads();
  }
  if (t < 32) {
    float value = partial[t];
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(kFullMask, value, offset);
    if (t == 0) out[blockIdx.x] = value;
  }
}

// ---- W3: tiled transpose ----------------------------------------------------------------------

template <TransposeFixture kFixture>
__global__ void transpose_tiled(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[32][33];
  const int x = threadIdx.x, y = threadIdx.y;
  const int col = blockIdx.x * 32 + x;
  for (int i = y; i < 32; i += 8) {
    const int row = blockIdx.y * 32 + i;
    if (kFixture == TransposeFixture::unchecked_read || (row < rows && col < cols))
      tile[i][x] = in[size_t(row) * cols + col];
  }
  if (kFixture != TransposeFixture::missing_barrier) __syncthreads();
  if (kFixture == TransposeFixture::blocks_unswapped) {
    for (int i = y; i < 32; i += 8) {
      const int out_row = blockIdx.y * 32 + i, out_col = blockIdx.x * 32 + x;
      if (out_row < cols && out_col < rows) out[size_t(out_row) * rows + out_col] = tile[x][i];
    }
    return;
  }
  const int out_col = blockIdx.y * 32 + x;
  for (int i = y; i < 32; i += 8) {
    const int out_row = blockIdx.x * 32 + i;
    if (out_row < cols && out_col < rows) out[size_t(out_row) * rows + out_col] = tile[x][i];
  }
}

template <SumFixture kFixture>
void run_sum(const Tensor<float>& x, Tensor<float>& sum, int threads) {
  const int64_t n = x.size();
  const int blocks = std::min(blocks_for(n, threads), 32);
  const DeviceBuffer<float> d_x(x);
  auto d_partials = DeviceBuffer<float>::poisoned(size_t(blocks));
  auto d_sum = DeviceBuffer<float>::poisoned(1);
  check_cuda(simt::launch(block_sum<kFixture>, dim3(unsigned(blocks)), dim3(unsigned(threads)), 0, nullptr,
                          static_cast<const float*>(d_x.data()), d_partials.data(), int(n)),
             "block_sum (pass 1)");
  check_cuda(simt::launch(block_sum<kFixture>, dim3(1), dim3(unsigned(threads)), 0, nullptr,
                          static_cast<const float*>(d_partials.data()), d_sum.data(), blocks),
             "block_sum (pass 2)");
  check_cuda(cudaDeviceSynchronize(), "block_sum");
  sum = Tensor<float>({1});
  d_sum.download(sum);
}

template <TransposeFixture kFixture>
void run_transpose(const Tensor<float>& in, Tensor<float>& out) {
  const int64_t rows = in.dim(0), cols = in.dim(1);
  const DeviceBuffer<float> d_in(in);
  auto d_out = DeviceBuffer<float>::poisoned(size_t(rows * cols));
  const dim3 grid(unsigned(blocks_for(cols, 32)), unsigned(blocks_for(rows, 32)));
  check_cuda(simt::launch(transpose_tiled<kFixture>, grid, dim3(32, 8), 0, nullptr,
                          static_cast<const float*>(d_in.data()), d_out.data(), int(rows), int(cols)),
             "transpose_tiled");
  check_cuda(cudaDeviceSynchronize(), "transpose_tiled");
  out = Tensor<float>({cols, rows});
  d_out.download(out);
}

}  // namespace

void scale_add(ScaleAddFixture fixture, const Tensor<float>& x, const Tensor<float>& row_scale,
               const Tensor<float>& col_bias, Tensor<float>& out) {
  const int64_t rows = x.dim(0), cols = x.dim(1);
  const DeviceBuffer<float> d_x(x), d_scale(row_scale), d_bias(col_bias);
  auto d_out = DeviceBuffer<float>::poisoned(size_t(x.size()));
  const dim3 block(32, 8);
  const dim3 full_grid(unsigned(blocks_for(cols, 32)), unsigned(blocks_for(rows, 8)));
  const dim3 capped_grid(unsigned(std::min(blocks_for(cols, 32), 4)), unsigned(std::min(blocks_for(rows, 8), 4)));
  const auto* px = static_cast<const float*>(d_x.data());
  const auto* ps = static_cast<const float*>(d_scale.data());
  const auto* pb = static_cast<const float*>(d_bias.data());
  cudaError_t status = cudaSuccess;
  switch (fixture) {
    case ScaleAddFixture::correct:
      status = simt::launch(scale_add_grid_stride, capped_grid, block, 0, nullptr, px, ps, pb, d_out.data(), int(rows),
                            int(cols));
      break;
    case ScaleAddFixture::no_bounds_check:
      status = simt::launch(scale_add_no_bounds_check, full_grid, block, 0, nullptr, px, ps, pb, d_out.data(),
                            int(rows), int(cols));
      break;
    case ScaleAddFixture::no_grid_stride:
      status = simt::launch(scale_add_no_grid_stride, capped_grid, block, 0, nullptr, px, ps, pb, d_out.data(),
                            int(rows), int(cols));
      break;
  }
  check_cuda(status, "scale_add");
  check_cuda(cudaDeviceSynchronize(), "scale_add");
  out = Tensor<float>({rows, cols});
  d_out.download(out);
}

void vector_sum(SumFixture fixture, const Tensor<float>& x, Tensor<float>& sum, int threads_per_block) {
  switch (fixture) {
    case SumFixture::correct: return run_sum<SumFixture::correct>(x, sum, threads_per_block);
    case SumFixture::missing_tree_barrier: return run_sum<SumFixture::missing_tree_barrier>(x, sum, threads_per_block);
    case SumFixture::missing_store_barrier:
      return run_sum<SumFixture::missing_store_barrier>(x, sum, threads_per_block);
    case SumFixture::tree_stops_at_64: return run_sum<SumFixture::tree_stops_at_64>(x, sum, threads_per_block);
  }
}

void transpose(TransposeFixture fixture, const Tensor<float>& in, Tensor<float>& out) {
  switch (fixture) {
    case TransposeFixture::correct: return run_transpose<TransposeFixture::correct>(in, out);
    case TransposeFixture::missing_barrier: return run_transpose<TransposeFixture::missing_barrier>(in, out);
    case TransposeFixture::unchecked_read: return run_transpose<TransposeFixture::unchecked_read>(in, out);
    case TransposeFixture::blocks_unswapped: return run_transpose<TransposeFixture::blocks_unswapped>(in, out);
  }
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch02_warmup
