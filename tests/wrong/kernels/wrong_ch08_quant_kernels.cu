// Chapter-08 wrong fixtures (see wrong_ch08_quant_kernels.h). Simple on purpose: the weight codes
// read byte by byte, one plain integer loop per block, the mistakes are the point. The activation
// rows are quantized by the real device quantizer, so every difference is the matmul's.
#include "tests/wrong/kernels/wrong_ch08_quant_kernels.h"

#include "kernels/quant/block_quant.h"
#include "kernels/quant/cuda_quant_matmul.cuh"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch08 {

namespace {

using quant::GgmlType;

__device__ inline float half_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | p[1] << 8)));
}

// Code j of a weight block (Q4_0 centred on 8), in ggml's nibble order or, for adjacent_nibbles,
// in pairs.
template <QuantFixture kFixture>
__device__ int weight_code(GgmlType type, const uint8_t* block, int j) {
  if (type == GgmlType::q8_0) return static_cast<int8_t>(block[2 + j]);
  const uint8_t* qs = block + (type == GgmlType::q4_1 ? 4 : 2);
  int code;
  if constexpr (kFixture == QuantFixture::adjacent_nibbles)
    code = j % 2 == 0 ? qs[j / 2] & 15 : qs[j / 2] >> 4;
  else
    code = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
  return type == GgmlType::q4_0 ? code - 8 : code;
}

// One block's terms added to acc: fma(d_w·d_x, Σ, acc), then fma(m_w, s_x, acc) for Q4_1.
template <QuantFixture kFixture>
__device__ float add_block(GgmlType type, const uint8_t* wb, const uint8_t* xb, float acc) {
  const int x_codes = type == GgmlType::q4_1 ? 4 : 2;  // Q8_1 activations carry s after d
  int sum = 0;
  for (int j = 0; j < 32; ++j) sum += weight_code<kFixture>(type, wb, j) * static_cast<int8_t>(xb[x_codes + j]);
  acc = fmaf(half_at(wb) * half_at(xb), float(sum), acc);
  if (type == GgmlType::q4_1 && kFixture != QuantFixture::no_min_term) acc = fmaf(half_at(wb + 2), half_at(xb + 2), acc);
  return acc;
}

template <QuantFixture kFixture>
__global__ void thread_per_output(GgmlType type, const uint8_t* w, const uint8_t* x, int rows, int out, int blocks,
                                  int w_block, int x_block, float* y) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= int64_t(rows) * out) return;
  const int64_t r = e / out, o = e % out;
  float acc = 0.0f;
  for (int b = 0; b < blocks; ++b)
    acc = add_block<kFixture>(type, w + (o * blocks + b) * w_block, x + (r * blocks + b) * x_block, acc);
  y[e] = acc;
}

__global__ void warp_per_output(GgmlType type, const uint8_t* w, const uint8_t* x, int rows, int out, int blocks,
                                int w_block, int x_block, float* y) {
  const int64_t e = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (e >= int64_t(rows) * out) return;  // the whole warp
  const int64_t r = e / out, o = e % out;
  float partial = 0.0f;
  for (int b = lane; b < blocks; b += 32)
    partial = add_block<QuantFixture::correct>(type, w + (o * blocks + b) * w_block, x + (r * blocks + b) * x_block,
                                               partial);
  for (int offset = 16; offset > 0; offset /= 2) partial += __shfl_xor_sync(0xffffffffu, partial, offset);
  if (lane == 0) y[e] = partial;
}

}  // namespace

void quant_matmul(QuantFixture fixture, const Tensor<float>& x, const quant::BlockMatrix& w, Tensor<float>& y) {
  const int64_t rows = x.dim(0), blocks = w.in / 32;
  const GgmlType xt = quant::activation_type(w.type);
  const DeviceBuffer<uint8_t> d_w(w.bytes);
  const DeviceBuffer<float> d_x(x);
  DeviceBuffer<uint8_t> d_xq(size_t(rows * quant::row_bytes(xt, w.in)));
  auto d_y = DeviceBuffer<float>::poisoned(size_t(rows * w.out));
  quantize_rows_device(xt, d_x.data(), rows, w.in, d_xq.data());
  const int wb = int(quant::block_bytes(w.type)), xb = int(quant::block_bytes(xt));
  const int64_t threads = fixture == QuantFixture::lanes_over_blocks ? rows * w.out * 32 : rows * w.out;
  const dim3 grid(unsigned((threads + 127) / 128)), block(128);
  const auto args = [&](auto kernel) {
    return simt::launch(kernel, grid, block, 0, nullptr, w.type, d_w.data(), d_xq.data(), int(rows), int(w.out),
                        int(blocks), wb, xb, d_y.data());
  };
  switch (fixture) {
    case QuantFixture::correct:
      check_cuda(args(thread_per_output<QuantFixture::correct>), "wrong_ch08 correct");
      break;
    case QuantFixture::lanes_over_blocks:
      check_cuda(args(warp_per_output), "wrong_ch08 lanes_over_blocks");
      break;
    case QuantFixture::no_min_term:
      check_cuda(args(thread_per_output<QuantFixture::no_min_term>), "wrong_ch08 no_min_term");
      break;
    case QuantFixture::adjacent_nibbles:
      check_cuda(args(thread_per_output<QuantFixture::adjacent_nibbles>), "wrong_ch08 adjacent_nibbles");
      break;
  }
  check_cuda(cudaDeviceSynchronize(), "wrong_ch08::quant_matmul");
  d_y.download(y);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch08
