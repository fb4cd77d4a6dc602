// Exercise 8.4 — a quantized GEMV, y = W·x with Q8_0 weights and activations: a straightforward
// answer, one warp per output row, int8 block sums with __dp4a. See
// exercises/08-real-model/ch08.h.
#include <cstdint>
#include <span>
#include <string>

#include "08-real-model/ch08.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

using inferlab::student::BlockQ8_0;

constexpr int kWarpSize = 32;
constexpr int kWordsPerBlock = 32 / 4;  // a block's 32 codes as 8 ints of 4 codes

// The sum of @p value over the 32 lanes of the calling warp; every lane gets it. Every lane of
// the warp must call it.
[[maybe_unused]] __device__ float warp_sum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// The float value of fp16 @p bits.
[[maybe_unused]] __device__ float fp16_to_float(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

// Codes 4k … 4k + 3 of @p qs as one int (code 4k in the low byte), for __dp4a. A block's codes sit
// 2 bytes into a 34-byte block, so they are only 2-byte aligned: two 16-bit loads, never one
// 4-byte load (a GPU faults on a misaligned address).
[[maybe_unused]] __device__ int packed_codes(const int8_t* qs, int k) {
  const uint16_t* halves = reinterpret_cast<const uint16_t*>(qs);
  return int(uint32_t(halves[2 * k]) | (uint32_t(halves[2 * k + 1]) << 16));
}

// Exercise 8.4a: the exact Σ_{j<32} w.qs[j]·x.qs[j] of one pair of blocks.
__device__ int block_dot_q8_0(const BlockQ8_0& w, const BlockQ8_0& x) {
  int sum = 0;  // exact: |sum| ≤ 32 · 128 · 128
  for (int k = 0; k < kWordsPerBlock; ++k) sum = __dp4a(packed_codes(w.qs, k), packed_codes(x.qs, k), sum);
  return sum;
}

// Exercise 8.4b: y[row] = Σ_b d_w[row][b]·d_x[b]·block_dot_q8_0(w[row·blocks + b], x[b]) for the
// row of each warp: warp r of block i owns row i·(blockDim.x / 32) + r.
__global__ void gemv_q8_0_kernel(const BlockQ8_0* w, const BlockQ8_0* x, float* y, int out_features, int blocks) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * (blockDim.x / kWarpSize) + warp;
  if (row >= out_features) return;  // the whole warp: a row is warp-uniform, so no lane misses warp_sum
  const BlockQ8_0* w_row = w + size_t(row) * size_t(blocks);
  float acc = 0.0f;
  for (int b = lane; b < blocks; b += kWarpSize) {
    const float scale = fp16_to_float(w_row[b].d) * fp16_to_float(x[b].d);  // exact: fp16 × fp16
    acc = fmaf(scale, float(block_dot_q8_0(w_row[b], x[b])), acc);
  }
  acc = warp_sum(acc);
  if (lane == 0) y[row] = acc;
}

}  // namespace

void gemv_q8_0(std::span<const BlockQ8_0> w, int64_t out_features, std::span<const BlockQ8_0> x, Tensor<float>& y,
               int rows_per_block) {
  // ---- given: the checks and the launcher ----
  require(!x.empty(), "x.size()", x.size(), "must be ≥ 1 block (in_features = 32 · x.size())");
  require(out_features >= 1 && out_features <= (int64_t(1) << 31) - 1, "out_features", out_features,
          "must be in 1 … 2^31 − 1");
  require(x.size() <= size_t(1) << 30, "x.size()", x.size(), "must be ≤ 2^30 blocks (an int counts them)");
  require(w.size() == size_t(out_features) * x.size(), "w.size()", w.size(),
          "must be out_features · x.size() = " + std::to_string(size_t(out_features) * x.size()) +
              " blocks (row o at w[o · x.size()])");
  require(y.rank() == 1 && y.dim(0) == out_features, "y.shape", to_string(y.shape()),
          "must be [out_features = " + std::to_string(out_features) + "]");
  require(rows_per_block >= 1 && rows_per_block <= 32, "rows_per_block", rows_per_block,
          "must be in 1 … 32 (a block of 32 · rows_per_block ≤ 1024 threads)");

  const DeviceBuffer<BlockQ8_0> d_w(w), d_x(x);
  auto d_y = DeviceBuffer<float>::poisoned(size_t(out_features));  // NaN: an unwritten row shows
  const int grid = blocks_for(out_features, rows_per_block);
  check_cuda(simt::launch(gemv_q8_0_kernel, dim3(unsigned(grid)), dim3(unsigned(kWarpSize * rows_per_block)), 0,
                          nullptr, static_cast<const BlockQ8_0*>(d_w.data()), static_cast<const BlockQ8_0*>(d_x.data()),
                          d_y.data(), int(out_features), int(x.size())),
             "gemv_q8_0_kernel");
  check_cuda(cudaDeviceSynchronize(), "gemv_q8_0_kernel");
  d_y.download(y);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
