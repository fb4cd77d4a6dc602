// A layout is a mapping, not a kernel: the paged layout of kv_layout.h maps (sequence, KV head,
// token) to rows of a pool of blocks, its runs end at block ends, and a slot (vLLM's slot
// mapping) names one token's rows for every KV head. Chapter 06's tests
// (tests/06-paged-attention) run every decode version over it.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/kv/kv_layout.h"

namespace inferlab {
namespace {

// The paged mapping itself: rows inside one block are consecutive, a run ends at its block's
// end, and the block table decides where each block lives.
TEST(KvLayouts, PagedRowsRunsAndSlots) {
  const std::vector<int32_t> table{5, 2, 7, 0, 1, 3};  // 2 sequences × 3 blocks
  const PagedLayout layout{table.data(), 3, 4, 2};
  EXPECT_EQ(layout.row(0, 0, 0), (5 * 2 + 0) * 4);
  EXPECT_EQ(layout.row(0, 1, 6), (2 * 2 + 1) * 4 + 2);
  EXPECT_EQ(layout.row(1, 0, 9), (3 * 2 + 0) * 4 + 1);
  EXPECT_EQ(layout.run(0, 1, 6).length, 2);
  EXPECT_EQ(layout.run(1, 0, 8).length, 4);
  EXPECT_EQ(layout.run(1, 0, 8).row, layout.row(1, 0, 8));
  EXPECT_EQ(layout.slot(1, 9), 3 * 4 + 1);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 12; ++t)
      for (int64_t g = 0; g < 2; ++g) EXPECT_EQ(layout.slot_row(layout.slot(b, t), g), layout.row(b, g, t));
  const ContiguousLayout contiguous{3, 10};
  EXPECT_EQ(contiguous.slot(2, 7), 27);
  EXPECT_EQ(contiguous.slot_row(27, 1), contiguous.row(2, 1, 7));
  EXPECT_EQ(contiguous.slot_head(27, 1), contiguous.head(2, 1));
}

}  // namespace
}  // namespace inferlab
