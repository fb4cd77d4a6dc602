// FLOP/byte accounting against values worked out by hand (see chapters/01-naive-cpu-attention).
#include <gtest/gtest.h>

#include "common/cost.h"

namespace inferlab {
namespace {

TEST(Cost, PrefillFlopsAre4L2dPerHead) {
  const Cost c = prefill_attention_cost({1, 1, 2048, 128}, TrafficModel::article, 2.0);
  EXPECT_DOUBLE_EQ(c.flops, 4.0 * 2048 * 2048 * 128);  // 2 147 483 648
  EXPECT_DOUBLE_EQ(c.flops, 2147483648.0);
}

TEST(Cost, ArticleModelAIis2dOver1Plus4dOverL) {
  // L = 2048, d = 128, fp16: bytes = 2·(L² + 4Ld) = 2·(4 194 304 + 1 048 576) = 10 485 760.
  const Cost c = prefill_attention_cost({1, 1, 2048, 128}, TrafficModel::article, 2.0);
  EXPECT_DOUBLE_EQ(c.bytes, 10485760.0);
  EXPECT_DOUBLE_EQ(c.arithmetic_intensity(), 204.8);  // 2d / (1 + 4d/L) = 256 / 1.25
  // L ≪ 4d: AI ≈ L/2. L = 16, d = 4096: 2·4096/(1 + 1024) = 7.99…
  EXPECT_NEAR(prefill_attention_cost({1, 1, 16, 4096}, TrafficModel::article, 2.0).arithmetic_intensity(),
              8192.0 / 1025.0, 1e-9);
  // L ≫ 4d: AI saturates at 2d = 256, not L/2.
  EXPECT_NEAR(prefill_attention_cost({1, 1, 1 << 20, 128}, TrafficModel::article, 2.0).arithmetic_intensity(),
              256.0 / (1.0 + 512.0 / (1 << 20)), 1e-9);
}

TEST(Cost, UnfusedAndFusedModels) {
  // Unfused: 4L² score elements. L = 1024, d = 64, fp32: 4·(4·1024² + 4·1024·64) = 17 825 792.
  const Cost unfused = prefill_attention_cost({1, 1, 1024, 64}, TrafficModel::unfused, 4.0);
  EXPECT_DOUBLE_EQ(unfused.bytes, 17825792.0);
  // Fused: only Q, K, V, O. AI = L/2 exactly in fp16, for every L.
  for (int64_t L : {1, 33, 1000, 8192}) {
    EXPECT_DOUBLE_EQ(prefill_attention_cost({1, 1, L, 128}, TrafficModel::fused, 2.0).arithmetic_intensity(),
                     L / 2.0);
  }
}

TEST(Cost, GqaCountsKvOncePerKvHead) {
  // 8 query heads sharing 2 KV heads, L = 10, d = 4, 1 byte/element, fused:
  // Q+O: 8·2·40 = 640; K+V: 2·2·40 = 160.
  EXPECT_DOUBLE_EQ(prefill_attention_cost({8, 2, 10, 4}, TrafficModel::fused, 1.0).bytes, 800.0);
}

TEST(Cost, CausalUsefulFlopsAreAboutHalf) {
  const Cost c = prefill_attention_cost({1, 1, 4, 2}, TrafficModel::article, 2.0, FlopConvention::causal_useful);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 2 * 4 * 5);  // 2·d·L·(L+1) = 80 (dense: 128)
}

TEST(Cost, DecodeAIIsAboutOneInFp16) {
  // One query, L = 4096 cached tokens, d = 128: FLOPs 4Ld = 2 097 152; bytes 2·(2Ld + 2d).
  const Cost c = decode_attention_cost({1, 1, 4096, 128}, 2.0);
  EXPECT_DOUBLE_EQ(c.flops, 2097152.0);
  EXPECT_DOUBLE_EQ(c.bytes, 2.0 * (2.0 * 4096 * 128 + 2.0 * 128));
  EXPECT_NEAR(c.arithmetic_intensity(), 1.0, 1e-3);
  // GQA multiplies it by the group size.
  EXPECT_NEAR(decode_attention_cost({8, 1, 4096, 128}, 2.0).arithmetic_intensity(), 8.0, 0.02);
}

TEST(Cost, BadDimsAreRejectedByName) {
  EXPECT_THROW(prefill_attention_cost({1, 1, 0, 64}, TrafficModel::article, 2.0), std::invalid_argument);
  try {
    prefill_attention_cost({6, 4, 8, 64}, TrafficModel::article, 2.0);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("num_heads = 6"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace inferlab
