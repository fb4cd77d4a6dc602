#pragma once
/// @file prefill_steps_check.h
/// The checks of the chapter-02 kernels that compute one step of unfused prefill attention —
/// scores = Q·Kᵀ/√d, the row softmax, the matrix product — shared by the graded exercise tests
/// (tests/02-gpu-prefill/test_student.cpp) and the wrong fixtures they must reject
/// (tests/wrong/wrong_ch02_gpu.cpp).
///
/// Each check draws fresh random inputs (the seed is printed on failure), runs the host-level
/// launcher under every schedule of default_schedules() with its output poisoned each time
/// (host_same_under_schedules: a bit that differs between thread orders fails as a race, a
/// kernel fault fails with the emulator's report), then compares the output with a float64
/// oracle under the fp32 tolerance of common/tolerance.h.

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "tests/support/attention_check.h"

namespace inferlab::testing {

// ---- scores = Q·Kᵀ/√d ----

/// Fills @p scores [num_heads, seq_len, seq_len] from @p q [num_heads, seq_len, head_dim] and
/// @p k [num_kv_heads, seq_len, head_dim]: q_h,i · k_g,j / √head_dim with g = h / group size,
/// and −∞ for j > i when @p causal.
using ScoresFn =
    std::function<void(const Tensor<float>& q, const Tensor<float>& k, bool causal, Tensor<float>& scores)>;

/// Checks @p run on the shape of @p c (its logit_scale scales Q): masked scores must be exactly
/// −∞, the others within the fp32 tolerance of the float64 dot products (its relative bound
/// widened by the products' condition number ‖Σ|q·k|‖ / ‖Σ q·k‖: a score that is near 0 through
/// cancellation cannot have a small relative error in fp32).
::testing::AssertionResult scores_match_oracle(const ScoresFn& run, const AttentionCase& c);

// ---- row softmax ----

/// One softmax test shape.
struct SoftmaxCase {
  int64_t rows = 1;             ///< number of rows (one block each)
  int64_t row_len = 1;          ///< elements per row
  int threads_per_block = 128;  ///< blockDim.x (a multiple of 32)
  bool masked = false;          ///< row r keeps its first (r mod row_len) + 1 entries, the rest are −∞
  float logit_scale = 3.0f;     ///< the entries are normal with this standard deviation

  /// "rows5_len33_threads128_masked" — usable in messages and test names.
  std::string name() const;
};

/// Fills @p probs (same shape as @p scores, [rows, row_len]) with the softmax of each row of
/// @p scores, run by blocks of @p threads_per_block threads.
using SoftmaxFn = std::function<void(const Tensor<float>& scores, Tensor<float>& probs, int threads_per_block)>;

/// Checks @p run on @p c: masked entries must come out exactly 0, the others within
/// attention_tolerance(fp32, max |logit|) of the float64 softmax.
::testing::AssertionResult softmax_matches_oracle(const SoftmaxFn& run, const SoftmaxCase& c);

// ---- C = A·B ----

/// One matrix-product test shape: A is [m, k], B is [k, n].
struct GemmCase {
  int64_t m = 1;  ///< rows of A and C
  int64_t n = 1;  ///< columns of B and C
  int64_t k = 1;  ///< columns of A, rows of B

  /// "m17_n33_k127".
  std::string name() const;
};

/// Odd sizes: every M ∈ {1, 17, 31, 33, 64, 127} meets every N of the same set, with K walking
/// through the set too (36 shapes, none but 64 a multiple of a 16-wide tile).
std::vector<GemmCase> odd_gemm_cases();

/// Fills @p c [m, n] with @p a [m, k] · @p b [k, n].
using GemmFn = std::function<void(const Tensor<float>& a, const Tensor<float>& b, Tensor<float>& c)>;

/// Checks @p run on @p c against the float64 product under the fp32 tolerance, its relative
/// bound widened by the condition number ‖Σ|a·b|‖ / ‖a·b‖ (as for the scores).
::testing::AssertionResult gemm_matches_oracle(const GemmFn& run, const GemmCase& c);

}  // namespace inferlab::testing
