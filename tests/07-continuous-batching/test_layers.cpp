// Chapter 07: the Llama layers on the CPU (kernels/layers/layers.h), each against a float64 oracle
// on odd shapes, with outputs poisoned first:
//  - linear_cpu (y = x · wᵀ): in not a multiple of the 16 SIMD lanes (172, 33, 7, …), out and rows
//    1 … 70; and batch invariance, bit for bit — every row of x · wᵀ computed in a call of every
//    M in 1 … 70 at several offsets equals the same row of one 80-row call (memcmp, the check of
//    linear_invariance_check.h, which tests/wrong/wrong_ch07_linear.cpp's wrong layers fail);
//  - linear_openblas agrees with linear_cpu within the fp32 tolerance (nothing is asserted about
//    its batch invariance: that is OpenBLAS's business, and layers.h documents what it measured);
//  - rms_norm_cpu (in place too), rope_cpu (table from rope_table, random positions, against
//    angle = pos · θ^(−2i/d) in double; columns past heads · head_dim untouched) in both styles
//    (adjacent pairs and half-split, within a stated bound of the double rotation, exact at
//    position 0), half_split equal bit for bit to adjacent on the permuted head, swiglu_cpu;
//    the row-wise layers give a row alone what they give it in a batch;
//  - typed weights (kernels/layers/weight.h): fp16 and bf16 storage is the nearest 16-bit value
//    of each fp32 weight; linear_cpu over them equals the float64 product with the stored
//    (widened) weights on odd shapes, is batch-invariant bit for bit, and over an fp32 Weight is
//    bit-identical to the Tensor overload; bytes and costs count the real bytes; a row lookup
//    (the embedding's) widens the stored row exactly;
//  - bad shapes and formats throw std::invalid_argument naming the argument.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/compare.h"
#include "common/half.h"
#include "kernels/layers/layers.h"
#include "tests/07-continuous-batching/linear_invariance_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using testing::SeededRng;

// ---- helpers ------------------------------------------------------------------------------------

/// Expects @p call to throw std::invalid_argument whose message contains @p name.
void expect_invalid(const std::function<void()>& call, const std::string& name) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected std::invalid_argument naming " << name;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << "expected '" << name << "' in: " << e.what();
  }
}

/// x · wᵀ in double, and Σ|x|·|w| (the size of the summed terms) for the condition number.
struct LinearOracle {
  Tensor<double> y, magnitude;
};

LinearOracle linear_reference(const Tensor<float>& x, const Tensor<float>& w) {
  const int64_t rows = x.dim(0), out = w.dim(0), in = w.dim(1);
  LinearOracle o{Tensor<double>({rows, out}), Tensor<double>({rows, out})};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < out; ++j) {
      double sum = 0.0, mag = 0.0;
      for (int64_t k = 0; k < in; ++k) {
        const double term = double(x[r * in + k]) * double(w[j * in + k]);
        sum += term;
        mag += std::abs(term);
      }
      o.y[r * out + j] = sum;
      o.magnitude[r * out + j] = mag;
    }
  return o;
}

/// product_tolerance(fp32, ‖Σ|x·w|‖ / ‖x·wᵀ‖): a few rows of random dot products can cancel to
/// near zero, which no fp32 GEMM computes to 1e-5 relative.
Tolerance linear_tolerance(const LinearOracle& o) {
  double ref = 0.0, mag = 0.0;
  for (int64_t i = 0; i < o.y.size(); ++i) {
    ref += o.y[i] * o.y[i];
    mag += o.magnitude[i] * o.magnitude[i];
  }
  return product_tolerance(Precision::fp32, ref > 0.0 ? std::sqrt(mag / ref) : 1.0);
}

/// linear_cpu over an fp32 tensor, as a value (linear_cpu is overloaded for typed weights).
const testing::LinearFn linear_f32 = [](const Tensor<float>& x, const Tensor<float>& w, Tensor<float>& y) {
  linear_cpu(x, w, y);
};

bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, size_t(n) * sizeof(float)) == 0;
}

// ---- linear ---------------------------------------------------------------------------------------

struct LinearShape {
  int64_t rows, out, in;
};

/// Odd shapes: every input size around and off the 16 lanes (the scalar tail), rows and outputs
/// 1 … 70 (edge register tiles of 1–3 rows or outputs, a second 64-row block), drawn fresh.
std::vector<LinearShape> linear_shapes(SeededRng& rng) {
  std::vector<LinearShape> shapes = {{1, 1, 172}, {70, 70, 172}, {70, 1, 33}, {1, 70, 33}, {5, 3, 7}, {66, 67, 1}};
  for (const int64_t in : {172, 33, 1, 7, 15, 16, 17, 64, 200})
    for (int i = 0; i < 3; ++i) shapes.push_back({rng.integer(1, 70), rng.integer(1, 70), in});
  return shapes;
}

TEST(Linear, CpuEqualsTheOracleOnOddShapes) {
  SeededRng rng;
  for (const LinearShape& s : linear_shapes(rng)) {
    const Tensor<float> x = rng.normal_tensor({s.rows, s.in}), w = rng.normal_tensor({s.out, s.in});
    Tensor<float> y({s.rows, s.out});
    y.poison();
    linear_cpu(x, w, y);
    const LinearOracle o = linear_reference(x, w);
    const Comparison c = compare_to_oracle(y, o.y, linear_tolerance(o));
    EXPECT_TRUE(c.ok) << "rows " << s.rows << ", out " << s.out << ", in " << s.in << ":\n" << c.report();
  }
}

TEST(Linear, OpenBlasAgreesWithCpuWithinTheFp32Tolerance) {
  SeededRng rng;
  for (const LinearShape& s : linear_shapes(rng)) {
    const Tensor<float> x = rng.normal_tensor({s.rows, s.in}), w = rng.normal_tensor({s.out, s.in});
    Tensor<float> mine({s.rows, s.out}), blas({s.rows, s.out});
    mine.poison();
    blas.poison();
    linear_cpu(x, w, mine);
    linear_openblas(x, w, blas);
    const LinearOracle o = linear_reference(x, w);
    const Tolerance tolerance = linear_tolerance(o);
    const Comparison to_oracle = compare_to_oracle(blas, o.y, tolerance);
    EXPECT_TRUE(to_oracle.ok) << "openblas, rows " << s.rows << ", out " << s.out << ", in " << s.in << ":\n"
                              << to_oracle.report();
    const Comparison to_cpu = compare_to_oracle(blas, convert<double>(mine), tolerance);
    EXPECT_TRUE(to_cpu.ok) << "openblas vs linear_cpu, rows " << s.rows << ", out " << s.out << ", in " << s.in << ":\n"
                           << to_cpu.report();
  }
}

TEST(Linear, ZeroRowsWriteNothing) {
  SeededRng rng;
  const Tensor<float> x({0, 33}), w = rng.normal_tensor({5, 33});
  Tensor<float> y({0, 5});
  EXPECT_NO_THROW(linear_cpu(x, w, y));
  EXPECT_NO_THROW(linear_openblas(x, w, y));
}

TEST(Linear, EveryRowIsBitIdenticalWhateverTheBatch) {
  SeededRng rng;
  // Odd shapes (outputs 1 … 70, inputs off the lanes), then the matrices of stories260K's
  // forward: wqkv [128, 64], w13 [344, 64], w2 [64, 172], the tied head [512, 64].
  const std::vector<testing::LinearInvarianceCase> cases = {
      {70, 172}, {1, 33}, {3, 7}, {17, 200}, {rng.integer(1, 70), 33}, {128, 64}, {344, 64}, {64, 172}, {512, 64}};
  for (const auto& c : cases) EXPECT_TRUE(testing::linear_is_batch_invariant(linear_f32, c, rng));
}

TEST(Linear, BadShapesAreRejectedNamingTheArgument) {
  SeededRng rng;
  const Tensor<float> x = rng.normal_tensor({3, 33}), w = rng.normal_tensor({5, 33});
  for (const auto& linear : {linear_f32, testing::LinearFn(linear_openblas)}) {
    Tensor<float> y({3, 5});
    expect_invalid([&] { linear(rng.normal_tensor({3, 32}), w, y); }, "x.shape[1]");
    expect_invalid([&] { linear(rng.normal_tensor({33}), w, y); }, "x.shape");
    expect_invalid([&] { linear(x, rng.normal_tensor({5, 33, 1}), y); }, "w.shape");
    Tensor<float> wrong_rows({2, 5}), wrong_out({3, 6});
    expect_invalid([&] { linear(x, w, wrong_rows); }, "y.shape");
    expect_invalid([&] { linear(x, w, wrong_out); }, "y.shape");
  }
}

// ---- typed weights ---------------------------------------------------------------------------------

constexpr WeightFormat kSixteenBitFormats[] = {WeightFormat::f16, WeightFormat::bf16};

TEST(Weight, SixteenBitStorageIsTheNearestValueOfEachWeight) {
  SeededRng rng;
  const Tensor<float> w = rng.normal_tensor({7, 33});
  for (const WeightFormat format : kSixteenBitFormats) {
    const Weight typed = Weight::convert(w, format);
    EXPECT_EQ(typed.format(), format);
    EXPECT_EQ(typed.shape(), (Shape{7, 33}));
    EXPECT_EQ(typed.bytes(), 2 * 7 * 33);
    const auto to_bits = format == WeightFormat::f16 ? float_to_half_bits : float_to_bfloat16_bits;
    const auto to_float = format == WeightFormat::f16 ? half_bits_to_float : bfloat16_bits_to_float;
    const Tensor<float> widened = typed.to_f32();
    for (int64_t i = 0; i < w.size(); ++i) {
      ASSERT_EQ(typed.bits16()[i], to_bits(w[i])) << to_string(format) << " element " << i;
      ASSERT_EQ(widened[i], to_float(typed.bits16()[i]));
      ASSERT_EQ(typed.at(i / 33, i % 33), widened[i]);
    }
    // The conversion rounds: most weights move, none by more than half a 16-bit step (relative;
    // fp16's subnormals below 2^-14 have the fixed spacing 2^-24).
    const double step = format == WeightFormat::f16 ? 0x1p-10 : 0x1p-7;
    int64_t moved = 0;
    for (int64_t i = 0; i < w.size(); ++i) {
      moved += widened[i] != w[i];
      const double half_step = std::max(0.5 * step * std::abs(double(w[i])), 0x1p-25);
      EXPECT_LE(std::abs(double(widened[i]) - double(w[i])), half_step) << to_string(format) << " element " << i;
    }
    EXPECT_GT(moved, w.size() / 2) << to_string(format) << ": the weights were not converted";
  }
  const Weight f32(w);
  EXPECT_EQ(f32.bytes(), 4 * 7 * 33);
  EXPECT_EQ(std::memcmp(f32.f32().data(), w.data(), sizeof(float) * size_t(w.size())), 0);
  EXPECT_THROW((void)f32.bits16(), std::logic_error);
  EXPECT_THROW((void)Weight::convert(w, WeightFormat::f16).f32(), std::logic_error);
}

TEST(Weight, RowLookupWidensOneStoredRowExactly) {
  SeededRng rng;
  const int64_t rows = rng.integer(3, 40), in = rng.integer(1, 70);
  const Tensor<float> w = rng.normal_tensor({rows, in});
  for (const WeightFormat format : {WeightFormat::f32, WeightFormat::f16, WeightFormat::bf16}) {
    SCOPED_TRACE(std::string(to_string(format)) + ", " + std::to_string(rows) + " x " + std::to_string(in));
    const Weight typed = Weight::convert(w, format);
    EXPECT_EQ(typed.row_bytes(), bytes_per_weight(format) * in);
    EXPECT_EQ(typed.row_bytes() * rows, typed.bytes());
    const Tensor<float> widened = typed.to_f32();
    for (const int64_t row : {int64_t(0), rng.integer(0, rows - 1), rows - 1}) {
      std::vector<float> out(static_cast<size_t>(in), std::numeric_limits<float>::quiet_NaN());
      typed.row_to_f32(row, out);
      EXPECT_TRUE(same_bits(out.data(), widened.data() + row * in, in)) << "row " << row;
    }
    std::vector<float> out(static_cast<size_t>(in)), wrong(static_cast<size_t>(in + 1));
    expect_invalid([&] { typed.row_to_f32(rows, out); }, "row");
    expect_invalid([&] { typed.row_to_f32(-1, out); }, "row");
    expect_invalid([&] { typed.row_to_f32(0, wrong); }, "out.size()");
  }
}

TEST(Weight, FormatNamesRoundTripAndUnknownOnesAreRejected) {
  for (const WeightFormat format : {WeightFormat::f32, WeightFormat::f16, WeightFormat::bf16})
    EXPECT_EQ(parse_weight_format(to_string(format)), format);
  expect_invalid([] { parse_weight_format("q4_1x"); }, "weight format = q4_1x");
  expect_invalid([] { parse_weight_format(""); }, "weight format");
  SeededRng rng;
  expect_invalid([&] { Weight(rng.normal_tensor({3})); }, "weight.shape");
}

TEST(Linear, TypedWeightsEqualTheOracleOverTheStoredWeights) {
  SeededRng rng;
  for (const LinearShape& s : linear_shapes(rng)) {
    const Tensor<float> x = rng.normal_tensor({s.rows, s.in}), w = rng.normal_tensor({s.out, s.in});
    for (const WeightFormat format : kSixteenBitFormats) {
      const Weight typed = Weight::convert(w, format);
      Tensor<float> y({s.rows, s.out});
      y.poison();
      linear_cpu(x, typed, y);
      // The oracle multiplies by the stored weights: the conversion's rounding is the format's,
      // the product's is fp32's.
      const LinearOracle o = linear_reference(x, typed.to_f32());
      const Comparison c = compare_to_oracle(y, o.y, linear_tolerance(o));
      EXPECT_TRUE(c.ok) << to_string(format) << ", rows " << s.rows << ", out " << s.out << ", in " << s.in << ":\n"
                        << c.report();
    }
  }
}

TEST(Linear, AnFp32WeightIsBitIdenticalToTheTensorOverload) {
  SeededRng rng;
  for (const LinearShape& s : linear_shapes(rng)) {
    const Tensor<float> x = rng.normal_tensor({s.rows, s.in}), w = rng.normal_tensor({s.out, s.in});
    Tensor<float> plain({s.rows, s.out}), typed({s.rows, s.out});
    plain.poison();
    typed.poison();
    linear_cpu(x, w, plain);
    linear_cpu(x, Weight(w), typed);
    EXPECT_TRUE(same_bits(plain.data(), typed.data(), plain.size()))
        << "rows " << s.rows << ", out " << s.out << ", in " << s.in;
  }
}

TEST(Linear, TypedWeightsAreBatchInvariant) {
  SeededRng rng;
  for (const WeightFormat format : kSixteenBitFormats) {
    // The check draws w in fp32; the layer under test stores it in the format first (the same
    // stored weights for every call of one check: the conversion is deterministic).
    const testing::LinearFn linear = [format](const Tensor<float>& x, const Tensor<float>& w, Tensor<float>& y) {
      linear_cpu(x, Weight::convert(w, format), y);
    };
    for (const testing::LinearInvarianceCase& c :
         std::vector<testing::LinearInvarianceCase>{{70, 172}, {3, 7}, {17, 200}, {rng.integer(1, 70), 33}})
      EXPECT_TRUE(testing::linear_is_batch_invariant(linear, c, rng)) << to_string(format);
  }
}

TEST(Linear, CostCountsTheWeightsRealBytes) {
  SeededRng rng;
  const Tensor<float> w = rng.normal_tensor({40, 24});
  const Cost f32 = linear_cost(3, Weight(w)), f16 = linear_cost(3, Weight::convert(w, WeightFormat::f16));
  EXPECT_DOUBLE_EQ(f32.flops, 2.0 * 3 * 40 * 24);
  EXPECT_DOUBLE_EQ(f16.flops, f32.flops);
  EXPECT_DOUBLE_EQ(f32.bytes, 4.0 * 40 * 24 + 4.0 * (3 * 24 + 3 * 40));
  EXPECT_DOUBLE_EQ(f16.bytes, 2.0 * 40 * 24 + 4.0 * (3 * 24 + 3 * 40));
}

TEST(Linear, TypedWeightShapesAreChecked) {
  SeededRng rng;
  const Tensor<float> x = rng.normal_tensor({3, 33});
  const Weight w = Weight::convert(rng.normal_tensor({5, 33}), WeightFormat::bf16);
  Tensor<float> y({3, 5});
  expect_invalid([&] { linear_cpu(rng.normal_tensor({3, 32}), w, y); }, "x.shape[1]");
  Tensor<float> wrong_out({3, 6});
  expect_invalid([&] { linear_cpu(x, w, wrong_out); }, "y.shape");
}

// ---- RMSNorm ----------------------------------------------------------------------------------------

Tensor<double> rms_norm_reference(const Tensor<float>& x, const std::vector<float>& weight, float eps) {
  const int64_t rows = x.dim(0), dim = x.dim(1);
  Tensor<double> y({rows, dim});
  for (int64_t r = 0; r < rows; ++r) {
    double mean_square = 0.0;
    for (int64_t c = 0; c < dim; ++c) mean_square += double(x[r * dim + c]) * double(x[r * dim + c]);
    mean_square /= double(dim);
    const double inv = 1.0 / std::sqrt(mean_square + double(eps));
    for (int64_t c = 0; c < dim; ++c) y[r * dim + c] = double(weight[size_t(c)]) * double(x[r * dim + c]) * inv;
  }
  return y;
}

TEST(RmsNorm, EqualsTheOracleAndMayWorkInPlace) {
  SeededRng rng;
  for (const int64_t dim : {64, 172, 7, 33, 1})
    for (const int64_t rows : {int64_t(1), int64_t(3), rng.integer(1, 70)}) {
      const float scale = rng.uniform(0.01f, 20.0f);  // RMSNorm's output does not depend on it (but for ε)
      const Tensor<float> x = rng.normal_tensor({rows, dim}, 0.3f, scale);
      std::vector<float> weight(static_cast<size_t>(dim));
      for (float& g : weight) g = 1.0f + rng.normal(0.0f, 0.3f);
      const float eps = 1e-5f;
      Tensor<float> y({rows, dim});
      y.poison();
      rms_norm_cpu(x, weight, eps, y);
      const Comparison c = compare_to_oracle(y, rms_norm_reference(x, weight, eps), tolerance_for(Precision::fp32));
      EXPECT_TRUE(c.ok) << "rows " << rows << ", dim " << dim << ":\n" << c.report();
      Tensor<float> in_place = x;
      rms_norm_cpu(in_place, weight, eps, in_place);
      EXPECT_TRUE(same_bits(in_place.data(), y.data(), y.size()))
          << "in place differs, rows " << rows << ", dim " << dim;
    }
}

TEST(RmsNorm, BadShapesAreRejectedNamingTheArgument) {
  SeededRng rng;
  const Tensor<float> x = rng.normal_tensor({3, 8});
  const std::vector<float> weight(8, 1.0f), short_weight(7, 1.0f);
  Tensor<float> y({3, 8}), wrong({3, 9});
  expect_invalid([&] { rms_norm_cpu(x, short_weight, 1e-5f, y); }, "weight.size()");
  expect_invalid([&] { rms_norm_cpu(x, weight, 1e-5f, wrong); }, "y.shape");
  expect_invalid([&] { rms_norm_cpu(rng.normal_tensor({3, 8, 1}), weight, 1e-5f, y); }, "x.shape");
}

// ---- RoPE ---------------------------------------------------------------------------------------------

TEST(Rope, TableAndRotationEqualTheDoubleComputation) {
  SeededRng rng;
  struct Case {
    int64_t heads, head_dim, extra_columns;  // extra: columns past heads · head_dim, left alone
    double theta;
  };
  const int64_t max_position = 4099;
  for (const Case& k : {Case{1, 8, 0, 10000.0}, Case{3, 64, 5, 10000.0}, Case{2, 80, 0, 500000.0},
                        Case{4, 128, 17, 10000.0}, Case{5, 2, 1, 10000.0}}) {
    SCOPED_TRACE("heads " + std::to_string(k.heads) + ", head_dim " + std::to_string(k.head_dim) + ", theta " +
                 std::to_string(k.theta));
    const std::vector<float> table = rope_table(max_position, k.head_dim, k.theta);
    ASSERT_EQ(int64_t(table.size()), max_position * k.head_dim);
    const int64_t rows = rng.integer(1, 40), width = k.heads * k.head_dim, stride = width + k.extra_columns;
    std::vector<int64_t> positions(static_cast<size_t>(rows));
    for (auto& p : positions) p = rng.integer(0, max_position - 1);
    positions[0] = max_position - 1;  // the table's last row
    if (rows > 1) positions[1] = 0;   // no rotation
    Tensor<float> x = rng.normal_tensor({rows, stride});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = width; c < stride; ++c) x[r * stride + c] = std::numeric_limits<float>::quiet_NaN();
    const Tensor<float> before = x;
    rope_cpu(x.data(), rows, stride, k.heads, k.head_dim, positions, table);

    Tensor<double> want({rows, width});
    Tensor<float> got({rows, width});
    const int64_t half = k.head_dim / 2;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t h = 0; h < k.heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const double angle = double(positions[size_t(r)]) * std::pow(k.theta, -double(2 * i) / double(k.head_dim));
          const int64_t c = h * k.head_dim + 2 * i;
          const double a = before[r * stride + c], b = before[r * stride + c + 1];
          want[r * width + c] = a * std::cos(angle) - b * std::sin(angle);
          want[r * width + c + 1] = a * std::sin(angle) + b * std::cos(angle);
        }
      std::copy_n(x.data() + r * stride, width, got.data() + r * width);
      EXPECT_TRUE(same_bits(x.data() + r * stride + width, before.data() + r * stride + width, k.extra_columns))
          << "row " << r << ": a column past heads · head_dim was written";
    }
    const Comparison c = compare_to_oracle(got, want, tolerance_for(Precision::fp32));
    EXPECT_TRUE(c.ok) << c.report();
  }
}

// Where pair i of a head of @p head_dim sits, written here from the definitions (not the kernel's
// code): adjacent (2i, 2i+1), half_split (i, i + head_dim/2).
std::pair<int64_t, int64_t> pair_elements(RopeStyle style, int64_t i, int64_t head_dim) {
  if (style == RopeStyle::adjacent) return {2 * i, 2 * i + 1};
  return {i, i + head_dim / 2};
}

// Both styles against the rotation in double with exact cos and sin. The bound, per element:
// |got − want| ≤ 4u · (|a| + |b|), u = 2⁻²⁴ — the table's cos and sin are each rounded once (u
// relative), each product once and the sum once (u of |a·c| + |b·s| ≤ |a| + |b|): 3u, plus margin
// for the angle's double error (≤ 1e-12 rad at these positions). Exact where the oracle is: at
// position 0 (cos 1, sin 0) every element keeps its bits, and columns past heads · head_dim are
// never written.
TEST(Rope, BothStylesEqualTheDoubleRotationOnOddShapes) {
  SeededRng rng;
  struct Case {
    int64_t heads, head_dim, extra_columns;
    double theta;
  };
  const int64_t max_position = 3001;
  for (const RopeStyle style : {RopeStyle::adjacent, RopeStyle::half_split})
    for (const Case& k : {Case{1, 2, 0, 10000.0}, Case{3, 6, 5, 10000.0}, Case{5, 10, 1, 100000.0},
                          Case{2, 22, 3, 500000.0}, Case{9, 64, 7, 100000.0}, Case{1, 128, 0, 10000.0}}) {
      SCOPED_TRACE(std::string(to_string(style)) + ": heads " + std::to_string(k.heads) + ", head_dim " +
                   std::to_string(k.head_dim) + ", theta " + std::to_string(k.theta));
      const std::vector<float> table = rope_table(max_position, k.head_dim, k.theta);
      const int64_t rows = rng.integer(3, 30), width = k.heads * k.head_dim, stride = width + k.extra_columns;
      std::vector<int64_t> positions(static_cast<size_t>(rows));
      for (auto& p : positions) p = rng.integer(1, max_position - 1);
      positions[0] = max_position - 1;
      positions[1] = 0;
      Tensor<float> x = rng.normal_tensor({rows, stride});
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = width; c < stride; ++c) x[r * stride + c] = std::numeric_limits<float>::quiet_NaN();
      const Tensor<float> before = x;
      rope_cpu(x.data(), rows, stride, k.heads, k.head_dim, positions, table, style);

      int64_t checked = 0, failing = 0;
      double worst = 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        const double p = double(positions[size_t(r)]);
        EXPECT_TRUE(same_bits(x.data() + r * stride + width, before.data() + r * stride + width, k.extra_columns))
            << "row " << r << ": a column past heads · head_dim was written";
        if (p == 0) {
          EXPECT_TRUE(same_bits(x.data() + r * stride, before.data() + r * stride, width))
              << "row " << r << " at position 0 must keep its bits";
          continue;
        }
        for (int64_t h = 0; h < k.heads; ++h)
          for (int64_t i = 0; i < k.head_dim / 2; ++i) {
            const auto [e0, e1] = pair_elements(style, i, k.head_dim);
            const int64_t at0 = r * stride + h * k.head_dim + e0, at1 = r * stride + h * k.head_dim + e1;
            const double angle = p * std::pow(k.theta, -2.0 * double(i) / double(k.head_dim));
            const double a = before[at0], b = before[at1];
            const double want0 = a * std::cos(angle) - b * std::sin(angle);
            const double want1 = a * std::sin(angle) + b * std::cos(angle);
            const double bound = 4.0 * 0x1p-24 * (std::abs(a) + std::abs(b));
            const double error = std::max(std::abs(x[at0] - want0), std::abs(x[at1] - want1));
            worst = std::max(worst, error / bound);
            failing += !(error <= bound);
            checked += 2;
          }
      }
      EXPECT_EQ(failing, 0) << failing << " pairs past 4u·(|a| + |b|) of the double rotation; worst at " << worst
                            << " of the bound";
      EXPECT_GT(checked, 0);
    }
}

// half_split on a head v is adjacent on the permuted head u (u[2i] = v[i], u[2i+1] = v[i + d/2]),
// bit for bit: the identity behind llama.cpp's converter, which permutes Hugging Face's wq and wk
// rows so that GGUF models use adjacent pairs. And the two styles differ (except at head_dim 2,
// where both rotate the one pair (0, 1)).
TEST(Rope, HalfSplitIsAdjacentOnThePermutedHead) {
  SeededRng rng;
  for (const int64_t head_dim : {2, 6, 14, 64, 96}) {
    SCOPED_TRACE("head_dim " + std::to_string(head_dim));
    const int64_t heads = rng.integer(1, 5), rows = rng.integer(1, 20), width = heads * head_dim, half = head_dim / 2;
    const std::vector<float> table = rope_table(2048, head_dim, 100000.0);
    std::vector<int64_t> positions(static_cast<size_t>(rows));
    for (auto& p : positions) p = rng.integer(1, 2047);
    const Tensor<float> v = rng.normal_tensor({rows, width});
    Tensor<float> u({rows, width});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const int64_t base = r * width + h * head_dim;
          u[base + 2 * i] = v[base + i];
          u[base + 2 * i + 1] = v[base + i + half];
        }
    Tensor<float> split = v, adjacent = u, adjacent_on_v = v;
    rope_cpu(split.data(), rows, width, heads, head_dim, positions, table, RopeStyle::half_split);
    rope_cpu(adjacent.data(), rows, width, heads, head_dim, positions, table, RopeStyle::adjacent);
    rope_cpu(adjacent_on_v.data(), rows, width, heads, head_dim, positions, table, RopeStyle::adjacent);
    int64_t differ = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const int64_t base = r * width + h * head_dim;
          ASSERT_EQ(std::bit_cast<uint32_t>(split[base + i]), std::bit_cast<uint32_t>(adjacent[base + 2 * i]))
              << "row " << r << ", head " << h << ", pair " << i << " (first element)";
          ASSERT_EQ(std::bit_cast<uint32_t>(split[base + i + half]),
                    std::bit_cast<uint32_t>(adjacent[base + 2 * i + 1]))
              << "row " << r << ", head " << h << ", pair " << i << " (second element)";
        }
    for (int64_t e = 0; e < split.size(); ++e) differ += split[e] != adjacent_on_v[e];
    if (head_dim == 2)
      EXPECT_EQ(differ, 0) << "at head_dim 2 both styles rotate the pair (0, 1)";
    else
      EXPECT_GT(differ, split.size() / 2) << "half_split and adjacent on the same head must differ";
  }
}

TEST(Rope, BadArgumentsAreRejectedNamingThem) {
  SeededRng rng;
  const std::vector<float> table = rope_table(16, 8, 10000.0);
  Tensor<float> x = rng.normal_tensor({2, 16});
  const std::vector<int64_t> one = {3}, past_end = {3, 16}, negative = {-1, 0};
  expect_invalid([&] { rope_cpu(x.data(), 2, 16, 2, 8, one, table); }, "positions.size()");
  expect_invalid([&] { rope_cpu(x.data(), 2, 16, 2, 8, past_end, table); }, "positions[1]");
  expect_invalid([&] { rope_cpu(x.data(), 2, 16, 2, 8, negative, table); }, "positions[0]");
  expect_invalid([&] { rope_table(16, 7, 10000.0); }, "head_dim");
  expect_invalid([&] { rope_table(16, 0, 10000.0); }, "head_dim");
  expect_invalid([&] { rope_table(0, 8, 10000.0); }, "max_position");
  expect_invalid([&] { rope_table(16, 8, 0.0); }, "theta");
  expect_invalid(
      [&] {
        rope_cpu(x.data(), 2, 16, 2, 8, std::vector<int64_t>{0, 1}, table, RopeStyle(7));
      },
      "RoPE style");
  for (const RopeStyle style : {RopeStyle::adjacent, RopeStyle::half_split})
    EXPECT_EQ(parse_rope_style(to_string(style)), style);
  expect_invalid([] { parse_rope_style("neox"); }, "RoPE style = neox");
}

// ---- SwiGLU -------------------------------------------------------------------------------------------

TEST(Swiglu, EqualsTheOracle) {
  SeededRng rng;
  for (const int64_t hidden : {172, 1, 33, 64})
    for (const int64_t rows : {int64_t(1), rng.integer(2, 70)}) {
      const Tensor<float> gate_up = rng.normal_tensor({rows, 2 * hidden}, 0.0f, 4.0f);  // silu's tails too
      Tensor<float> out({rows, hidden});
      out.poison();
      swiglu_cpu(gate_up, out);
      Tensor<double> want({rows, hidden});
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < hidden; ++j) {
          const double a = gate_up[r * 2 * hidden + j], b = gate_up[r * 2 * hidden + hidden + j];
          want[r * hidden + j] = a / (1.0 + std::exp(-a)) * b;
        }
      const Comparison c = compare_to_oracle(out, want, tolerance_for(Precision::fp32));
      EXPECT_TRUE(c.ok) << "rows " << rows << ", hidden " << hidden << ":\n" << c.report();
    }
}

TEST(Swiglu, BadShapesAreRejectedNamingTheArgument) {
  SeededRng rng;
  Tensor<float> out({3, 4}), wrong({3, 5});
  expect_invalid([&] { swiglu_cpu(rng.normal_tensor({3, 9}), out); }, "gate_up.shape[1]");
  expect_invalid([&] { swiglu_cpu(rng.normal_tensor({3, 8}), wrong); }, "out.shape");
  expect_invalid([&] { swiglu_cpu(rng.normal_tensor({3, 8, 1}), out); }, "gate_up.shape");
}

// ---- the row-wise layers: a row alone gets what it gets in a batch ----------------------------------

TEST(RowWiseLayers, ARowAloneIsBitIdenticalToTheSameRowInABatch) {
  SeededRng rng;
  const int64_t rows = 37, dim = 172, heads = 3, head_dim = 56, hidden = 86;
  const Tensor<float> x = rng.normal_tensor({rows, dim});
  std::vector<float> weight(static_cast<size_t>(dim));
  for (float& g : weight) g = 1.0f + rng.normal(0.0f, 0.1f);
  const std::vector<float> table = rope_table(512, head_dim, 10000.0);
  std::vector<int64_t> positions(static_cast<size_t>(rows));
  for (auto& p : positions) p = rng.integer(0, 511);

  Tensor<float> norm_all({rows, dim}), rope_all = x, glu_all({rows, hidden});
  norm_all.poison();
  glu_all.poison();
  rms_norm_cpu(x, weight, 1e-5f, norm_all);
  rope_cpu(rope_all.data(), rows, dim, heads, head_dim, positions, table);
  swiglu_cpu(x, glu_all);
  for (int64_t r = 0; r < rows; ++r) {
    const Tensor<float> row = testing::rows_of(x, r, 1);
    Tensor<float> norm({1, dim}), roped = row, glu({1, hidden});
    norm.poison();
    glu.poison();
    rms_norm_cpu(row, weight, 1e-5f, norm);
    rope_cpu(roped.data(), 1, dim, heads, head_dim, std::vector<int64_t>{positions[size_t(r)]}, table);
    swiglu_cpu(row, glu);
    EXPECT_TRUE(same_bits(norm.data(), norm_all.data() + r * dim, dim)) << "rms_norm, row " << r;
    EXPECT_TRUE(same_bits(roped.data(), rope_all.data() + r * dim, dim)) << "rope, row " << r;
    EXPECT_TRUE(same_bits(glu.data(), glu_all.data() + r * hidden, hidden)) << "swiglu, row " << r;
  }
}

}  // namespace
}  // namespace inferlab
