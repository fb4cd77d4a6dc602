// Chapter 11: the repacked weights (kernels/quant/packed_matrix.h) and the packed GEMM
// (packed_matmul.h) on every instruction set this CPU has, each against chapter 08's scalar
// reference bit for bit (quant_matmul.h's contract) — which tests/08-real-model checks against a
// float64 oracle — on odd shapes, poisoned outputs, extreme codes, and sub-batches (batch
// invariance); the dispatch's choices and its errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "common/half.h"
#include "common/tensor.h"
#include "kernels/layers/layers.h"
#include "kernels/layers/weight.h"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/packed_matmul.h"
#include "kernels/quant/quant_matmul.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using quant::GgmlType;
using quant::PackedKernel;
using testing::SeededRng;

const GgmlType kWeightTypes[] = {GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_1};

// A random [out, in] matrix quantized into GGUF's row-major blocks.
std::vector<uint8_t> random_blocks(SeededRng& rng, GgmlType type, int64_t out, int64_t in) {
  const Tensor<float> wf = rng.normal_tensor({out, in});
  const int64_t rb = quant::row_bytes(type, in);
  std::vector<uint8_t> bytes(size_t(out * rb));
  for (int64_t o = 0; o < out; ++o)
    quant::quantize_row(type, std::span(wf.data() + o * in, size_t(in)), std::span(bytes.data() + o * rb, size_t(rb)));
  return bytes;
}

// Code j of a GGUF block as stored (Q8_0: int8; Q4: the nibble).
int gguf_code(GgmlType type, const uint8_t* block, int j) {
  if (type == GgmlType::q8_0) return int8_t(block[2 + j]);
  const uint8_t* qs = block + (type == GgmlType::q4_1 ? 4 : 2);
  return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
}

uint16_t u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

TEST(PackedMatrix, HoldsEveryCodeAndScaleOfTheGgufRowsAndZeroPadding) {
  SeededRng rng;
  for (const GgmlType type : kWeightTypes)
    for (const int64_t out : {1, 15, 16, 17, 33})
      for (const int64_t in : {32, 96}) {
        const std::vector<uint8_t> bytes = random_blocks(rng, type, out, in);
        const quant::PackedMatrix p({type, out, in, bytes});
        ASSERT_EQ(p.groups(), (out + 15) / 16);
        ASSERT_EQ(int64_t(p.bytes().size()), p.groups() * (in / 32) * quant::packed_block_bytes(type));
        const int64_t rb = quant::row_bytes(type, in), bb = quant::block_bytes(type);
        for (int64_t o = 0; o < out; ++o)
          for (int64_t b = 0; b < in / 32; ++b) {
            const uint8_t* block = bytes.data() + o * rb + b * bb;
            ASSERT_EQ(p.scale_bits(o, b), u16(block)) << quant::to_string(type) << " row " << o << " block " << b;
            ASSERT_EQ(p.min_bits(o, b), type == GgmlType::q4_1 ? u16(block + 2) : 0);
            for (int j = 0; j < 32; ++j)
              ASSERT_EQ(p.code(o, b * 32 + j), gguf_code(type, block, j))
                  << quant::to_string(type) << " row " << o << " value " << b * 32 + j;
            // The layout itself, read from the bytes (not through code()): chunk j holds bytes
            // 4j … 4j + 3 of every output's codes, output o at 4·(o % 16); Q8_0's as q + 128.
            const uint8_t* packed = p.block(o / 16, b) + quant::packed_scale_bytes(type);
            const int64_t header = type == GgmlType::q8_0 ? 2 : type == GgmlType::q4_0 ? 2 : 4;
            const int64_t code_bytes = type == GgmlType::q8_0 ? 32 : 16;
            for (int64_t k = 0; k < code_bytes; ++k)
              ASSERT_EQ(packed[(k / 4) * 64 + 4 * (o % 16) + k % 4],
                        type == GgmlType::q8_0 ? uint8_t(block[header + k] ^ 0x80) : block[header + k])
                  << quant::to_string(type) << " row " << o << " code byte " << k;
          }
        // The padding rows of the last group: codes that decode to 0 and zero scales.
        for (int64_t o = out; o < p.groups() * 16; ++o)
          for (int64_t b = 0; b < in / 32; ++b) {
            ASSERT_EQ(p.scale_bits(o, b), 0);
            for (int j = 0; j < 32; ++j) ASSERT_EQ(p.code(o, b * 32 + j), 0) << "padding row " << o;
          }
      }
}

TEST(PackedMatrix, RejectsWhatItCannotPackNamingTheArgument) {
  std::vector<uint8_t> bytes(34 * 2);
  const auto message = [](const quant::BlockMatrix& m) {
    try {
      quant::PackedMatrix p(m);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({GgmlType::f32, 2, 32, bytes}).find("type"), std::string::npos);
  EXPECT_NE(message({GgmlType::q8_0, 2, 33, bytes}).find("w.in"), std::string::npos);
  EXPECT_NE(message({GgmlType::q8_0, 3, 32, bytes}).find("w.bytes.size()"), std::string::npos);
  EXPECT_EQ(quant::PackedMatrix({GgmlType::q8_0, 0, 32, {}}).bytes().size(), 0u);
}

// y of every available kernel against chapter 08's scalar reference, memcmp, outputs poisoned.
void expect_every_kernel_equals_reference(const Tensor<float>& x, const quant::BlockMatrix& m, const char* what) {
  Tensor<float> ref({x.dim(0), m.out});
  ref.poison();
  quant::quant_matmul_cpu(x, m, ref, quant::QuantKernel::scalar);
  const quant::PackedMatrix p(m);
  for (const PackedKernel k : quant::available_packed_kernels()) {
    Tensor<float> y({x.dim(0), m.out});
    y.poison();
    quant::packed_matmul_cpu(x, p, y, k);
    for (int64_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(std::memcmp(y.data() + i, ref.data() + i, 4), 0)
          << quant::to_string(k) << " (" << quant::instruction(k) << ") != chapter 08's scalar reference, "
          << quant::to_string(m.type) << " " << what << " rows " << x.dim(0) << " out " << m.out << " in " << m.in
          << ": element (" << i / m.out << ", " << i % m.out << ") is " << y.data()[i] << ", want " << ref.data()[i];
  }
}

TEST(PackedGemm, EveryKernelEqualsTheScalarReferenceBitForBitOnOddShapes) {
  SeededRng rng;
  // rows across the 4-row tiles (1 … 5, 7) and beyond; out across the 8- and 16-lane vectors and
  // the 2-vector panels (1, 9, 16, 17, 37, 70); in one block, 9 and 17 blocks.
  for (const GgmlType type : kWeightTypes)
    for (const int64_t in : {32, 32 * 9, 32 * 17})
      for (const int64_t out : {1, 9, 16, 17, 37, 70})
        for (const int64_t rows : {1, 2, 3, 4, 5, 7, 33}) {
          const std::vector<uint8_t> bytes = random_blocks(rng, type, out, in);
          Tensor<float> x = rng.normal_tensor({rows, in});
          // An outlier a row: its block's other codes become small (Q8 rounding of a wide range).
          for (int64_t r = 0; r < rows; ++r) x.data()[r * in + rng.integer(0, in - 1)] *= 50.0f;
          expect_every_kernel_equals_reference(x, {type, out, in, bytes}, "random");
        }
}

TEST(PackedGemm, ExtremeCodesNeitherOverflowNorSaturate) {
  // Q8_0 weights of −128 and 127 (−128 never comes out of ggml's quantizer but a file may hold it:
  // the AVX2 sign trick then multiplies 128 by 127) against activations of ±127: the largest
  // products each instruction sees, and the largest offset corrections (128·Σx).
  SeededRng rng;
  const int64_t out = 19, in = 32 * 3;
  for (const int sign : {1, -1}) {
    std::vector<uint8_t> bytes(size_t(out * quant::row_bytes(GgmlType::q8_0, in)));
    for (int64_t blk = 0; blk < out * in / 32; ++blk) {
      uint8_t* block = bytes.data() + blk * 34;
      const uint16_t d = float_to_half_bits(0.01f * float(1 + blk % 5));
      std::memcpy(block, &d, 2);
      for (int j = 0; j < 32; ++j) block[2 + j] = uint8_t(int8_t((j + blk) % 3 == 0 ? 127 : -128));
    }
    // Every activation block's amax at its position, the rest at ±amax too: codes ±127.
    Tensor<float> x({5, in});
    for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = float(sign) * (i % 4 == 0 ? -3.0f : 3.0f);
    expect_every_kernel_equals_reference(x, {GgmlType::q8_0, out, in, bytes}, "extreme codes");
  }
  // Q4: nibbles of 0 and 15 with the same activations.
  for (const GgmlType type : {GgmlType::q4_0, GgmlType::q4_1}) {
    const int64_t bb = quant::block_bytes(type), header = type == GgmlType::q4_1 ? 4 : 2;
    std::vector<uint8_t> bytes(size_t(out * in / 32 * bb));
    for (int64_t blk = 0; blk < out * in / 32; ++blk) {
      uint8_t* block = bytes.data() + blk * bb;
      const uint16_t d = float_to_half_bits(0.02f), m = float_to_half_bits(-0.1f);
      std::memcpy(block, &d, 2);
      if (type == GgmlType::q4_1) std::memcpy(block + 2, &m, 2);
      for (int j = 0; j < 16; ++j) block[header + j] = (j + blk) % 2 == 0 ? 0xF0 : 0x0F;
    }
    Tensor<float> x({3, in});
    for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = i % 3 == 0 ? -5.0f : 5.0f;
    expect_every_kernel_equals_reference(x, {type, out, in, bytes}, "extreme codes");
  }
}

TEST(PackedGemm, RowBlocksAndReductionBlocksStillEqualTheReference) {
  // in = 1536 (48 blocks: 2 112 bytes of activations a row): MC is half the L2 over that, 248 rows
  // for a 1 MiB L2 and 496 for 2 MiB, so 1 100 rows cross at least two row blocks; and KC (half
  // the L1 over a panel's bytes a block: 22 Q8_0 blocks for a zmm panel in 48 KiB) cuts the 48
  // blocks into ranges, each chain carried through y from one range to the next.
  SeededRng rng;
  for (const GgmlType type : {GgmlType::q8_0, GgmlType::q4_1}) {
    const int64_t in = 1536, out = 20, rows = 1100;
    const std::vector<uint8_t> bytes = random_blocks(rng, type, out, in);
    expect_every_kernel_equals_reference(rng.normal_tensor({rows, in}), {type, out, in, bytes}, "many rows");
  }
  // 130 blocks: more than one KC range for the ymm kernels too (90 Q8_0 blocks of an 8-output
  // panel in 48 KiB), with a partial last vector (out 21) whose chain is reloaded masked.
  for (const GgmlType type : {GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_1}) {
    const int64_t in = 32 * 130, out = 21, rows = 6;
    const std::vector<uint8_t> bytes = random_blocks(rng, type, out, in);
    expect_every_kernel_equals_reference(rng.normal_tensor({rows, in}), {type, out, in, bytes}, "long reduction");
  }
}

TEST(PackedGemm, ARowsResultDoesNotDependOnTheBatch) {
  // One call of N = 40 rows, then sub-batches of every M in 1 … 39 at offsets 0, 1, N − M and a
  // random one, through linear_cpu (the model's path) and every kernel: each row memcmp-equal.
  SeededRng rng;
  const int64_t in = 32 * 5, out = 41, N = 40;
  for (const WeightFormat format : {WeightFormat::q8_0, WeightFormat::q4_0, WeightFormat::q4_1}) {
    const Weight w = Weight::convert(rng.normal_tensor({out, in}), format);
    const Tensor<float> x = rng.normal_tensor({N, in});
    std::vector<int> kernels{-1};  // -1: linear_cpu
    for (const PackedKernel k : quant::available_packed_kernels()) kernels.push_back(int(k));
    for (const int k : kernels) {
      auto linear = [&](const Tensor<float>& xs, Tensor<float>& y) {
        if (k < 0) return linear_cpu(xs, w, y);
        quant::packed_matmul_cpu(xs, w.packed(), y, PackedKernel(k));
      };
      Tensor<float> big({N, out});
      big.poison();
      linear(x, big);
      for (int64_t M = 1; M < N; ++M)
        for (const int64_t off : {int64_t(0), int64_t(1), N - M, rng.integer(0, N - M)}) {
          Tensor<float> xs({M, in}), y({M, out});
          std::copy_n(x.data() + off * in, M * in, xs.data());
          y.poison();
          linear(xs, y);
          ASSERT_EQ(std::memcmp(y.data(), big.data() + off * out, size_t(M * out) * 4), 0)
              << to_string(format) << " " << (k < 0 ? "linear_cpu" : quant::to_string(PackedKernel(k))) << " M " << M
              << " offset " << off;
        }
    }
  }
}

TEST(PackedGemm, DispatchListsScalarFirstAndTheWidestLast) {
  const std::vector<PackedKernel> kernels = quant::available_packed_kernels();
  ASSERT_FALSE(kernels.empty());
  EXPECT_EQ(kernels.front(), PackedKernel::scalar);
  EXPECT_EQ(quant::best_packed_kernel(), kernels.back());
  EXPECT_TRUE(std::is_sorted(kernels.begin(), kernels.end(), [](PackedKernel a, PackedKernel b) { return int(a) < int(b); }));
  for (const PackedKernel k : kernels) EXPECT_TRUE(quant::cpu_has(k));
  // A CPU with VNNI on zmm has AVX2 too: the list is a ladder, each rung below the widest present.
  if (quant::cpu_has(PackedKernel::avx512_vnni)) {
    EXPECT_TRUE(quant::cpu_has(PackedKernel::avx2));
  }
  std::printf("packed GEMM kernels this CPU runs:");
  for (const PackedKernel k : kernels) std::printf(" %s (%s)", std::string(quant::to_string(k)).c_str(),
                                                   std::string(quant::instruction(k)).c_str());
  std::printf("\n");
}

TEST(PackedGemm, BadShapesAndKernelsAreNamed) {
  SeededRng rng;
  const std::vector<uint8_t> bytes = random_blocks(rng, GgmlType::q8_0, 4, 64);
  const quant::PackedMatrix p({GgmlType::q8_0, 4, 64, bytes});
  Tensor<float> x({2, 64}), y({2, 4}), bad_x({2, 32}), bad_y({2, 5});
  const auto message = [](auto&& call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { quant::packed_matmul_cpu(bad_x, p, y); }).find("x.shape[1]"), std::string::npos);
  EXPECT_NE(message([&] { quant::packed_matmul_cpu(x, p, bad_y); }).find("y"), std::string::npos);
  for (const PackedKernel k : {PackedKernel::avx2, PackedKernel::avx_vnni, PackedKernel::avx512_vnni}) {
    if (!quant::cpu_has(k)) {
      EXPECT_NE(message([&] { quant::packed_matmul_cpu(x, p, y, k); }).find("kernel"), std::string::npos);
    }
  }
  // An empty batch writes nothing and does not fail.
  Tensor<float> none_x({0, 64}), none_y({0, 4});
  EXPECT_NO_THROW(quant::packed_matmul_cpu(none_x, p, none_y));
}

TEST(PackedGemm, WeightsArePackedWhenMadeAndFloatWeightsHaveNone) {
  SeededRng rng;
  const Tensor<float> wf = rng.normal_tensor({17, 64});
  const Weight q = Weight::convert(wf, WeightFormat::q4_1);
  EXPECT_EQ(q.packed().out(), 17);
  EXPECT_EQ(q.packed().in(), 64);
  EXPECT_EQ(q.packed().type(), GgmlType::q4_1);
  // A shard (chapter 10) is packed too.
  const std::pair<int64_t, int64_t> rows[] = {{3, 9}};
  EXPECT_EQ(q.take_rows(rows).packed().out(), 6);
  EXPECT_EQ(q.take_columns(32, 64).packed().in(), 32);
  EXPECT_THROW((void)Weight(wf).packed(), std::logic_error);
}

}  // namespace
}  // namespace inferlab
