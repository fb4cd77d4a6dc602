// Chapter 11: the tiled quantized matmul on the device backends (kernels/quant/cuda_quant_matmul.cu's
// quant_gemm_tiled_kernel: 64 outputs × 16 rows a thread block, weight and activation chunks staged
// in shared memory) against chapter 08's per-row kernel and the CPU's scalar reference, bit for bit,
// on shapes that cut every tile (out 1, 63, 65, 130: a partial tile, one and a lane, two tiles and a
// tail; rows 2, 16, 17, 33; in 32, 160, 544: a partial 4-block chunk, one and a tail, four and a
// tail), outputs poisoned by the entry point; under every thread order on the emulator (a missing
// __syncthreads around the staged tiles fails here). Built for sim and cuda
// (tests/11-compute-roof/CMakeLists.txt); the cuda build skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/config.h"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/cuda_quant_matmul.h"
#include "kernels/quant/quant_matmul.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"
#include "tests/support/test_backend.h"

namespace inferlab {
namespace {

using quant::GgmlType;
using quant::QuantMatmulKernel;

#if defined(INFERLAB_TEST_BACKEND_CUDA) && INFERLAB_WITH_CUDA
namespace device = ::inferlab::cuda;
#else
namespace device = ::inferlab::sim;
#endif

std::vector<uint8_t> random_blocks(testing::SeededRng& rng, GgmlType type, int64_t out, int64_t in) {
  const Tensor<float> w = rng.normal_tensor({out, in});
  const int64_t rb = quant::row_bytes(type, in);
  std::vector<uint8_t> bytes(size_t(out * rb));
  for (int64_t o = 0; o < out; ++o)
    quant::quantize_row(type, std::span(w.data() + o * in, size_t(in)), std::span(bytes.data() + o * rb, size_t(rb)));
  return bytes;
}

TEST(QuantTiled, EqualsThePerRowKernelAndTheCpuBitForBit) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  for (const GgmlType type : {GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_1})
    for (const int64_t in : {32, 160, 544})
      for (const int64_t out : {1, 63, 65, 130})
        for (const int64_t rows : {2, 16, 17, 33}) {
          if (in == 544 && out == 130 && rows == 33 && type != GgmlType::q8_0) continue;  // the emulator's time
          const std::vector<uint8_t> bytes = random_blocks(rng, type, out, in);
          const quant::BlockMatrix m{type, out, in, bytes};
          const Tensor<float> x = rng.normal_tensor({rows, in});
          Tensor<float> want({rows, out}), tiled({rows, out}), per_row({rows, out});
          quant::quant_matmul_cpu(x, m, want, quant::QuantKernel::scalar);
          device::quant_matmul_cuda(x, m, tiled, QuantMatmulKernel::tiled);
          device::quant_matmul_cuda(x, m, per_row, QuantMatmulKernel::per_row);
          const std::string what = std::string(quant::to_string(type)) + " in " + std::to_string(in) + " out " +
                                   std::to_string(out) + " rows " + std::to_string(rows);
          ASSERT_EQ(std::memcmp(tiled.data(), want.data(), size_t(want.size()) * 4), 0) << "tiled != cpu scalar, " << what;
          ASSERT_EQ(std::memcmp(per_row.data(), want.data(), size_t(want.size()) * 4), 0) << "per_row != cpu, " << what;
        }
}

TEST(QuantTiled, OneRowAndTheAutomaticChoiceGiveTheSameBits) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  const int64_t out = 70, in = 96;
  const std::vector<uint8_t> bytes = random_blocks(rng, GgmlType::q4_1, out, in);
  const quant::BlockMatrix m{GgmlType::q4_1, out, in, bytes};
  for (const int64_t rows : {1, 5}) {
    const Tensor<float> x = rng.normal_tensor({rows, in});
    Tensor<float> a({rows, out}), b({rows, out});
    device::quant_matmul_cuda(x, m, a, QuantMatmulKernel::tiled);
    device::quant_matmul_cuda(x, m, b);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), size_t(a.size()) * 4), 0) << "rows " << rows;
  }
}

// Sim only (a GPU has one order per run): the two __syncthreads around the staged tiles hold under
// forward, reverse and shuffled thread orders.
TEST(QuantTiled, SameBitsUnderEveryThreadOrder) {
#if !defined(INFERLAB_TEST_BACKEND_SIM)
  GTEST_SKIP() << "thread orders are the emulator's";
#else
  testing::SeededRng rng;
  for (const GgmlType type : {GgmlType::q8_0, GgmlType::q4_1}) {
    const int64_t rows = 17, out = 65, in = 160;
    const std::vector<uint8_t> bytes = random_blocks(rng, type, out, in);
    const quant::BlockMatrix m{type, out, in, bytes};
    const Tensor<float> x = rng.normal_tensor({rows, in});
    EXPECT_TRUE(testing::host_same_under_schedules(
        [&](Tensor<float>& y) { sim::quant_matmul_cuda(x, m, y, QuantMatmulKernel::tiled); }, {rows, out}))
        << quant::to_string(type);
  }
#endif
}

}  // namespace
}  // namespace inferlab
