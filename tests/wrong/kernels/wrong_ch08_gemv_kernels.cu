// Chapter-08 wrong fixtures (see wrong_ch08_gemv_kernels.h): exercise 8.4's GEMV, one warp per
// output row, lane l taking blocks l, l + 32, …, 8 __dp4a a block, a warp shuffle sum. Simple on
// purpose: the mistakes are the point.
#include "tests/wrong/kernels/wrong_ch08_gemv_kernels.h"

#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch08 {

namespace {

using quant::BlockQ8_0;

__device__ int codes4(const int8_t* qs, int k) {  // two 16-bit loads: the codes are 2-byte aligned
  const uint16_t* h = reinterpret_cast<const uint16_t*>(qs);
  return int(uint32_t(h[2 * k]) | (uint32_t(h[2 * k + 1]) << 16));
}

template <GemvFixture kFixture>
__global__ void gemv_warp(const BlockQ8_0* w, const BlockQ8_0* x, float* y, int out_features, int blocks) {
  const int lane = threadIdx.x % 32, row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= out_features) return;
  const BlockQ8_0* w_row = w + size_t(row) * size_t(blocks);
  const int end = kFixture == GemvFixture::lanes_skip_tail && blocks >= 32 ? blocks / 32 * 32 : blocks;
  float acc = 0.0f;
  for (int b = lane; b < end; b += 32) {
    int sum = 0;
    for (int k = 0; k < 8; ++k) sum = __dp4a(codes4(w_row[b].qs, k), codes4(x[b].qs, k), sum);
    const float dw = __half2float(__ushort_as_half(w_row[b].d)), dx = __half2float(__ushort_as_half(x[b].d));
    acc = fmaf(kFixture == GemvFixture::no_activation_scale ? dw : dw * dx, float(sum), acc);
  }
  if constexpr (kFixture == GemvFixture::unsynchronized_atomics) {
    if (lane == 0) y[row] = 0.0f;  // no __syncwarp: the other lanes may have added already
    atomicAdd(&y[row], acc);
  } else {
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
    if (lane == 0) y[row] = acc;
  }
}

template <GemvFixture kFixture>
void launch_gemv(const BlockQ8_0* w, const BlockQ8_0* x, float* y, int out_features, int blocks, int rows_per_block) {
  const int grid = kFixture == GemvFixture::grid_rounds_down ? out_features / rows_per_block
                                                             : (out_features + rows_per_block - 1) / rows_per_block;
  if (grid == 0) return;  // a grid of nothing: nothing is written
  check_cuda(simt::launch(gemv_warp<kFixture>, dim3(unsigned(grid)), dim3(unsigned(32 * rows_per_block)), 0, nullptr, w,
                          x, y, out_features, blocks),
             "gemv_warp");
}

}  // namespace

void gemv(GemvFixture fixture, std::span<const BlockQ8_0> w, int64_t out_features, std::span<const BlockQ8_0> x,
          Tensor<float>& y, int rows_per_block) {
  const DeviceBuffer<BlockQ8_0> d_w(w), d_x(x);
  auto d_y = DeviceBuffer<float>::poisoned(size_t(out_features));
  const BlockQ8_0* pw = d_w.data();
  const BlockQ8_0* px = d_x.data();
  const int out = int(out_features), blocks = int(x.size());
  switch (fixture) {
    case GemvFixture::correct:
      launch_gemv<GemvFixture::correct>(pw, px, d_y.data(), out, blocks, rows_per_block);
      break;
    case GemvFixture::grid_rounds_down:
      launch_gemv<GemvFixture::grid_rounds_down>(pw, px, d_y.data(), out, blocks, rows_per_block);
      break;
    case GemvFixture::lanes_skip_tail:
      launch_gemv<GemvFixture::lanes_skip_tail>(pw, px, d_y.data(), out, blocks, rows_per_block);
      break;
    case GemvFixture::no_activation_scale:
      launch_gemv<GemvFixture::no_activation_scale>(pw, px, d_y.data(), out, blocks, rows_per_block);
      break;
    case GemvFixture::unsynchronized_atomics:
      launch_gemv<GemvFixture::unsynchronized_atomics>(pw, px, d_y.data(), out, blocks, rows_per_block);
      break;
  }
  check_cuda(cudaDeviceSynchronize(), "gemv_warp");
  d_y.download(y);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch08
