#pragma once
// The batch-invariance check of a linear layer (y = x · wᵀ), shared by chapter 07's layer tests
// (test_layers.cpp, on linear_cpu) and the wrong fixtures that must fail it
// (tests/wrong/wrong_ch07_linear.cpp).
//
// Batch invariance, bit for bit: a row of x · wᵀ is the same 32 bits in every element whether it
// is computed in one call of N rows or in a call of M rows at any offset. The check computes the
// N-row product once, then for every M in 1 … max_rows and several offsets (0, 1, N − M and a
// random one — sub-batches that start at the big call's first row, inside it, and end at its last
// row, crossing any internal block boundary) the product of rows [offset, offset + M) alone, and
// compares each row with memcmp. Every output is poisoned (NaN) before its call, so a row the
// layer forgets to write differs too.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "common/rng.h"
#include "common/tensor.h"

namespace inferlab::testing {

/// A linear layer under test: y = x · wᵀ with x [rows, in], w [out, in], y [rows, out].
using LinearFn = std::function<void(const Tensor<float>& x, const Tensor<float>& w, Tensor<float>& y)>;

/// One shape of the check: w is [out, in]; the big call has @ref total_rows rows and the
/// sub-batches 1 … @ref max_rows rows (max_rows ≤ total_rows).
struct LinearInvarianceCase {
  int64_t out = 0;          ///< output features
  int64_t in = 0;           ///< input features
  int64_t max_rows = 70;    ///< sub-batch sizes 1 … max_rows
  int64_t total_rows = 80;  ///< rows of the big call
};

/// "out 70 × in 172".
inline std::string describe(const LinearInvarianceCase& c) {
  return "w [" + std::to_string(c.out) + ", " + std::to_string(c.in) + "]";
}

/// Rows [first, first + count) of @p x as their own tensor.
inline Tensor<float> rows_of(const Tensor<float>& x, int64_t first, int64_t count) {
  const int64_t width = x.dim(1);
  std::vector<float> values(x.data() + first * width, x.data() + (first + count) * width);
  return Tensor<float>({count, width}, std::move(values));
}

/// Success when every row of every sub-batch call of @p linear is bit-identical to the same row
/// of the one big call, on random x and w (drawn from @p rng) of @p c's shape. The failure names
/// the first differing (M, offset, row, element) with both values and their bits, and how many
/// of the (M, offset) pairs differ.
inline ::testing::AssertionResult linear_is_batch_invariant(const LinearFn& linear, const LinearInvarianceCase& c,
                                                            Rng& rng) {
  const int64_t N = c.total_rows;
  const Tensor<float> x = rng.normal_tensor({N, c.in}), w = rng.normal_tensor({c.out, c.in});
  Tensor<float> big({N, c.out});
  big.poison();
  linear(x, w, big);

  int64_t pairs = 0, differing = 0;
  std::string first;
  for (int64_t M = 1; M <= c.max_rows; ++M) {
    std::vector<int64_t> offsets = {0, 1, N - M, rng.integer(0, N - M)};
    std::sort(offsets.begin(), offsets.end());
    offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
    for (const int64_t offset : offsets) {
      if (offset + M > N) continue;
      ++pairs;
      Tensor<float> y({M, c.out});
      y.poison();
      linear(rows_of(x, offset, M), w, y);
      if (std::memcmp(y.data(), big.data() + offset * c.out, size_t(M * c.out) * sizeof(float)) == 0) continue;
      ++differing;
      if (!first.empty()) continue;
      for (int64_t i = 0; i < M * c.out; ++i) {
        const float got = y[i], want = big[(offset * c.out) + i];
        if (std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want)) continue;
        std::ostringstream s;
        s << std::setprecision(9) << "a call of M = " << M << " rows at offset " << offset << ": row " << offset + i / c.out
          << ", output " << i % c.out << " = " << got << " (bits 0x" << std::hex << std::bit_cast<uint32_t>(got)
          << ") but " << std::dec << want << " (bits 0x" << std::hex << std::bit_cast<uint32_t>(want) << std::dec
          << ") in the call of all " << N << " rows";
        first = s.str();
        break;
      }
    }
  }
  if (differing == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << describe(c) << ": not batch-invariant: " << differing << " of " << pairs
                                       << " (M, offset) sub-batch calls differ in some bit from the one big call; first: "
                                       << first;
}

}  // namespace inferlab::testing
