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

// ---- one cache for every format, layout and layer count (kernels/kv) ----

TEST(KvFormat, NamesReadBackAndBadNamesAreRefused) {
  for (const KvFormat format :
       {KvFormat::fp32(), KvFormat::fp16(), KvFormat::int8(), KvFormat::int8(KeyScaling::per_channel),
        KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16), KvFormat::int8(KeyScaling::per_channel, ScaleDtype::fp16),
        KvFormat::fp8()})
    EXPECT_EQ(parse_kv_format(format.name()), format) << format.name();
  EXPECT_EQ(KvFormat::int8(KeyScaling::per_channel, ScaleDtype::fp16).name(), "int8-channel/fp16-scales");
  EXPECT_EQ(KvFormat::int8().scale_bytes(), 4u);
  EXPECT_EQ(KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16).scale_bytes(), 2u);
  EXPECT_EQ(KvFormat::fp8().scale_bytes(), 4u);
  EXPECT_EQ(KvFormat::fp16().scale_bytes(), 0u);
  for (const char* bad : {"int4", "fp16/fp16-scales", "int8/bf16-scales", ""})
    EXPECT_NE(invalid_argument_message([&] { parse_kv_format(bad); }).find("cache format = " + std::string(bad)),
              std::string::npos)
        << bad;
}

// Every layer keeps its own rows (and INT8 scales) under one set of lengths: data written to
// layer l reads back from layer l only, an append writes every layer before one commit, and a
// one-layer append() or an out-of-range layer is refused.
TEST(KvCache, LayersShareTheLengthsAndKeepTheirOwnRows) {
  testing::SeededRng rng;
  for (const KvFormat format : {KvFormat::fp32(), KvFormat::fp16(), KvFormat::int8(KeyScaling::per_channel),
                                KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16), KvFormat::fp8()}) {
    const int64_t layers = 3, G = 2, d = 12, L = 5;
    KvCache cache({2, G, 8, d, layers}, format);
    KvCache single({2, G, 8, d}, format);  // layer l's twin: one layer holding the same data
    std::vector<KvCache> twins;
    for (int64_t l = 0; l < layers; ++l) twins.emplace_back(KvCacheShape{2, G, 8, d}, format);
    for (int64_t l = 0; l < layers; ++l)
      for (int64_t b = 0; b < 2; ++b) {
        const Tensor<float> k = rng.normal_tensor({G, L - b, d}), v = rng.normal_tensor({G, L - b, d});
        cache.prefill(b, k, v, l);
        twins[size_t(l)].prefill(b, k, v);
      }
    for (int64_t l = 0; l < layers; ++l) {
      const Tensor<float> k_new = rng.normal_tensor({2, G, d}), v_new = rng.normal_tensor({2, G, d});
      cache.store_appended(k_new, v_new, l);
      twins[size_t(l)].append(k_new, v_new);
    }
    EXPECT_EQ(cache.lengths(), (std::vector<int32_t>{L, L - 1})) << "store_appended must not commit";
    cache.commit_append();
    EXPECT_EQ(cache.lengths(), (std::vector<int32_t>{L + 1, L})) << format.name();
    for (int64_t l = 0; l < layers; ++l)
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t g = 0; g < G; ++g)
          for (int64_t t = 0; t < 8; ++t)
            for (int64_t c = 0; c < d; ++c) {
              const float expected_k = twins[size_t(l)].key(b, g, t, c), got_k = cache.key(b, g, t, c, l);
              const float expected_v = twins[size_t(l)].value(b, g, t, c), got_v = cache.value(b, g, t, c, l);
              if (t < cache.length(b)) {
                ASSERT_EQ(got_k, expected_k) << format.name() << " layer " << l << " (" << b << ", " << g << ", " << t
                                             << ", " << c << ")";
                ASSERT_EQ(got_v, expected_v) << format.name() << " layer " << l;
              } else {  // poisoned (per-channel INT8 K scales are per head, not per row: V's NaN scale poisons)
                ASSERT_TRUE(std::isnan(got_v) && (format.per_channel() || std::isnan(got_k)))
                    << format.name() << ": slot past the length";
              }
            }
    EXPECT_NE(invalid_argument_message([&] { cache.append(rng.normal_tensor({2, G, d}), rng.normal_tensor({2, G, d})); })
                  .find("num_layers = 3"),
              std::string::npos);
    EXPECT_NE(invalid_argument_message([&] { (void)cache.keys(0, 3); }).find("layer = 3"), std::string::npos);
    EXPECT_EQ(cache.bytes(), 3 * twins[0].bytes()) << format.name();
  }
}

// A kernel asks for the rows as the type the format stores; any other type is a programming
// error (std::logic_error naming the format), never a reinterpretation.
TEST(KvCache, RowsOfTheWrongTypeAreRefused) {
  const KvCache fp16({1, 1, 4, 8}, KvDtype::fp16), int8({1, 1, 4, 8}, KvFormat::int8());
  EXPECT_NO_THROW((void)fp16.rows<uint16_t>());
  EXPECT_THROW((void)fp16.rows<float>(), std::logic_error);
  EXPECT_NO_THROW((void)(int8.rows<int8_t, float>()));
  EXPECT_THROW((void)(int8.rows<int8_t, uint16_t>()), std::logic_error);
  EXPECT_THROW((void)int8.k_scales_fp16(), std::logic_error);
  EXPECT_THROW((void)fp16.k_int8(), std::logic_error);
}

// The contiguous layout: one run per (sequence, KV head), rows max_seq_len apart per head; the
// row of a token is also the index of its per-token scale.
TEST(KvLayout, ContiguousRowsAndRuns) {
  const KvCache cache({3, 2, 10, 4}, KvFormat::int8());
  const ContiguousLayout& layout = cache.layout();
  EXPECT_EQ(layout.row(2, 1, 7), (2 * 2 + 1) * 10 + 7);
  EXPECT_EQ(layout.run(2, 1, 7).row, layout.row(2, 1, 7));
  EXPECT_EQ(layout.run(2, 1, 7).length, 3);
  EXPECT_EQ(cache.token_scale_index(2, 1, 7), layout.row(2, 1, 7));
  EXPECT_EQ(cache.rows<int8_t>().k, cache.k_int8().data());
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
