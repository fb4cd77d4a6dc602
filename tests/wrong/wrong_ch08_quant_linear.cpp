// A wrong chapter-08 quantized linear layer, run through chapter 07's batch-invariance check
// (tests/07-continuous-batching/linear_invariance_check.h) on Q8_0 weights. The fixture scales the
// whole batch by 1 / (its largest |x|) before quantizing the activations and scales y back — a
// per-tensor activation scale, as a GPU int8 GEMM often takes — so a row's codes and rounding depend
// on the other rows in the call. It must be rejected; linear_cpu over the same weights must pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/layers/layers.h"
#include "kernels/layers/weight.h"
#include "tests/07-continuous-batching/linear_invariance_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

testing::LinearFn quant_linear(bool batch_scale) {
  return [batch_scale](const Tensor<float>& x, const Tensor<float>& w, Tensor<float>& y) {
    const Weight q = Weight::convert(w, WeightFormat::q8_0);
    if (!batch_scale) return linear_cpu(x, q, y);
    float amax = 0.0f;
    for (int64_t i = 0; i < x.size(); ++i) amax = std::max(amax, std::fabs(x.data()[i]));
    const float s = amax > 0.0f ? 1.0f / amax : 1.0f;
    Tensor<float> xs(x.shape());
    for (int64_t i = 0; i < x.size(); ++i) xs.data()[i] = x.data()[i] * s;
    linear_cpu(xs, q, y);
    for (int64_t i = 0; i < y.size(); ++i) y.data()[i] /= s;
  };
}

const testing::LinearInvarianceCase kCase{37, 96, 20, 24};

TEST(WrongCh08QuantLinear, PerRowActivationQuantizationPasses) {
  testing::SeededRng rng;
  EXPECT_TRUE(testing::linear_is_batch_invariant(quant_linear(false), kCase, rng));
}

TEST(WrongCh08QuantLinear, BatchWideActivationScaleIsRejected) {
  testing::SeededRng rng;
  EXPECT_FALSE(testing::linear_is_batch_invariant(quant_linear(true), kCase, rng));
}

}  // namespace
}  // namespace inferlab
