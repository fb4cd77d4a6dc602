// ceil_div (common/ceil_div.h) against the definition: the smallest q with q · per ≥ count,
// found by counting, on fresh random data; exact at the edges; usable in constant expressions.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/ceil_div.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

static_assert(ceil_div(0, 4) == 0);
static_assert(ceil_div(1, 4) == 1);
static_assert(ceil_div(8, 4) == 2);
static_assert(ceil_div(9, 4) == 3);
static_assert(std::is_same_v<decltype(ceil_div(int64_t{9}, 4)), int64_t>);
static_assert(std::is_same_v<decltype(ceil_div(size_t{9}, 4)), size_t>);

// The definition, by counting: how many blocks of @p per until @p count items are covered.
int64_t blocks_by_counting(int64_t count, int64_t per) {
  int64_t blocks = 0;
  for (int64_t covered = 0; covered < count; covered += per) ++blocks;
  return blocks;
}

TEST(CeilDiv, IsTheSmallestNumberOfBlocksThatCoverTheCount) {
  testing::SeededRng rng;
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t per = rng.integer(1, 70);
    const int64_t count = rng.integer(0, 5000);
    const int64_t q = ceil_div(count, per);
    EXPECT_EQ(q, blocks_by_counting(count, per)) << count << " / " << per;
    EXPECT_GE(q * per, count);
    if (q > 0) {
      EXPECT_LT((q - 1) * per, count);
    }
    EXPECT_EQ(ceil_div(size_t(count), int(per)), size_t(q)) << "mixed types: " << count << " / " << per;
  }
}

TEST(CeilDiv, EdgesOfTheRange) {
  EXPECT_EQ(ceil_div(7, 1), 7);
  EXPECT_EQ(ceil_div(7, 7), 1);
  EXPECT_EQ(ceil_div(7, 8), 1);
  EXPECT_EQ(ceil_div(int64_t{1} << 40, 16), int64_t{1} << 36);
  EXPECT_EQ(ceil_div((int64_t{1} << 40) + 1, 16), (int64_t{1} << 36) + 1);
  const int big = std::numeric_limits<int>::max() / 2;
  EXPECT_EQ(ceil_div(big, big), 1);
  EXPECT_EQ(ceil_div(big + 1, big), 2);
}

}  // namespace
}  // namespace inferlab
