#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/half.h"

namespace inferlab {
namespace {

TEST(Half, KnownBitPatterns) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7BFF);               // largest fp16
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7C00);               // rounds to +Inf
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3F80);
  EXPECT_EQ(bfloat16_bits_to_float(0xC040), -3.0f);
}

TEST(Half, EveryHalfRoundTripsExactly) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float value = half_bits_to_float(static_cast<uint16_t>(bits));
    if (std::isnan(value)) continue;
    ASSERT_EQ(float_to_half_bits(value), bits) << "bits 0x" << std::hex << bits;
  }
}

TEST(Half, RoundsToNearest) {
  for (float x : {0.1f, 3.14159f, -1234.567f, 1e-5f, 6e-8f}) {
    const float back = half_bits_to_float(float_to_half_bits(x));
    const float ulp = std::abs(x) < std::ldexp(1.0f, -14) ? std::ldexp(1.0f, -24)
                                                          : std::ldexp(1.0f, std::ilogb(x) - 10);
    EXPECT_LE(std::abs(back - x), ulp / 2) << x;
  }
}

}  // namespace
}  // namespace inferlab
