#include "tests/support/warmup_check.h"

#include <cmath>
#include <sstream>

#include "common/compare.h"
#include "common/tolerance.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"

namespace inferlab::testing {
namespace {

const AxisNames kMatrixAxes{"row", "col"};
const AxisNames kSumAxes{"element"};

::testing::AssertionResult compared(const std::string& name, uint64_t seed, const Tensor<float>& out,
                                    const Tensor<double>& expected, Tolerance tolerance, const AxisNames& axes) {
  const Comparison comparison = compare_to_oracle(out, expected, tolerance, axes);
  if (!comparison.ok)
    return ::testing::AssertionFailure() << name << ": " << comparison.report() << "\n  " << seed_note(seed);
  return ::testing::AssertionSuccess();
}

}  // namespace

std::string MatrixCase::name() const {
  std::ostringstream out;
  out << "rows" << rows << "_cols" << cols;
  return out.str();
}

std::vector<MatrixCase> odd_matrix_cases() {
  std::vector<MatrixCase> cases;
  for (int64_t rows : {1, 7, 8, 33, 70})
    for (int64_t cols : {1, 31, 32, 33, 129, 300}) cases.push_back({rows, cols});
  return cases;
}

// ---- W1 ----

::testing::AssertionResult scale_add_matches_oracle(const ScaleAddFn& run, const MatrixCase& c) {
  SeededRng rng;
  const Tensor<float> x = rng.normal_tensor({c.rows, c.cols});
  const Tensor<float> row_scale = rng.normal_tensor({c.rows}, 0.0f, 2.0f);
  const Tensor<float> col_bias = rng.normal_tensor({c.cols});
  const Shape shape{c.rows, c.cols};
  const std::string name = "scale_add_2d " + c.name();
  Tensor<float> out;
  const ::testing::AssertionResult ran = host_same_under_schedules_seeded(
      name, rng.seed(), [&](Tensor<float>& o) { run(x, row_scale, col_bias, o); }, shape, kMatrixAxes, out);
  if (!ran) return ran;

  // The oracle, and the magnitude Σ|terms| of each element: a sum that cancels to near 0 has a
  // large relative error in fp32 however it is computed (product_tolerance's condition number).
  Tensor<double> expected(shape);
  double ref_sq = 0.0, magnitude_sq = 0.0;
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t col = 0; col < c.cols; ++col) {
      const double product = double(row_scale[r]) * double(x[r * c.cols + col]);
      const double value = product + double(col_bias[col]);
      const double magnitude = std::abs(product) + std::abs(double(col_bias[col]));
      expected[r * c.cols + col] = value;
      ref_sq += value * value;
      magnitude_sq += magnitude * magnitude;
    }
  const double condition = ref_sq > 0.0 ? std::sqrt(magnitude_sq / ref_sq) : 1.0;
  return compared(name, rng.seed(), out, expected, product_tolerance(Precision::fp32, condition), kMatrixAxes);
}

// ---- W2 ----

std::string SumCase::name() const {
  std::ostringstream out;
  out << "n" << n << "_threads" << threads_per_block;
  return out.str();
}

::testing::AssertionResult vector_sum_matches_oracle(const VectorSumFn& run, const SumCase& c) {
  SeededRng rng;
  const Tensor<float> x = rng.normal_tensor({c.n}, 0.5f, 1.0f);
  const std::string name = "vector_sum " + c.name();
  Tensor<float> out;
  const ::testing::AssertionResult ran = host_same_under_schedules_seeded(
      name, rng.seed(), [&](Tensor<float>& s) { run(x, s, c.threads_per_block); }, {1}, kSumAxes, out);
  if (!ran) return ran;

  double sum = 0.0, magnitude = 0.0;
  for (int64_t i = 0; i < c.n; ++i) {
    sum += double(x[i]);
    magnitude += std::abs(double(x[i]));
  }
  Tensor<double> expected({1}, sum);
  const double condition = sum != 0.0 ? magnitude / std::abs(sum) : 1.0;
  return compared(name, rng.seed(), out, expected, product_tolerance(Precision::fp32, condition), kSumAxes);
}

// ---- W3 ----

::testing::AssertionResult transpose_matches_oracle(const TransposeFn& run, const MatrixCase& c) {
  SeededRng rng;
  const Tensor<float> in = rng.normal_tensor({c.rows, c.cols});
  const Shape shape{c.cols, c.rows};
  const std::string name = "transpose_tiled " + c.name();
  Tensor<float> out;
  const ::testing::AssertionResult ran =
      host_same_under_schedules_seeded(name, rng.seed(), [&](Tensor<float>& o) { run(in, o); }, shape, kMatrixAxes, out);
  if (!ran) return ran;

  Tensor<double> expected(shape);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t col = 0; col < c.cols; ++col) expected[col * c.rows + r] = double(in[r * c.cols + col]);
  return compared(name, rng.seed(), out, expected, Tolerance{0.0, 0.0}, kMatrixAxes);
}

}  // namespace inferlab::testing
