#include "tests/support/prefill_steps_check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "common/compare.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"

namespace inferlab::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The outputs' dimensions: scores [num_heads, seq_len, seq_len], softmax [rows, row_len], C [m, n].
const AxisNames kScoresAxes{"head", "query", "key"};
const AxisNames kMatrixAxes{"row", "col"};

// Compares @p out with @p expected, where @p masked marks the elements that must be exactly
// @p masked_value (−∞ scores, 0 probabilities) and the others go through compare_to_oracle().
::testing::AssertionResult compare_masked(const std::string& name, uint64_t seed, const Tensor<float>& out,
                                          Tensor<double> expected, const std::vector<bool>& masked, float masked_value,
                                          Tolerance tolerance, const AxisNames& axes) {
  Tensor<float> unmasked = out;
  int64_t wrong = 0, first_wrong = -1;
  for (int64_t i = 0; i < out.size(); ++i) {
    if (!masked[size_t(i)]) continue;
    if (!(out[i] == masked_value)) {
      if (wrong++ == 0) first_wrong = i;
    }
    unmasked[i] = 0.0f;
    expected[i] = 0.0;
  }
  if (wrong > 0) {
    // NaN first (a masked element left at the NaN poison is one): the count and where.
    int64_t nans = 0, first_nan = -1;
    for (int64_t i = 0; i < out.size(); ++i)
      if (std::isnan(out[i]) && nans++ == 0) first_nan = i;
    std::ostringstream nan_line;
    if (nans > 0)
      nan_line << non_finite_summary(nans, nans, out.size()) << ", first at "
               << format_position(unflatten(first_nan, out.shape()), axes) << "; ";
    return ::testing::AssertionFailure() << name << ": " << nan_line.str() << wrong << " of the masked elements "
                                         << (wrong == 1 ? "is" : "are") << " not " << masked_value << "; the first, at "
                                         << format_position(unflatten(first_wrong, out.shape()), axes) << ", is "
                                         << out[first_wrong] << "\n  " << seed_note(seed);
  }
  const Comparison comparison = compare_to_oracle(unmasked, expected, tolerance, axes);
  if (!comparison.ok)
    return ::testing::AssertionFailure() << name << ": " << comparison.report() << "\n  " << seed_note(seed);
  return ::testing::AssertionSuccess();
}

// The fp32 tolerance for a matrix product whose elements are sums of products with absolute
// sums @p magnitude (Σ_t |a_t·b_t| per element). Rounding errs by up to about √K·u of the
// magnitude, not of the result: an element near 0 through cancellation (a 1×1 product, a
// single score) has a large relative error however well it is computed. So the relative
// Frobenius bound is widened by the condition number ‖magnitude‖ / ‖ref‖, as
// attention_tolerance() widens the attention bound by the size of the logits.
Tolerance masked_product_tolerance(const Tensor<double>& expected, const Tensor<double>& magnitude,
                            const std::vector<bool>& masked) {
  double ref_sq = 0.0, magnitude_sq = 0.0;
  for (int64_t i = 0; i < expected.size(); ++i) {
    if (masked[size_t(i)]) continue;
    ref_sq += expected[i] * expected[i];
    magnitude_sq += magnitude[i] * magnitude[i];
  }
  return inferlab::product_tolerance(Precision::fp32, ref_sq > 0.0 ? std::sqrt(magnitude_sq / ref_sq) : 1.0);
}

}  // namespace

// ---- scores ----

::testing::AssertionResult scores_match_oracle(const ScoresFn& run, const AttentionCase& c) {
  SeededRng rng;
  const Tensor<float> q = rng.normal_tensor({c.num_heads, c.seq_len, c.head_dim}, 0.0f, c.logit_scale);
  const Tensor<float> k = rng.normal_tensor({c.num_kv_heads, c.seq_len, c.head_dim});
  const Shape shape{c.num_heads, c.seq_len, c.seq_len};
  const std::string name = "scores " + c.name();
  Tensor<float> out;
  const ::testing::AssertionResult ran = host_same_under_schedules_seeded(
      name, rng.seed(), [&](Tensor<float>& s) { run(q, k, c.causal, s); }, shape, kScoresAxes, out);
  if (!ran) return ran;

  // The oracle: float64 dot products.
  const int64_t L = c.seq_len, d = c.head_dim, group = c.num_heads / c.num_kv_heads;
  const double scale = 1.0 / std::sqrt(double(d));
  Tensor<double> expected(shape), magnitude(shape);
  std::vector<bool> masked(size_t(expected.size()), false);
  for (int64_t h = 0; h < c.num_heads; ++h) {
    const int64_t g = h / group;
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < L; ++j) {
        const int64_t at = (h * L + i) * L + j;
        if (c.causal && j > i) {
          masked[size_t(at)] = true;
          expected[at] = -kInf;
          continue;
        }
        double dot = 0.0, size = 0.0;
        for (int64_t x = 0; x < d; ++x) {
          const double product = double(q[(h * L + i) * d + x]) * double(k[(g * L + j) * d + x]);
          dot += product;
          size += std::abs(product);
        }
        expected[at] = dot * scale;
        magnitude[at] = size * scale;
      }
  }
  const Tolerance tolerance = masked_product_tolerance(expected, magnitude, masked);
  return compare_masked(name, rng.seed(), out, std::move(expected), masked, -std::numeric_limits<float>::infinity(),
                        tolerance, kScoresAxes);
}

// ---- softmax ----

std::string SoftmaxCase::name() const {
  std::ostringstream out;
  out << "rows" << rows << "_len" << row_len << "_threads" << threads_per_block << (masked ? "_masked" : "");
  if (logit_scale != 3.0f) out << "_logits_x" << static_cast<int>(logit_scale);
  return out.str();
}

::testing::AssertionResult softmax_matches_oracle(const SoftmaxFn& run, const SoftmaxCase& c) {
  SeededRng rng;
  const Shape shape{c.rows, c.row_len};
  Tensor<float> scores = rng.normal_tensor(shape, 0.0f, c.logit_scale);
  std::vector<bool> masked(size_t(scores.size()), false);
  if (c.masked) {
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = r % c.row_len + 1; j < c.row_len; ++j) {
        masked[size_t(r * c.row_len + j)] = true;
        scores[r * c.row_len + j] = -std::numeric_limits<float>::infinity();
      }
  }
  const std::string name = "softmax " + c.name();
  Tensor<float> out;
  const ::testing::AssertionResult ran = host_same_under_schedules_seeded(
      name, rng.seed(), [&](Tensor<float>& p) { run(scores, p, c.threads_per_block); }, shape, kMatrixAxes, out);
  if (!ran) return ran;

  // The oracle: float64 softmax of each row.
  Tensor<double> expected(shape);
  double max_abs_logit = 0.0;
  for (int64_t r = 0; r < c.rows; ++r) {
    const float* s = scores.data() + r * c.row_len;
    double* p = expected.data() + r * c.row_len;
    double max_value = -kInf;
    for (int64_t j = 0; j < c.row_len; ++j) max_value = std::max(max_value, double(s[j]));
    double sum = 0.0;
    for (int64_t j = 0; j < c.row_len; ++j) {
      sum += (p[j] = std::exp(double(s[j]) - max_value));
      if (std::isfinite(s[j])) max_abs_logit = std::max(max_abs_logit, std::abs(double(s[j])));
    }
    for (int64_t j = 0; j < c.row_len; ++j) p[j] /= sum;
  }
  return compare_masked(name, rng.seed(), out, std::move(expected), masked, 0.0f,
                        attention_tolerance(Precision::fp32, max_abs_logit), kMatrixAxes);
}

// ---- gemm ----

std::string GemmCase::name() const {
  std::ostringstream out;  // (not "m" + std::to_string(m): g++ 12 warns -Wrestrict on it, wrongly)
  out << "m" << m << "_n" << n << "_k" << k;
  return out.str();
}

std::vector<GemmCase> odd_gemm_cases() {
  const int64_t sizes[] = {1, 17, 31, 33, 64, 127};
  std::vector<GemmCase> cases;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) cases.push_back({sizes[i], sizes[j], sizes[(i + 2 * j + 1) % 6]});
  return cases;
}

::testing::AssertionResult gemm_matches_oracle(const GemmFn& run, const GemmCase& c) {
  SeededRng rng;
  const Tensor<float> a = rng.normal_tensor({c.m, c.k});
  const Tensor<float> b = rng.normal_tensor({c.k, c.n});
  const Shape shape{c.m, c.n};
  const std::string name = "gemm " + c.name();
  Tensor<float> out;
  const ::testing::AssertionResult ran = host_same_under_schedules_seeded(
      name, rng.seed(), [&](Tensor<float>& p) { run(a, b, p); }, shape, kMatrixAxes, out);
  if (!ran) return ran;

  // The oracle: the float64 product.
  Tensor<double> expected(shape), magnitude(shape);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = 0.0, size = 0.0;
      for (int64_t t = 0; t < c.k; ++t) {
        const double product = double(a[i * c.k + t]) * double(b[t * c.n + j]);
        sum += product;
        size += std::abs(product);
      }
      expected[i * c.n + j] = sum;
      magnitude[i * c.n + j] = size;
    }
  const std::vector<bool> masked(size_t(out.size()), false);
  const Tolerance tolerance = masked_product_tolerance(expected, magnitude, masked);
  return compare_masked(name, rng.seed(), out, std::move(expected), masked, 0.0f, tolerance, kMatrixAxes);
}

}  // namespace inferlab::testing
