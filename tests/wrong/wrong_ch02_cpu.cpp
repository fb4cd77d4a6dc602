// Wrong chapter-02 CPU attention implementations: the mistakes that cache blocking invites.
// The fixture is a small scalar copy of cpu/blocked's structure (blocks of query rows, the
// block's scores materialised, key tiles, softmax, P·V) with switchable mistakes; each test runs
// the shared check (tests/support/attention_check.h) and expects it to reject the fixture on
// the odd shapes that expose the mistake — and to accept it with no mistake switched on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/attention.h"
#include "tests/support/attention_check.h"

namespace inferlab {
namespace {

using testing::AttentionCase;

constexpr int64_t kBlockRows = 16;  // query rows per block
constexpr int64_t kKeyTile = 16;    // keys per tile of Q·Kᵀ and P·V

struct Mistakes {
  bool drop_last_partial_block = false;  // blocks = L / BR (floor): the last rows stay unwritten
  bool drop_last_key_tile = false;       // key tiles = L / BK (floor): the last keys are never seen
  bool mask_whole_tiles_only = false;    // causal mask per key tile: keys past the diagonal inside
                                         // the diagonal tile leak in
  bool stale_scores = false;             // causal: scores computed up to the block's last key but
                                         // softmax runs over the whole row (stale values from
                                         // the previous block are not masked)
  bool normalise_per_tile = false;       // softmax sums per key tile instead of per row
};

void blocked_attention(const Mistakes& m, const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                       bool causal, Tensor<float>& out) {
  const AttentionShape s = attention_shape(q, k, v, causal);
  check_attention_output(out, s);
  const int64_t L = s.seq_len, d = s.head_dim;
  const float scale = 1.0f / std::sqrt(float(d));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t num_blocks = m.drop_last_partial_block ? L / kBlockRows : (L + kBlockRows - 1) / kBlockRows;
  const int64_t key_end = m.drop_last_key_tile ? L / kKeyTile * kKeyTile : L;
  std::vector<float> scores(static_cast<size_t>(kBlockRows * L), 0.0f);  // one block, reused

  for (int64_t h = 0; h < s.num_heads; ++h) {
    const int64_t g = h / s.group_size();
    for (int64_t block = 0; block < num_blocks; ++block) {
      const int64_t i0 = block * kBlockRows, rows = std::min(kBlockRows, L - i0);
      const int64_t kv_end = causal ? std::min(key_end, i0 + rows) : key_end;
      // S for the keys this block can see, tile by tile.
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        for (int64_t j0 = 0; j0 < kv_end; j0 += kKeyTile) {
          for (int64_t j = j0; j < std::min(j0 + kKeyTile, kv_end); ++j) {
            float dot = 0.0f;
            for (int64_t c = 0; c < d; ++c) dot += q[(h * L + i) * d + c] * k[(g * L + j) * d + c];
            const bool masked = causal && (m.mask_whole_tiles_only ? j0 > i : j > i);
            scores[size_t(r * L + j)] = masked ? neg_inf : dot * scale;
          }
        }
      }
      // Softmax of each row over its visible keys, then O = P·V.
      for (int64_t r = 0; r < rows; ++r) {
        float* row = scores.data() + r * L;
        const int64_t row_end = m.stale_scores ? key_end : kv_end;
        float max_score = neg_inf;
        for (int64_t j = 0; j < row_end; ++j) max_score = std::max(max_score, row[j]);
        std::vector<float> tile_sums(static_cast<size_t>((row_end + kKeyTile - 1) / kKeyTile), 0.0f);
        float sum = 0.0f;
        for (int64_t j = 0; j < row_end; ++j) {
          row[j] = std::exp(row[j] - max_score);
          sum += row[j];
          tile_sums[size_t(j / kKeyTile)] += row[j];
        }
        for (int64_t c = 0; c < d; ++c) {
          float acc = 0.0f;
          for (int64_t j = 0; j < row_end; ++j)
            acc += row[j] / (m.normalise_per_tile ? tile_sums[size_t(j / kKeyTile)] : sum) * v[(g * L + j) * d + c];
          out[(h * L + i0 + r) * d + c] = acc;
        }
      }
    }
  }
}

// True when the shared check rejects the fixture on at least one of @p cases.
bool rejected(const Mistakes& mistakes, const std::vector<AttentionCase>& cases) {
  auto run = [&](const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                 Tensor<float>& out) { blocked_attention(mistakes, q, k, v, causal, out); };
  for (const AttentionCase& c : cases)
    if (!testing::attention_matches_oracle(run, Precision::fp32, c)) return true;
  return false;
}

TEST(WrongCh02Cpu, TheHarnessAcceptsTheBlockedFixtureWithNoMistakes) {
  EXPECT_FALSE(rejected(Mistakes{}, testing::odd_attention_cases(127)));
}

TEST(WrongCh02Cpu, DroppedLastPartialBlockIsRejected) {
  // L = 33 = 2 full blocks of 16 + 1 row: that row stays poisoned (NaN).
  EXPECT_TRUE(rejected({.drop_last_partial_block = true}, {{2, 1, 33, 64, false}}));
  // A multiple of the block size hides the bug: the odd shapes are what catch it.
  EXPECT_FALSE(rejected({.drop_last_partial_block = true}, {{2, 1, 32, 64, false}}));
}

TEST(WrongCh02Cpu, DroppedLastKeyTileIsRejected) {
  EXPECT_TRUE(rejected({.drop_last_key_tile = true}, {{1, 1, 31, 80, false}}));
}

TEST(WrongCh02Cpu, CausalMaskAtTileGranularityIsRejected) {
  EXPECT_TRUE(rejected({.mask_whole_tiles_only = true}, {{2, 2, 31, 64, true}}));
}

TEST(WrongCh02Cpu, StaleScoresPastTheBlockAreRejected) {
  // Only causal runs compute fewer columns than the row holds; the first block sees zeros,
  // later blocks see the previous block's scores.
  EXPECT_TRUE(rejected({.stale_scores = true}, {{1, 1, 33, 64, true}}));
}

TEST(WrongCh02Cpu, SoftmaxNormalisedPerKeyTileIsRejected) {
  EXPECT_TRUE(rejected({.normalise_per_tile = true}, {{1, 1, 33, 96, false}}));
}

}  // namespace
}  // namespace inferlab
