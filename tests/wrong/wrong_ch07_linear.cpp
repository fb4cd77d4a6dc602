// Wrong chapter-07 linear layers, run through the very batch-invariance check that linear_cpu
// passes (tests/07-continuous-batching/linear_invariance_check.h: every row of x · wᵀ computed in
// calls of every M in 1 … 70 at several offsets, memcmp against one big call). Each fixture is a
// plain, correct-to-rounding GEMM whose summation order depends on the batch — the usual reason a
// served model's output changes with the load:
//  - split-K for small batches: with few rows a decode step cannot fill the cores over rows, so
//    the input dimension is cut into 4 slices whose partial sums are added at the end;
//  - pairwise tiles for big batches: from 8 rows on, the dot product is summed by two interleaved
//    accumulators (even and odd inputs), as a wider register tile would.
// Both must be rejected; the same loop with one fixed order for every batch must pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/07-continuous-batching/linear_invariance_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

enum class Order {
  fixed,             // in order, one accumulator, whatever the batch
  split_k_small,     // rows < 4: four slices of the input summed apart, then added
  pairwise_batched,  // rows ≥ 8: even and odd inputs in two accumulators, then added
};

testing::LinearFn plain_linear(Order order) {
  return [order](const Tensor<float>& x, const Tensor<float>& w, Tensor<float>& y) {
    const int64_t rows = x.dim(0), out = w.dim(0), in = w.dim(1);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        const float* a = x.data() + r * in;
        const float* b = w.data() + o * in;
        float sum = 0.0f;
        if (order == Order::split_k_small && rows < 4) {
          const int64_t slice = (in + 3) / 4;
          float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          for (int64_t k = 0; k < in; ++k) part[k / slice] = std::fma(a[k], b[k], part[k / slice]);
          sum = (part[0] + part[1]) + (part[2] + part[3]);
        } else if (order == Order::pairwise_batched && rows >= 8) {
          float even = 0.0f, odd = 0.0f;
          for (int64_t k = 0; k < in; ++k) (k % 2 == 0 ? even : odd) = std::fma(a[k], b[k], k % 2 == 0 ? even : odd);
          sum = even + odd;
        } else {
          for (int64_t k = 0; k < in; ++k) sum = std::fma(a[k], b[k], sum);
        }
        y[r * out + o] = sum;
      }
  };
}

const std::vector<testing::LinearInvarianceCase>& cases() {
  static const std::vector<testing::LinearInvarianceCase> c = {{70, 172}, {5, 33}, {17, 64}};
  return c;
}

TEST(WrongCh07Linear, OneFixedOrderPasses) {
  testing::SeededRng rng;
  for (const auto& c : cases()) EXPECT_TRUE(testing::linear_is_batch_invariant(plain_linear(Order::fixed), c, rng));
}

TEST(WrongCh07Linear, SplitKForSmallBatchesIsRejected) {
  testing::SeededRng rng;
  for (const auto& c : cases())
    EXPECT_FALSE(testing::linear_is_batch_invariant(plain_linear(Order::split_k_small), c, rng))
        << testing::describe(c);
}

TEST(WrongCh07Linear, PairwiseSumsForBigBatchesAreRejected) {
  testing::SeededRng rng;
  for (const auto& c : cases())
    EXPECT_FALSE(testing::linear_is_batch_invariant(plain_linear(Order::pairwise_batched), c, rng))
        << testing::describe(c);
}

}  // namespace
}  // namespace inferlab
