#pragma once
/// @file warmup_check.h
/// The checks of chapter 02's warm-up kernels — W1 the 2-D grid-stride scale-and-add, W2 the
/// shared-memory vector sum, W3 the tiled transpose — shared by the graded exercise tests
/// (tests/02-gpu-prefill/test_student.cpp) and the wrong fixtures they must reject
/// (tests/wrong/wrong_ch02_warmup.cpp).
///
/// As in prefill_steps_check.h, each check draws fresh random inputs (the seed is printed on
/// failure), runs the host-level launcher under every schedule of default_schedules() with its
/// output poisoned each time (a bit that differs between thread orders fails as a race, a kernel
/// fault — memcheck, racecheck, initcheck, a divergent barrier — fails with the emulator's
/// report), then compares the output with a float64 oracle: W1 and W2 under the fp32 tolerance
/// of common/tolerance.h, W3 bit for bit (a transpose moves bits, it computes nothing).

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/tensor.h"

namespace inferlab::testing {

/// One [rows, cols] matrix shape (W1's x, W3's input).
struct MatrixCase {
  int64_t rows = 1;  ///< rows of the matrix
  int64_t cols = 1;  ///< columns of the matrix

  /// "rows7_cols300".
  std::string name() const;
};

/// Odd sizes: rows ∈ {1, 7, 8, 33, 70} against cols ∈ {1, 31, 32, 33, 129, 300} (30 shapes):
/// smaller than a block, around a warp, and, for W1's grid capped at 4 × 4 blocks of 32 × 8,
/// more columns than 128 and more rows than 32 (a grid-stride loop is needed).
std::vector<MatrixCase> odd_matrix_cases();

// ---- W1: out[r][c] = row_scale[r] · x[r][c] + col_bias[c] ----

/// Fills @p out [rows, cols] from @p x [rows, cols], @p row_scale [rows] and @p col_bias [cols].
using ScaleAddFn = std::function<void(const Tensor<float>& x, const Tensor<float>& row_scale,
                                      const Tensor<float>& col_bias, Tensor<float>& out)>;

/// Checks @p run on the shape of @p c against the float64 scale-and-add (fp32 tolerance).
::testing::AssertionResult scale_add_matches_oracle(const ScaleAddFn& run, const MatrixCase& c);

// ---- W2: sum[0] = Σ x ----

/// One vector-sum shape.
struct SumCase {
  int64_t n = 1;                ///< elements of x
  int threads_per_block = 256;  ///< blockDim.x (a power of two from 32 to 1024)

  /// "n100003_threads256".
  std::string name() const;
};

/// Fills @p sum [1] with the sum of @p x [n], run by blocks of @p threads_per_block threads.
using VectorSumFn = std::function<void(const Tensor<float>& x, Tensor<float>& sum, int threads_per_block)>;

/// Checks @p run on @p c: x is normal with mean 0.5 (the sum is about n/2, so little cancels),
/// compared with the float64 sum under the fp32 tolerance widened by the condition number
/// Σ|x| / |Σx|.
::testing::AssertionResult vector_sum_matches_oracle(const VectorSumFn& run, const SumCase& c);

// ---- W3: out[c][r] = in[r][c] ----

/// Fills @p out [cols, rows] with the transpose of @p in [rows, cols].
using TransposeFn = std::function<void(const Tensor<float>& in, Tensor<float>& out)>;

/// Checks @p run on the shape of @p c: every output bit must equal the input's.
::testing::AssertionResult transpose_matches_oracle(const TransposeFn& run, const MatrixCase& c);

}  // namespace inferlab::testing
