#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "common/check.h"
#include "common/tensor.h"

namespace inferlab {
namespace {

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "(no exception)";
}

TEST(Check, RequireNamesArgumentValueAndRule) {
  EXPECT_EQ(message_of([] { require_positive("seq_len", 0); }), "seq_len = 0: must be > 0");
  EXPECT_EQ(message_of([] { require(false, "head_dim", 81, "must be a multiple of 16"); }),
            "head_dim = 81: must be a multiple of 16");
  EXPECT_NO_THROW(require_positive("seq_len", 1));
}

TEST(Check, NotImplementedMessage) {
  const NotImplemented error("softmax_row");
  EXPECT_STREQ(error.what(), "not implemented yet: softmax_row");
}

TEST(Tensor, ShapeChecksNameTheTensor) {
  const Tensor<float> q({2, 3, 4});
  EXPECT_EQ(q.size(), 24);
  EXPECT_EQ(q.dim(-1), 4);
  EXPECT_EQ(message_of([&] { check_shape(q, {2, 3, 5}, "q"); }), "q.shape = [2, 3, 4]: must be [2, 3, 5]");
  EXPECT_EQ(message_of([&] { check_rank(q, 2, "k"); }), "k.shape = [2, 3, 4]: must have 2 dimensions");
  EXPECT_THROW(Tensor<float>({2, -1}), std::invalid_argument);
  EXPECT_THROW(Tensor<float>({2, 2}, std::vector<float>(3)), std::invalid_argument);
}

TEST(Tensor, PoisonIsNaNForFloatsAndMaxForIntegers) {
  Tensor<float> f({3});
  f.poison();
  for (float x : f.span()) EXPECT_TRUE(std::isnan(x));
  Tensor<int8_t> i({3});
  i.poison();
  for (int8_t x : i.span()) EXPECT_EQ(x, 127);
}

}  // namespace
}  // namespace inferlab
