// The Llama layers on the device (cuda_layers.h) — chapter 07's model on the sim and cuda
// backends. Four small pieces; each host entry point checks its arguments as the CPU function
// does, uploads, launches, waits and downloads.
//
// linear_cuda: y = x · wᵀ by cublasSgemm. cuBLAS is column-major: a row-major [r, c] matrix is,
// byte for byte, a column-major [c, r] one — its transpose. So the row-major y [rows, out] is
// the column-major yᵀ [out, rows] (leading dimension out), and we ask cuBLAS for
//     yᵀ = w · xᵀ       (m = out, n = rows, k = in)
// where w [out, in] row-major is column-major [in, out] (ld in): op T gives w itself; x [rows,
// in] row-major is column-major [in, rows] (ld in) = xᵀ already: op N. No copy is transposed.
// FLOPs 2·rows·out·in; the weights are read once per call (decode: AI ≈ rows / 2 per fp32 weight).
//
// rms_norm_cuda: grid (rows), block 128 — one block per row: each thread sums x² over the
// columns c ≡ threadIdx.x (mod 128) (consecutive threads read consecutive floats: coalesced),
// block_reduce (primitives/softmax_warp.cuh: warp shuffles, then one shared slot per warp) gives
// every thread Σx², then each thread writes its columns y = w ⊙ (x / √(Σx²/dim + ε)). A row is
// one block whatever the batch, so a row's result never depends on the others.
//
// rope_cuda: grid ⌈rows·heads·head_dim/2 / 256⌉, block 256 — one thread per rotated pair
// (row, head, i): it reads (cos, sin) of the row's position from the table and rotates
// x[2i], x[2i+1] of that head (adjacent pairs; half-split: x[i], x[i + head_dim/2]).
// Elementwise: no shared memory, no barrier.
//
// swiglu_cuda: grid ⌈rows·hidden / 256⌉, block 256 — one thread per output element:
// out[r][j] = silu(gate_up[r][j]) · gate_up[r][hidden + j].
//
// Each entry point is two levels: a device-level function (cuda_layers.cuh: device pointers in
// and out, queued without waiting — what the resident model runner chains) and the host-tensor
// wrapper of cuda_layers.h around it. The resident runner's glue kernels live here too, one
// thread per element: the residual add, a row gather (the embedding lookup, the logit tokens)
// and a column copy (the queries out of a qkv row).
#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <vector>

#include "common/ceil_div.h"
#include "common/check.h"
#include "kernels/layers/cuda_layers.cuh"
#include "kernels/layers/cuda_layers.h"
#include "kernels/primitives/cublas_handle.cuh"
#include "kernels/primitives/softmax_warp.cuh"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

constexpr int kRowThreads = 128;          // rms_norm: threads per row (a multiple of 32: block_reduce)
constexpr int kElementwiseThreads = 256;  // rope, swiglu: threads per block

// ---- kernels ----

__global__ void rms_norm_kernel(const float* x, const float* weight, float eps, int dim, float* y) {
  __shared__ float slots[32];  // block_reduce: one partial sum per warp
  const float* in = x + size_t(blockIdx.x) * dim;
  float* out = y + size_t(blockIdx.x) * dim;
  float sum = 0.0f;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) sum += in[c] * in[c];
  sum = block_reduce<false>(sum, slots);  // every thread gets Σx² of the row
  const float inv = 1.0f / sqrtf(sum / float(dim) + eps);
  for (int c = threadIdx.x; c < dim; c += blockDim.x) out[c] = weight[c] * (inv * in[c]);
}

// x is [rows][row_stride]; pair i of head h of row r is thread (r·heads + h)·half + i. Its two
// elements: 2i and 2i + 1 (adjacent), or i and i + half (half-split).
__global__ void rope_kernel(float* x, int64_t rows, int64_t row_stride, int heads, int head_dim,
                            const int64_t* positions, const float* cos_sin, bool half_split) {
  const int half = head_dim / 2;
  const int64_t pair = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (pair >= rows * heads * half) return;
  const int64_t r = pair / (int64_t(heads) * half);
  const int h = int(pair / half % heads), i = int(pair % half);
  const float* cs = cos_sin + (positions[r] * half + i) * 2;
  float* head = x + r * row_stride + int64_t(h) * head_dim;
  float* first = half_split ? head + i : head + 2 * i;
  float* second = half_split ? head + i + half : head + 2 * i + 1;
  const float c = cs[0], s = cs[1], a = *first, b = *second;
  *first = a * c - b * s;
  *second = a * s + b * c;
}

__global__ void swiglu_kernel(const float* gate_up, int64_t rows, int64_t hidden, float* out) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= rows * hidden) return;
  const int64_t r = e / hidden, j = e % hidden;
  const float a = gate_up[r * 2 * hidden + j];
  out[e] = a / (1.0f + expf(-a)) * gate_up[r * 2 * hidden + hidden + j];
}

__global__ void add_kernel(float* x, const float* y, int64_t count) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < count) x[e] += y[e];
}

// out[i][c] = table[rows[i]][c]: one thread per output element.
__global__ void gather_rows_kernel(const float* table, int64_t width, const int32_t* rows, int64_t count, float* out) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= count * width) return;
  out[e] = table[int64_t(rows[e / width]) * width + e % width];
}

__global__ void copy_columns_kernel(const float* in, int64_t in_stride, int64_t offset, int64_t rows, int64_t cols,
                                    float* out) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= rows * cols) return;
  out[e] = in[(e / cols) * in_stride + offset + e % cols];
}

// ---- host side ----

// A cuBLAS handle per host thread, created on first use (creating one costs milliseconds:
// cublas_handle.cuh) and destroyed when the thread ends. Per thread because a handle must not
// be used by two host threads at once.
cublasHandle_t layers_cublas() {
  thread_local const CublasHandle handle;
  return handle.get();
}

void require_int(int64_t value, const char* name) {
  require(value <= INT_MAX, name, value, "must fit in an int (cuBLAS and the launch take int sizes)");
}

// Number of blocks of @p per_block threads covering @p count threads (≤ grid.x's limit).
unsigned grid_for(int64_t count, int per_block, const char* what) {
  const int64_t blocks = ceil_div(count, per_block);
  require(blocks <= INT_MAX, what, count, "too many elements for one 1-D grid");
  return unsigned(blocks);
}

// Launches @p kernel over one thread per element of @p count elements (none when count is 0).
template <class Kernel, class... Args>
void launch_elementwise(Kernel kernel, int64_t count, const char* what, Args... args) {
  if (count == 0) return;
  check_cuda(simt::launch(kernel, dim3(grid_for(count, kElementwiseThreads, what)), dim3(kElementwiseThreads), 0,
                          nullptr, args...),
             what);
}

}  // namespace

// ---- device level (cuda_layers.cuh) ----

void linear_device(cublasHandle_t handle, const float* x, int64_t rows, const float* w, int64_t out, int64_t in,
                   float* y) {
  if (rows == 0 || out == 0) return;
  require_int(rows, "rows");
  require_int(out, "out");
  require_int(in, "in");
  const float one = 1.0f, zero = 0.0f;  // beta = 0: cuBLAS never reads y
  // Column-major yᵀ [out, rows] = w (stored as column-major [in, out]: op T) · xᵀ (stored as
  // column-major [in, rows]: op N). See the file comment.
  check_cublas(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(out), int(rows), int(in), &one, w, int(in), x, int(in),
                           &zero, y, int(out)),
               "cublasSgemm (linear)");
}

void rms_norm_device(const float* x, const float* weight, float eps, int64_t rows, int64_t dim, float* y) {
  if (rows == 0 || dim == 0) return;
  require_int(rows, "rows");
  require_int(dim, "dim");
  check_cuda(
      simt::launch(rms_norm_kernel, dim3(unsigned(rows)), dim3(kRowThreads), 0, nullptr, x, weight, eps, int(dim), y),
      "rms_norm_kernel");
}

void rope_device(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, const int64_t* positions,
                 const float* cos_sin, RopeStyle style) {
  require(head_dim > 0 && head_dim % 2 == 0, "head_dim", head_dim, "must be even and > 0 (RoPE rotates pairs)");
  require(heads >= 0 && row_stride >= heads * head_dim, "row_stride", row_stride,
          "must be ≥ heads · head_dim = " + std::to_string(heads * head_dim));
  require_int(heads, "heads");
  require_int(head_dim, "head_dim");
  launch_elementwise(rope_kernel, rows * heads * (head_dim / 2), "rope_kernel", x, rows, row_stride, int(heads),
                     int(head_dim), positions, cos_sin, style == RopeStyle::half_split);
}

void swiglu_device(const float* gate_up, int64_t rows, int64_t hidden, float* out) {
  launch_elementwise(swiglu_kernel, rows * hidden, "swiglu_kernel", gate_up, rows, hidden, out);
}

void add_device(float* x, const float* y, int64_t count) {
  launch_elementwise(add_kernel, count, "add_kernel", x, y, count);
}

void gather_rows_device(const float* table, int64_t width, const int32_t* rows, int64_t count, float* out) {
  launch_elementwise(gather_rows_kernel, count * width, "gather_rows_kernel", table, width, rows, count, out);
}

void copy_columns_device(const float* in, int64_t in_stride, int64_t offset, int64_t rows, int64_t cols, float* out) {
  require(offset >= 0 && cols >= 0 && offset + cols <= in_stride, "offset + cols", offset + cols,
          "must be ≤ in_stride = " + std::to_string(in_stride));
  launch_elementwise(copy_columns_kernel, rows * cols, "copy_columns_kernel", in, in_stride, offset, rows, cols, out);
}

// ---- host tensors (cuda_layers.h): check, upload, the device level, wait, download ----

void linear_cuda(const Tensor<float>& x, const Tensor<float>& w, Tensor<float>& y) {
  check_rank(x, 2, "x");
  check_rank(w, 2, "w");
  require(x.dim(1) == w.dim(1), "x.shape[1]", x.dim(1),
          "must equal the weights' input size w.shape[1] = " + std::to_string(w.dim(1)));
  check_shape(y, {x.dim(0), w.dim(0)}, "y");
  const int64_t rows = x.dim(0), out = w.dim(0), in = w.dim(1);
  if (rows == 0 || out == 0) return;
  const DeviceBuffer<float> x_device(x), w_device(w);
  auto y_device = DeviceBuffer<float>::poisoned(size_t(y.size()));
  linear_device(layers_cublas(), x_device.data(), rows, w_device.data(), out, in, y_device.data());
  check_cuda(cudaDeviceSynchronize(), "linear_cuda");
  y_device.download(y);
}

void rms_norm_cuda(const Tensor<float>& x, std::span<const float> weight, float eps, Tensor<float>& y) {
  check_rank(x, 2, "x");
  const int64_t rows = x.dim(0), dim = x.dim(1);
  require(int64_t(weight.size()) == dim, "weight.size()", weight.size(),
          "must equal x.shape[1] = " + std::to_string(dim));
  check_shape(y, x.shape(), "y");
  if (rows == 0 || dim == 0) return;
  const DeviceBuffer<float> x_device(x), weight_device(weight);
  auto y_device = DeviceBuffer<float>::poisoned(size_t(y.size()));
  rms_norm_device(x_device.data(), weight_device.data(), eps, rows, dim, y_device.data());
  check_cuda(cudaDeviceSynchronize(), "rms_norm_kernel");
  y_device.download(y);  // after every read of x: y may alias it
}

void rope_cuda(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim,
               std::span<const int64_t> positions, std::span<const float> cos_sin) {
  require(int64_t(positions.size()) == rows, "positions.size()", positions.size(),
          "must equal rows = " + std::to_string(rows));
  require(head_dim > 0 && head_dim % 2 == 0, "head_dim", head_dim, "must be even and > 0 (RoPE rotates pairs)");
  require(heads >= 0 && row_stride >= heads * head_dim, "row_stride", row_stride,
          "must be ≥ heads · head_dim = " + std::to_string(heads * head_dim));
  const int64_t half = head_dim / 2;
  int64_t max_position = -1;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t p = positions[size_t(r)];
    if (p < 0 || (p + 1) * half * 2 > int64_t(cos_sin.size()))  // the message is built only for a bad row
      require(false, "positions[" + std::to_string(r) + "]", p, "is outside the RoPE table");
    max_position = std::max(max_position, p);
  }
  if (rows == 0 || heads == 0) return;
  // The rows as the caller's memory holds them: the last one ends after its heads (the rest of a
  // longer row — a qkv row's K and V — may lie past the caller's buffer). Only the table's rows
  // up to the largest position go to the device.
  const size_t span = size_t((rows - 1) * row_stride + heads * head_dim);
  DeviceBuffer<float> x_device(span);
  x_device.upload(x);
  const DeviceBuffer<int64_t> positions_device(positions);
  DeviceBuffer<float> table_device(size_t((max_position + 1) * half * 2));
  table_device.upload(cos_sin.data());
  rope_device(x_device.data(), rows, row_stride, heads, head_dim, positions_device.data(), table_device.data(),
              RopeStyle::adjacent);
  check_cuda(cudaDeviceSynchronize(), "rope_kernel");
  x_device.download(x);
}

void swiglu_cuda(const Tensor<float>& gate_up, Tensor<float>& out) {
  check_rank(gate_up, 2, "gate_up");
  require(gate_up.dim(1) % 2 == 0, "gate_up.shape[1]", gate_up.dim(1), "must be 2·hidden (w1's and w3's outputs)");
  const int64_t rows = gate_up.dim(0), hidden = gate_up.dim(1) / 2;
  check_shape(out, {rows, hidden}, "out");
  if (rows == 0 || hidden == 0) return;
  const DeviceBuffer<float> gate_up_device(gate_up);
  auto out_device = DeviceBuffer<float>::poisoned(size_t(out.size()));
  swiglu_device(gate_up_device.data(), rows, hidden, out_device.data());
  check_cuda(cudaDeviceSynchronize(), "swiglu_kernel");
  out_device.download(out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
