// Chapter 08: ggml's block formats and the quantized matmul on the CPU (kernels/quant/block_quant.h,
// quant_matmul.h) and the block formats of the typed Weight (kernels/layers/weight.h).
//
// Error bounds of quantize → dequantize, a block of 32 values x with amax = max|x|:
// - Q8_0: d = amax/127, q = round(x/d), decoded q·fp16(d). |x − q·d| ≤ d/2 (rounding; the
//   reciprocal's rounding adds ≤ 1 ulp of x/d) and |q·d − q·fp16(d)| ≤ 127·d·2^−11; bound
//   d·(0.5 + 127·2^−11 + 2^−20) + tiny, tested as 0.57·d + 1e-7.
// - Q4_0: d = max/−8, |x/d| ≤ 8, q = min(15, ⌊x/d + 8.5⌋): |x − (q−8)·d| ≤ |d|/2 except the clamped
//   side where x/d ∈ (7.5, 8] → error ≤ |d|; plus 8·|d|·2^−11 for fp16(d): tested as 1.01·|d|.
// - Q4_1: d = (max−min)/15, codes round half up: |x − (q·d + m)| ≤ d/2, plus fp16 rounding of m
//   (|m|·2^−11) and of d (15·d·2^−11) and the fp32 rounding of q·d + m: tested as
//   0.51·d + |m|·2^−10 + 1e-7.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "common/half.h"
#include "common/tensor.h"
#include "kernels/layers/layers.h"
#include "kernels/layers/weight.h"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/quant_matmul.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using quant::GgmlType;
using testing::SeededRng;

const GgmlType kWeightTypes[] = {GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_1};

std::vector<uint8_t> quantize(GgmlType type, std::span<const float> x) {
  std::vector<uint8_t> bytes(size_t(quant::row_bytes(type, int64_t(x.size()))));
  quant::quantize_row(type, x, bytes);
  return bytes;
}

TEST(QuantCpu, BlockSizes) {
  EXPECT_EQ(sizeof(quant::BlockQ4_0), 18u);
  EXPECT_EQ(sizeof(quant::BlockQ4_1), 20u);
  EXPECT_EQ(sizeof(quant::BlockQ8_0), 34u);
  EXPECT_EQ(sizeof(quant::BlockQ8_1), 36u);
}

TEST(QuantCpu, RoundTripErrorWithinBoundsFromD) {
  SeededRng rng;
  const int64_t n = 32 * 7;
  for (const GgmlType type : {GgmlType::q8_0, GgmlType::q8_1, GgmlType::q4_0, GgmlType::q4_1}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = float(rng.normal()) * 3.0f;
    const std::vector<uint8_t> bytes = quantize(type, x);
    std::vector<float> y(size_t(n), NAN);
    quant::dequantize_row(type, bytes, y);
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0, mx = 0, mn = x[size_t(b * 32)], mxv = mn;
      for (int j = 0; j < 32; ++j) {
        const float v = x[size_t(b * 32 + j)];
        if (std::fabs(v) > amax) amax = std::fabs(v), mx = v;
        mn = std::min(mn, v);
        mxv = std::max(mxv, v);
      }
      double bound = 0;
      if (type == GgmlType::q8_0 || type == GgmlType::q8_1) bound = 0.57 * amax / 127 + 1e-7;
      if (type == GgmlType::q4_0) bound = 1.01 * std::fabs(mx / 8);
      if (type == GgmlType::q4_1) bound = 0.51 * (mxv - mn) / 15 + std::fabs(mn) / 1024 + 1e-7;
      for (int j = 0; j < 32; ++j)
        ASSERT_LE(std::fabs(double(x[size_t(b * 32 + j)]) - y[size_t(b * 32 + j)]), bound)
            << quant::to_string(type) << " block " << b << " value " << j;
    }
    // The float64 decoder agrees with the fp32 one (exactly, up to Q4_1's one rounding).
    const std::vector<double> y64 = quant::dequantize_row_f64(type, bytes, n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(float(y64[size_t(i)]), y[size_t(i)]) << quant::to_string(type);
  }
}

// The Q8 activation quantizer (SIMD where the build has it) equals ggml's definition written
// plainly here — d = amax/127, q = std::round(x·(1/d)) (ties away from zero), Q8_1's s = fp16(Σq·d)
// — bit for bit, on random blocks and on blocks built to hit every tie: with amax = 127, d = 1 and
// x = k + ½ lands exactly on the halfway point.
TEST(QuantCpu, Q8QuantizerEqualsPlainRoundingIncludingTies) {
  SeededRng rng;
  const int64_t blocks = 64;
  std::vector<float> x(static_cast<size_t>(blocks * 32));
  for (float& v : x) v = float(rng.normal()) * 2.0f;
  for (int64_t b = blocks / 2; b < blocks; ++b) {  // tie blocks: ±127 first, then ±(k + ½)
    x[size_t(b * 32)] = (b % 2 ? -127.0f : 127.0f);
    for (int j = 1; j < 32; ++j) x[size_t(b * 32 + j)] = float(rng.integer(-126, 126)) + (j % 2 ? 0.5f : -0.5f);
  }
  std::vector<quant::BlockQ8_0> q0(static_cast<size_t>(blocks));
  std::vector<quant::BlockQ8_1> q1(static_cast<size_t>(blocks));
  quant::quantize_row_q8_0(x, q0);
  quant::quantize_row_q8_1(x, q1);
  for (int64_t b = 0; b < blocks; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[size_t(b * 32 + j)]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int want = int(std::round(x[size_t(b * 32 + j)] * id));
      sum += want;
      ASSERT_EQ(q0[size_t(b)].qs[j], want) << "Q8_0 block " << b << " value " << j << " x = " << x[size_t(b * 32 + j)];
      ASSERT_EQ(q1[size_t(b)].qs[j], want) << "Q8_1 block " << b << " value " << j;
    }
    EXPECT_EQ(q0[size_t(b)].d, float_to_half_bits(d)) << "block " << b;
    EXPECT_EQ(q1[size_t(b)].d, float_to_half_bits(d)) << "block " << b;
    EXPECT_EQ(q1[size_t(b)].s, float_to_half_bits(float(sum) * d)) << "block " << b;
  }
}

TEST(QuantCpu, HandBuiltBlocksDecodeToKnownValuesInNibbleOrder) {
  // Q4_0: d = 0.5, byte j = (lo = j % 16) | (hi = 15 − j % 16) << 4.
  quant::BlockQ4_0 b40{};
  b40.d = float_to_half_bits(0.5f);
  quant::BlockQ4_1 b41{};
  b41.d = float_to_half_bits(0.25f);
  b41.m = float_to_half_bits(-1.0f);
  for (int j = 0; j < 16; ++j) b40.qs[j] = b41.qs[j] = uint8_t(j | ((15 - j) << 4));
  float y[32];
  quant::dequantize_row_q4_0(std::span(&b40, 1), y);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << "low nibble = value " << j;
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.5f) << "high nibble = value " << j + 16;
  }
  quant::dequantize_row_q4_1(std::span(&b41, 1), y);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.25f - 1.0f);
    EXPECT_EQ(y[j + 16], (15 - j) * 0.25f - 1.0f);
  }
  quant::BlockQ8_0 b8{};
  b8.d = float_to_half_bits(0.125f);
  for (int j = 0; j < 32; ++j) b8.qs[j] = int8_t(j * 8 - 128);
  quant::dequantize_row_q8_0(std::span(&b8, 1), y);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.125f);
  // Quantizing known values: Q8_0 of (−127 … ) with amax 127 → d 1, codes = values.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j * 8 - 127);
  quant::BlockQ8_0 q{};
  quant::quantize_row_q8_0(x, std::span(&q, 1));
  EXPECT_EQ(half_bits_to_float(q.d), 1.0f);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q.qs[j], j * 8 - 127);
}

// y[r][o] by the float64 oracle: the dequantized weights against the dequantized quantized x.
Tensor<double> oracle(const Tensor<float>& x, GgmlType type, const std::vector<uint8_t>& w, int64_t out) {
  const int64_t rows = x.dim(0), in = x.dim(1), rb = quant::row_bytes(type, in);
  const GgmlType xt = quant::activation_type(type);
  Tensor<double> y({rows, out});
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<uint8_t> xq = quantize(xt, std::span(x.data() + r * in, size_t(in)));
    const std::vector<double> xd = quant::dequantize_row_f64(xt, xq, in);
    for (int64_t o = 0; o < out; ++o) {
      const std::span<const uint8_t> wr(w.data() + o * rb, size_t(rb));
      y.data()[r * out + o] = type == GgmlType::q4_1 ? quant::block_dot_f64(type, wr, xt, xq, in)
                                                     : quant::dot_f64(quant::dequantize_row_f64(type, wr, in), xd);
    }
  }
  return y;
}

// The bound on |Σ ŵ·x − Σ ŵ·x̂| for one output: the activations' quantization error. A Q8 block of x
// with amax = max|x| has |x − x̂| ≤ e = d·(0.5 + 127·2^−11 + 2^−20), d = amax/127 (the round-trip
// bound above), so the output moves by at most Σ_b e_b · Σ_{j∈b} |ŵ_j|. For Q4_1 the kernel's
// m_w·s_x uses s = fp16(d·Σq) where the dequantized x̂ gives fp16(d)·Σq: they differ by at most
// 2·2^−11·d·|Σq| (d's rounding and s's), times |m_w|.
double activation_bound(GgmlType type, std::span<const uint8_t> w_row, std::span<const float> x, int64_t in) {
  const std::vector<double> w = quant::dequantize_row_f64(type, w_row, in);
  const GgmlType xt = quant::activation_type(type);
  const std::vector<uint8_t> xq = quantize(xt, x);
  double bound = 0.0;
  for (int64_t b = 0; b < in / 32; ++b) {
    double amax = 0.0, w_abs = 0.0;
    for (int j = 0; j < 32; ++j) {
      amax = std::max(amax, std::fabs(double(x[size_t(b * 32 + j)])));
      w_abs += std::fabs(w[size_t(b * 32 + j)]);
    }
    const double d = amax / 127.0;
    bound += d * (0.5 + 127.0 / 2048.0 + 1.0 / (1 << 20)) * w_abs + 1e-12;
    if (type == GgmlType::q4_1) {
      quant::BlockQ8_1 xb;
      std::memcpy(&xb, xq.data() + b * 36, 36);
      quant::BlockQ4_1 wb;
      std::memcpy(&wb, w_row.data() + b * 20, 20);
      int sum = 0;
      for (int j = 0; j < 32; ++j) sum += xb.qs[j];
      bound += std::fabs(double(half_bits_to_float(wb.m))) * 2.0 / 2048.0 * d * std::abs(sum) + 1e-12;
    }
  }
  return bound;
}

TEST(QuantCpu, MatmulMatchesFloat64OracleAndKernelsAgreeBitForBit) {
  SeededRng rng;
  // in = 32·k for odd k (one block, 9, 17), out odd and across the 32-output chunks, rows across the
  // 4-row tiles and the 64-row blocks (1, 3, 17, 64, 70: leftover rows of every count).
  for (const auto& [in, out] : {std::pair<int64_t, int64_t>{32, 9}, {32 * 9, 37}, {32 * 17, 70}})
    for (const GgmlType type : kWeightTypes)
      for (const int64_t rows : {1, 3, 17, 64, 70}) {
        const Tensor<float> x = rng.normal_tensor({rows, in}), wf = rng.normal_tensor({out, in});
        const int64_t rb = quant::row_bytes(type, in);
        std::vector<uint8_t> w(size_t(out * rb));
        for (int64_t o = 0; o < out; ++o)
          quant::quantize_row(type, std::span(wf.data() + o * in, size_t(in)),
                              std::span(w.data() + o * rb, size_t(rb)));
        const quant::BlockMatrix m{type, out, in, w};
        const Tensor<double> want = oracle(x, type, w, out);
        Tensor<float> ref({rows, out});
        ref.poison();
        quant::quant_matmul_cpu(x, m, ref, quant::QuantKernel::scalar);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t o = 0; o < out; ++o) {
            const int64_t i = r * out + o;
            // The kernel's arithmetic, in double: only the fp32 accumulation differs.
            ASSERT_NEAR(ref.data()[i], want.data()[i], 1e-5 * (1.0 + std::fabs(want.data()[i])))
                << quant::to_string(type) << " in " << in << " rows " << rows << " element " << i;
            // The dequantized weights against the exact activations: within the activations' bound.
            const std::span<const float> xr(x.data() + r * in, size_t(in));
            const std::span<const uint8_t> wr(w.data() + o * rb, size_t(rb));
            std::vector<double> xd(xr.begin(), xr.end());
            const double exact = quant::dot_f64(quant::dequantize_row_f64(type, wr, in), xd);
            ASSERT_LE(std::fabs(ref.data()[i] - exact),
                      activation_bound(type, wr, xr, in) + 1e-5 * (1.0 + std::fabs(want.data()[i])))
                << quant::to_string(type) << " in " << in << " rows " << rows << " element " << i;
          }
        for (const quant::QuantKernel k : quant::available_quant_kernels()) {
          Tensor<float> y({rows, out});
          y.poison();
          quant::quant_matmul_cpu(x, m, y, k);
          EXPECT_EQ(std::memcmp(y.data(), ref.data(), size_t(rows * out) * 4), 0)
              << quant::to_string(k) << " != scalar, " << quant::to_string(type) << " in " << in << " rows " << rows;
        }
      }
}

TEST(QuantCpu, MatmulIsBatchInvariant) {
  // As tests/07-continuous-batching/linear_invariance_check.h: one call of N = 80 rows, then every
  // M in 1 … 70 at offsets 0, 1, N − M and a random one (sub-batches crossing the 4-row tiles and the
  // 64-row block), each row compared with memcmp, outputs poisoned first; through linear_cpu (the
  // model's path) and every kernel.
  SeededRng rng;
  const int64_t in = 32 * 5, out = 41, N = 80;
  for (const GgmlType type : kWeightTypes) {
    const WeightFormat format = type == GgmlType::q8_0   ? WeightFormat::q8_0
                                : type == GgmlType::q4_0 ? WeightFormat::q4_0
                                                         : WeightFormat::q4_1;
    const Weight w = Weight::convert(rng.normal_tensor({out, in}), format);
    const Tensor<float> x = rng.normal_tensor({N, in});
    for (const quant::QuantKernel k : quant::available_quant_kernels()) {
      auto linear = [&](const Tensor<float>& xs, Tensor<float>& y) {
        if (k == quant::best_quant_kernel()) return linear_cpu(xs, w, y);
        quant::quant_matmul_cpu(xs, w.block_matrix(), y, k);
      };
      Tensor<float> big({N, out});
      big.poison();
      linear(x, big);
      for (int64_t M = 1; M <= 70; ++M)
        for (const int64_t off : {int64_t(0), int64_t(1), N - M, rng.integer(0, N - M)}) {
          Tensor<float> xs({M, in}), y({M, out});
          std::copy_n(x.data() + off * in, M * in, xs.data());
          y.poison();
          linear(xs, y);
          ASSERT_EQ(std::memcmp(y.data(), big.data() + off * out, size_t(M * out) * 4), 0)
              << quant::to_string(type) << " " << quant::to_string(k) << " M " << M << " offset " << off;
        }
    }
  }
}

TEST(QuantCpu, WeightConvertViewBytesAndErrors) {
  SeededRng rng;
  const int64_t out = 5, in = 96;
  const Tensor<float> wf = rng.normal_tensor({out, in});
  for (const auto& [format, type, bb] :
       {std::tuple{WeightFormat::q8_0, GgmlType::q8_0, 34}, std::tuple{WeightFormat::q4_0, GgmlType::q4_0, 18},
        std::tuple{WeightFormat::q4_1, GgmlType::q4_1, 20}}) {
    EXPECT_EQ(parse_weight_format(to_string(format)), format);
    const Weight w = Weight::convert(wf, format);
    EXPECT_EQ(w.row_bytes(), in / 32 * bb);
    EXPECT_EQ(w.bytes(), out * in / 32 * bb);
    EXPECT_EQ(int64_t(w.block_bytes().size()), w.bytes());
    EXPECT_THROW(w.f32(), std::logic_error);
    EXPECT_THROW(w.bits16(), std::logic_error);
    EXPECT_THROW(bytes_per_weight(format), std::invalid_argument);
    // The blocks are the quantizer's, row by row; at / row_to_f32 / to_f32 dequantize them.
    const Tensor<float> all = w.to_f32();
    for (int64_t r = 0; r < out; ++r) {
      const std::vector<uint8_t> row = quantize(type, std::span(wf.data() + r * in, size_t(in)));
      EXPECT_EQ(std::memcmp(row.data(), w.block_bytes().data() + r * w.row_bytes(), row.size()), 0);
      std::vector<float> dec(static_cast<size_t>(in), NAN), got(static_cast<size_t>(in), NAN);
      quant::dequantize_row(type, row, dec);
      w.row_to_f32(r, got);
      for (int64_t c = 0; c < in; ++c) {
        EXPECT_EQ(got[size_t(c)], dec[size_t(c)]);
        EXPECT_EQ(w.at(r, c), dec[size_t(c)]);
        EXPECT_EQ(all.data()[r * in + c], dec[size_t(c)]);
      }
    }
    // A view over the same bytes, without a copy, kept alive by its owner.
    auto owner = std::make_shared<std::vector<uint8_t>>(w.block_bytes().begin(), w.block_bytes().end());
    const Weight v = Weight::view(format, out, in, *owner, owner);
    EXPECT_EQ(v.block_bytes().data(), owner->data());
    EXPECT_EQ(v.shape(), (Shape{out, in}));
    const Tensor<float> x = rng.normal_tensor({3, in});
    Tensor<float> y1({3, out}), y2({3, out});
    linear_cpu(x, w, y1);
    linear_cpu(x, v, y2);
    EXPECT_EQ(std::memcmp(y1.data(), y2.data(), sizeof(float) * 3 * out), 0);
    EXPECT_EQ(linear_cost(3, w).bytes, double(w.bytes()) + 4.0 * 3 * (in + out));
    EXPECT_THROW(Weight::view(format, out, in, std::span(*owner).first(owner->size() - 1), owner),
                 std::invalid_argument);
    EXPECT_THROW(Weight::view(format, out, 48, *owner, owner), std::invalid_argument);
    EXPECT_THROW(Weight::convert(rng.normal_tensor({2, 40}), format), std::invalid_argument);
  }
  // Element formats: views copy; bytes and bytes_per_weight as before.
  std::vector<uint8_t> raw(static_cast<size_t>(out * in * 4));
  std::memcpy(raw.data(), wf.data(), raw.size());
  const Weight f = Weight::view(WeightFormat::f32, out, in, raw, nullptr);
  EXPECT_EQ(std::memcmp(f.f32().data(), wf.data(), raw.size()), 0);
  EXPECT_EQ(f.bytes(), out * in * 4);
  EXPECT_EQ(bytes_per_weight(WeightFormat::bf16), 2);
  const Weight h = Weight::convert(wf, WeightFormat::f16);
  std::vector<uint8_t> raw16(static_cast<size_t>(out * in * 2));
  std::memcpy(raw16.data(), h.bits16().data(), raw16.size());
  const Weight hv = Weight::view(WeightFormat::f16, out, in, raw16, nullptr);
  EXPECT_EQ(hv.at(2, 7), h.at(2, 7));
  EXPECT_THROW(Weight::view(WeightFormat::f16, out, in, raw, nullptr), std::invalid_argument);
  EXPECT_THROW(parse_weight_format("q5_k"), std::invalid_argument);
  // Matmul errors.
  const Tensor<float> x = rng.normal_tensor({2, in});
  Tensor<float> y({2, out});
  std::vector<uint8_t> blocks(static_cast<size_t>(out * quant::row_bytes(GgmlType::q8_0, in)));
  EXPECT_THROW(quant::quant_matmul_cpu(x, {GgmlType::q8_1, out, in, blocks}, y), std::invalid_argument);
  EXPECT_THROW(quant::quant_matmul_cpu(x, {GgmlType::q8_0, out, in, std::span(blocks).first(10)}, y),
               std::invalid_argument);
  Tensor<float> bad({2, out + 1});
  EXPECT_THROW(quant::quant_matmul_cpu(x, {GgmlType::q8_0, out, in, blocks}, bad), std::invalid_argument);
}

TEST(QuantCpu, Batch1GemvTimings) {
  SeededRng rng;
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{1536, 576}, {576, 1536}, {49152, 576}}) {
    const Weight w = Weight::convert(rng.normal_tensor({out, in}), WeightFormat::q8_0);
    const Tensor<float> x = rng.normal_tensor({1, in});
    Tensor<float> y({1, out});
    std::vector<double> ns;
    for (int i = 0; i < 41; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      linear_cpu(x, w, y);
      ns.push_back(
          double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()));
    }
    std::sort(ns.begin(), ns.end());
    const double med = ns[ns.size() / 2];
    std::printf("Q8_0 GEMV %lld -> %lld: median %.0f ns, %.2f GB/s of weights (%s)\n", (long long)in, (long long)out,
                med, double(w.bytes()) / med, std::string(quant::to_string(quant::best_quant_kernel())).c_str());
  }
}

}  // namespace
}  // namespace inferlab
