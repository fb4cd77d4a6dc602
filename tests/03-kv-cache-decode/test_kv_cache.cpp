// Chapter 03: the KV cache itself (layout, prefill, append, capacity, poison) and the decode
// contract (shape checks, cost, the float64 oracle against the chapter-02 prefill oracle).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "common/half.h"
#include "kernels/attention/attention.h"
#include "kernels/decode/decode.h"
#include "kernels/registry.h"
#include "tests/support/decode_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

template <class F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "(no std::invalid_argument)";
}

TEST(KvCache, StartsEmptyAndPoisoned) {
  for (KvDtype dtype : {KvDtype::fp32, KvDtype::fp16}) {
    const KvCache cache({2, 3, 5, 8}, dtype);
    EXPECT_EQ(cache.lengths(), (std::vector<int32_t>{0, 0}));
    EXPECT_EQ(cache.bytes_per_tensor(), size_t(2 * 3 * 5 * 8) * bytes_per_element(dtype));
    EXPECT_TRUE(std::isnan(cache.key(1, 2, 4, 7)));
    EXPECT_TRUE(std::isnan(cache.value(0, 0, 0, 0)));
  }
}

TEST(KvCache, RejectsBadSizes) {
  EXPECT_NE(invalid_argument_message([] {
              KvCache({0, 1, 1, 1}, KvDtype::fp32);
            }).find("batch = 0"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([] {
              KvCache({1, 1, -3, 1}, KvDtype::fp16);
            }).find("max_seq_len = -3"),
            std::string::npos);
}

TEST(KvCache, PrefillStoresTheTokensAndPoisonsTheRest) {
  testing::SeededRng rng;
  KvCache cache({2, 2, 7, 5}, KvDtype::fp32);
  const Tensor<float> k = rng.normal_tensor({2, 3, 5}), v = rng.normal_tensor({2, 3, 5});
  cache.prefill(1, k, v);
  EXPECT_EQ(cache.length(1), 3);
  EXPECT_EQ(cache.length(0), 0);
  for (int64_t g = 0; g < 2; ++g)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t c = 0; c < 5; ++c) {
        ASSERT_EQ(cache.key(1, g, t, c), k[(g * 3 + t) * 5 + c]);
        ASSERT_EQ(cache.value(1, g, t, c), v[(g * 3 + t) * 5 + c]);
      }
  EXPECT_TRUE(std::isnan(cache.key(1, 0, 3, 0)));
  EXPECT_TRUE(std::isnan(cache.value(1, 1, 6, 4)));
  // The layout is [batch][num_kv_heads][max_seq_len][head_dim].
  EXPECT_EQ(cache.k_fp32()[cache.shape().offset(1, 1, 2) + 4], k[(1 * 3 + 2) * 5 + 4]);
  EXPECT_EQ(cache.keys(1).shape(), (Shape{2, 3, 5}));
  // A shorter prefill over an existing sequence re-poisons its old tokens.
  cache.prefill(1, rng.normal_tensor({2, 1, 5}), rng.normal_tensor({2, 1, 5}));
  EXPECT_TRUE(std::isnan(cache.key(1, 1, 1, 0)));
  EXPECT_NE(invalid_argument_message([&] {
              cache.prefill(0, rng.normal_tensor({2, 8, 5}), rng.normal_tensor({2, 8, 5}));
            }).find("exceeds the cache's max_seq_len = 7"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] {
              cache.prefill(0, rng.normal_tensor({3, 2, 5}), rng.normal_tensor({3, 2, 5}));
            }).find("k.shape"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] { cache.prefill(2, k, v); }).find("sequence = 2"), std::string::npos);
}

TEST(KvCache, Fp16CacheRoundsToNearestEven) {
  testing::SeededRng rng;
  KvCache cache({1, 1, 4, 9}, KvDtype::fp16);
  const Tensor<float> k = rng.normal_tensor({1, 1, 9});
  const Tensor<float> v = rng.normal_tensor({1, 1, 9});
  cache.append(k, v);
  for (int64_t c = 0; c < 9; ++c) {
    EXPECT_EQ(cache.k_fp16()[c], float_to_half_bits(k[c]));
    EXPECT_EQ(cache.value(0, 0, 0, c), half_bits_to_float(float_to_half_bits(v[c])));
  }
  EXPECT_THROW(cache.k_fp32(), std::logic_error);
}

TEST(KvCache, AppendWritesSlotLengthAndAdvances) {
  testing::SeededRng rng;
  KvCache cache({3, 2, 4, 6}, KvDtype::fp32);
  cache.set_lengths({0, 2, 3});
  const Tensor<float> k = rng.normal_tensor({3, 2, 6}), v = rng.normal_tensor({3, 2, 6});
  cache.append(k, v);
  EXPECT_EQ(cache.lengths(), (std::vector<int32_t>{1, 3, 4}));
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t g = 0; g < 2; ++g)
      for (int64_t c = 0; c < 6; ++c) {
        const int64_t slot = cache.length(b) - 1;
        ASSERT_EQ(cache.key(b, g, slot, c), k[(b * 2 + g) * 6 + c]);
        ASSERT_EQ(cache.value(b, g, slot, c), v[(b * 2 + g) * 6 + c]);
      }
  EXPECT_NE(invalid_argument_message([&] {
              cache.append(rng.normal_tensor({3, 2, 5}), v);
            }).find("k_new.shape"),
            std::string::npos);
}

TEST(KvCache, AppendingPastCapacityIsAnErrorNotAnOverflow) {
  for (KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
    EXPECT_TRUE(testing::append_rejects_full_sequence(kv_append_version_for(Backend::cpu, dtype).run, dtype))
        << to_string(dtype);
}

TEST(KvCache, SetLengthsChecksTheRange) {
  KvCache cache({2, 1, 4, 4}, KvDtype::fp32);
  EXPECT_NE(invalid_argument_message([&] { cache.set_lengths({1, 5}); }).find("lengths[1] = 5"), std::string::npos);
  EXPECT_NE(invalid_argument_message([&] { cache.set_lengths({1}); }).find("lengths.size()"), std::string::npos);
}

TEST(DecodeContract, ShapeChecksNameTheArgument) {
  testing::SeededRng rng;
  KvCache cache({2, 2, 8, 16}, KvDtype::fp32);
  cache.set_lengths({3, 0});
  EXPECT_NE(invalid_argument_message([&] {
              decode_shape(rng.normal_tensor({2, 4, 16}), cache);
            }).find("lengths[1] = 0"),
            std::string::npos);
  cache.set_lengths({3, 1});
  EXPECT_NE(invalid_argument_message([&] {
              decode_shape(rng.normal_tensor({2, 3, 16}), cache);
            }).find("num_heads = 3: must be a multiple of num_kv_heads = 2"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] {
              decode_shape(rng.normal_tensor({3, 4, 16}), cache);
            }).find("q.shape"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] {
              decode_shape(rng.normal_tensor({2, 4, 8}), cache);
            }).find("q.shape"),
            std::string::npos);
  const DecodeShape shape = decode_shape(rng.normal_tensor({2, 4, 16}), cache);
  EXPECT_EQ(shape.group_size(), 2);
  Tensor<float> wrong_out({2, 4, 15});
  EXPECT_NE(invalid_argument_message([&] { check_decode_output(wrong_out, shape); }).find("out.shape"),
            std::string::npos);
  // Every registered version checks too, and refuses a cache of the wrong dtype.
  for (const DecodeVersion& version : decode_versions()) {
    if (version.backend != Backend::cpu) continue;
    const KvCache other({2, 2, 8, 16}, version.input == KvDtype::fp32 ? KvDtype::fp16 : KvDtype::fp32);
    Tensor<float> out({2, 4, 16});
    EXPECT_THROW(version.run(rng.normal_tensor({2, 4, 16}), other, out), std::invalid_argument) << version.name;
  }
}

TEST(DecodeContract, CostIsTheSumOverTheRaggedBatch) {
  KvCache cache({3, 2, 64, 128}, KvDtype::fp16);
  cache.set_lengths({10, 0, 50});
  const Cost cost = decode_step_cost(cache, 8);
  // 4·L·d FLOPs per query head; 2 bytes × (K and V of L tokens per KV head + q and out per head).
  EXPECT_DOUBLE_EQ(cost.flops, 8 * 4.0 * 60 * 128);
  EXPECT_DOUBLE_EQ(cost.bytes, 2.0 * (2 * 2.0 * 60 * 128 + 2 * 8 * 2.0 * 128));
  EXPECT_NEAR(cost.arithmetic_intensity(), 3.6, 0.2);  // ≈ group_size (4) × 1 FLOP/byte
}

TEST(DecodeContract, OracleIsRowTOfTheCausalPrefill) {
  testing::SeededRng rng;
  const int64_t T = 13, heads = 4, kv_heads = 2, d = 24;
  const Tensor<float> q = rng.normal_tensor({heads, T, d});
  const Tensor<float> k = rng.normal_tensor({kv_heads, T, d}), v = rng.normal_tensor({kv_heads, T, d});
  const Tensor<double> prefill = attention_reference(q, k, v, true);
  KvCache cache({1, kv_heads, T + 2, d}, KvDtype::fp32);
  cache.prefill(0, k, v);
  for (int64_t t : {T - 1, int64_t(6), int64_t(0)}) {  // shortening poisons the tail: longest first
    cache.set_lengths({t + 1});
    Tensor<float> q_t({1, heads, d});
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t c = 0; c < d; ++c) q_t[h * d + c] = q[(h * T + t) * d + c];
    const Tensor<double> decoded = decode_reference(q_t, cache);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t c = 0; c < d; ++c) ASSERT_NEAR(decoded[h * d + c], prefill[(h * T + t) * d + c], 1e-12);
  }
}

TEST(DecodeRegistry, ListsEveryVersionForBothCacheTypes) {
  for (const char* name : {"cpu/decode", "cpu/decode_simd"})
    for (KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
      EXPECT_EQ(find_decode_version(name, Backend::cpu, dtype).chapter, 3);
  for (KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
    EXPECT_EQ(find_decode_version("cuda/decode", Backend::sim, dtype).precision, precision_of(dtype));
  EXPECT_NE(invalid_argument_message([] {
              find_decode_version("cpu/nope", Backend::cpu, KvDtype::fp32);
            }).find("known: cpu/decode (cpu, fp32)"),
            std::string::npos);
  EXPECT_EQ(kv_append_version_for(Backend::sim, KvDtype::fp16).name, "cuda/append");
  EXPECT_EQ(kv_append_version_for(Backend::sim, KvDtype::int8).name, "cuda/append_int8");
  EXPECT_THROW(kv_append_version_for(Backend::sim, KvDtype::fp8), std::invalid_argument);
}

}  // namespace
}  // namespace inferlab
