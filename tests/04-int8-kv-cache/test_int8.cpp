// Chapter 04: the INT8 KV cache and INT8 decode. Compiled three times (CMakeLists.txt): the cpu
// versions, the CUDA kernels on the sim backend (the SIMT emulator, plus thread-schedule
// checks) and on the cuda backend (skips, saying why, without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "kernels/decode/cuda_decode.h"
#include "kernels/kv/cuda_append.h"
#include "kernels/kv/kv_factories.h"
#include "kernels/registry.h"
#include "kernels/timing/cuda_timing.h"
#include "tests/support/int8_check.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"
#include "tests/support/test_backend.h"

namespace inferlab {
namespace {

using testing::Int8Case;

constexpr Backend kBackend = testing::kTestBackend;  // tests/support/test_backend.h
constexpr int64_t kMaxLength = testing::kTestMaxLength;

const KvAppendFn& append_fn() {
  return kv_append_version_for(kBackend, KvDtype::int8).run;
}

// ---- quantization: saturation, round trip, non-finite input ----

#if !defined(INFERLAB_TEST_BACKEND_SIM) && !defined(INFERLAB_TEST_BACKEND_CUDA)
TEST(Int8Quantize, RoundsThenClampsNeverWraps) {
  EXPECT_TRUE(testing::quantizer_saturates(quantize_int8));
}

TEST(Int8Quantize, Fp16ScalesRoundUpSoNothingSaturates) {
  EXPECT_TRUE(testing::fp16_scales_round_up());
}

TEST(Int8Cache, Fp16ScalesSaveTwoBytesPerScale) {
  const KvCacheShape shape{3, 2, 17, 40};
  for (KeyScaling scaling : {KeyScaling::per_token, KeyScaling::per_channel}) {
    const KvCache fp32(shape, KvFormat::int8(scaling)), fp16(shape, KvFormat::int8(scaling, ScaleDtype::fp16));
    const size_t scales =
        size_t(shape.batch * shape.num_kv_heads) *
        size_t(shape.max_seq_len + (scaling == KeyScaling::per_token ? shape.max_seq_len : shape.head_dim));
    EXPECT_EQ(fp32.scale_bytes(), 4 * scales) << to_string(scaling);
    EXPECT_EQ(fp16.scale_bytes(), 2 * scales) << to_string(scaling);
    EXPECT_EQ(fp32.bytes() - fp16.bytes(), 2 * scales) << to_string(scaling);
    EXPECT_EQ(fp16.bytes(), size_t(2 * shape.elements()) + 2 * scales) << to_string(scaling);
  }
}
#endif

// The step is the one the chapter defines — max|x|/127 of the group, from the data — for every
// scaling, scale type and prompt (prefilled, or none: per-channel K then calibrates on the first
// appended token).
TEST(Int8Append, StepIsMaxOver127OfEveryGroup) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  for (ScaleDtype scales : {ScaleDtype::fp32, ScaleDtype::fp16})
    for (KeyScaling scaling : {KeyScaling::per_token, KeyScaling::per_channel})
      for (int64_t prompt : {int64_t(0), int64_t(5)})
        EXPECT_TRUE(testing::int8_scales_match_definition(append_fn(), scaling, scales, prompt, 4))
            << to_string(scaling) << ", " << to_string(scales) << " scales, prompt " << prompt;
}

TEST(Int8Append, RoundTripWithinHalfAStepPerTokenScales) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  EXPECT_TRUE(testing::round_trip_within_half_step(append_fn(), KeyScaling::per_token, 5));
}

TEST(Int8Append, PerChannelScalesSaturateOutsideThePromptRange) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  EXPECT_TRUE(testing::round_trip_within_half_step(append_fn(), KeyScaling::per_channel, 5));
}

TEST(Int8Append, Fp16ScalesRoundTripWithinHalfTheirStep) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  EXPECT_TRUE(testing::round_trip_within_half_step(append_fn(), KeyScaling::per_token, 5, ScaleDtype::fp16));
  EXPECT_TRUE(testing::round_trip_within_half_step(append_fn(), KeyScaling::per_channel, 5, ScaleDtype::fp16));
}

TEST(Int8Append, NonFiniteInputIsAnErrorNamingSequenceAndHead) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  EXPECT_TRUE(testing::append_rejects_non_finite(append_fn()));
}

TEST(Int8Append, FullSequenceIsAnError) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  KvCache cache({2, 1, 1, 8}, KvFormat::int8(KeyScaling::per_token));
  Tensor<float> k_new({2, 1, 8}), v_new({2, 1, 8});
  for (int64_t i = 0; i < k_new.size(); ++i) k_new[i] = 0.5f + float(i), v_new[i] = 1.0f - float(i);
  append_fn()(cache, k_new, v_new);
  EXPECT_THROW(append_fn()(cache, k_new, v_new), std::invalid_argument);
  EXPECT_EQ(cache.length(0), 1);
}

#if !defined(INFERLAB_TEST_BACKEND_CUDA)
// The device append writes the same bytes and scales as the CPU append.
TEST(Int8Append, SameBytesAsTheCpuAppend) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  for (ScaleDtype scales : {ScaleDtype::fp32, ScaleDtype::fp16})
    for (KeyScaling scaling : {KeyScaling::per_token, KeyScaling::per_channel}) {
      KvCache device({3, 2, 6, 36}, KvFormat::int8(scaling, scales)), host({3, 2, 6, 36}, KvFormat::int8(scaling, scales));
      for (int t = 0; t < 4; ++t) {
        Tensor<float> k_new({3, 2, 36}), v_new({3, 2, 36});
        for (int64_t i = 0; i < k_new.size(); ++i)
          k_new[i] = rng.normal() * (i % 36 == 3 ? 10.0f : 1.0f), v_new[i] = rng.normal();
        append_fn()(device, k_new, v_new);
        kv_append_version_for(Backend::cpu, KvDtype::int8).run(host, k_new, v_new);
      }
      EXPECT_TRUE(std::ranges::equal(device.k_int8(), host.k_int8())) << to_string(scaling);
      EXPECT_TRUE(std::ranges::equal(device.v_int8(), host.v_int8())) << to_string(scaling);
      EXPECT_EQ(device.saturated_count(), host.saturated_count()) << to_string(scaling);
      if (scales == ScaleDtype::fp32) {
        for (size_t i = 0; i < host.v_scales().size(); ++i) {
          if (!std::isnan(host.v_scales()[i])) {
            EXPECT_EQ(device.v_scales()[i], host.v_scales()[i]) << i;
          }
        }
      } else {  // fp16 scales: the same bits, NaN bits alike
        EXPECT_TRUE(std::ranges::equal(device.v_scale_bytes(), host.v_scale_bytes())) << to_string(scaling);
        EXPECT_TRUE(std::ranges::equal(device.k_scale_bytes(), host.k_scale_bytes())) << to_string(scaling);
      }
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t g = 0; g < 2; ++g)
          for (int64_t t = 0; t < 4; ++t)
            for (int64_t c = 0; c < 36; ++c)
              EXPECT_EQ(device.key_scale(b, g, t, c), host.key_scale(b, g, t, c)) << to_string(scales);
    }
}
#endif

// ---- decode: within the derived bound of the fp32 decode; exact over its own dequantized cache ----

using Int8VersionCase = testing::QuantizedVersionCase;

class Int8Decode : public ::testing::TestWithParam<Int8VersionCase> {};

TEST_P(Int8Decode, WithinTheBoundDerivedFromTheQuantizationStep) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  const Int8VersionCase& c = GetParam();
  testing::Int8Errors errors;
  EXPECT_TRUE(testing::int8_decode_within_budget(c.version->run, append_fn(), c.shape, &errors)) << c.version->name;
  std::cout << c.version->name << " " << c.shape.name() << ": relative error " << errors.rel_frobenius << ", max |err| "
            << errors.max_abs << " (" << errors.worst_fraction_of_bound() << " of its head's bound at worst), softmax KL "
            << errors.max_kl << "\n  per head, max |err| beside its own bound: " << errors.per_head() << "\n";
}

INSTANTIATE_TEST_SUITE_P(Ch04, Int8Decode,
                         ::testing::ValuesIn(testing::quantized_version_cases(KvDtype::int8, kBackend,
                                                                              testing::int8_decode_cases(kMaxLength))),
                         testing::quantized_version_case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Int8Decode);

// Per-channel K scales beat per-token ones on keys with outlier channels (the KIVI observation).
// Also prints the error budget the lesson quotes: per-token vs per-channel K, per-channel with 16
// tokens appended past the calibrating prompt, and fp16 scales — every row of a dataset on the
// *same* data (one seed: the same K, V and last-step queries), so the rows differ only by the
// scheme; five datasets (seeds s … s + 4, s fresh or INFERLAB_SEED), so the spread between
// datasets shows beside the differences between schemes.
#if !defined(INFERLAB_TEST_BACKEND_SIM) && !defined(INFERLAB_TEST_BACKEND_CUDA)
TEST(Int8Decode, PerChannelKeyScalesHelpWithOutlierChannels) {
  const DecodeVersion& version = find_decode_version("cpu/decode_int8_simd", Backend::cpu, KvDtype::int8);
  const Int8Case per_token{{257, 129}, 0, 8, 2, 128, KeyScaling::per_token, 4, 20.0f};
  Int8Case per_channel = per_token, appended = per_token, fp16_scales = per_token;
  per_channel.key_scaling = appended.key_scaling = KeyScaling::per_channel;
  appended.steps = 16;
  fp16_scales.scale_dtype = ScaleDtype::fp16;
  const uint64_t first_seed = Rng::fresh_seed();
  std::cout << "outliers x20 in 4 of 128 K channels, L 257/129, 8 heads, 2 KV heads, vs the fp32 decode;\n"
            << "every row of a dataset on the same K, V and queries (seed shown):\n";
  for (uint64_t seed = first_seed; seed < first_seed + 5; ++seed) {
    std::cout << " dataset seed " << seed << "\n";
    testing::Int8Errors token_errors, channel_errors;
    for (const Int8Case* c : std::vector<const Int8Case*>{&per_token, &fp16_scales, &per_channel, &appended}) {
      testing::Int8Errors errors;
      ASSERT_TRUE(testing::int8_decode_within_budget(version.run, append_fn(), *c, &errors, seed));
      std::cout << "  " << c->name() << ": relative error " << errors.rel_frobenius << ", max |err| "
                << errors.max_abs << ", softmax KL (max over heads) " << errors.max_kl << ", saturated "
                << errors.saturated << "\n";
      if (c == &per_token) token_errors = errors;
      if (c == &per_channel) channel_errors = errors;
    }
    EXPECT_LT(channel_errors.max_kl, token_errors.max_kl) << "seed " << seed;
  }
}
#endif

#if defined(INFERLAB_TEST_BACKEND_SIM)
// ---- sim: the same decode launch under forward, reverse and shuffled thread orders ----
TEST(Int8DecodeSchedules, SameBitsUnderEveryThreadOrder) {
  testing::SeededRng rng;
  for (KeyScaling scaling : {KeyScaling::per_token, KeyScaling::per_channel})
    for (int64_t d : {int64_t(80), int64_t(36)}) {
      Tensor<float> k({2, 2, 40, d}), v({2, 2, 40, d});
      for (int64_t i = 0; i < k.size(); ++i) k[i] = rng.normal(), v[i] = rng.normal();
      const ScaleDtype scales = d == 80 ? ScaleDtype::fp16 : ScaleDtype::fp32;
      const KvCache cache = make_kv_cache(k, v, {37, 9}, KvFormat::int8(scaling, scales));
      Tensor<float> q({2, 8, d});
      for (int64_t i = 0; i < q.size(); ++i) q[i] = rng.normal();
      EXPECT_TRUE(testing::host_same_under_schedules([&](Tensor<float>& out) { sim::decode_int8_cuda(q, cache, out); },
                                                     q.shape()))
          << to_string(scaling) << " d = " << d;
    }
}

// The device-level timing harness of bench_ch04 (cuda/decode_int8 on a device-resident cache)
// runs on sim (its times mean nothing there) and checks its arguments.
TEST(Int8DecodeDeviceTiming, HarnessRunsAndChecksItsArguments) {
  const DecodeShape shape{2, 4, 2, 40, 80};
  for (KeyScaling scaling : {KeyScaling::per_token, KeyScaling::per_channel})
    EXPECT_GT(sim::decode_int8_seconds_per_call(scaling, shape, 33, 1, 2), 0.0) << to_string(scaling);
  EXPECT_THROW(sim::decode_int8_seconds_per_call(KeyScaling::per_token, shape, 41, 0, 1), std::invalid_argument);
  EXPECT_THROW(sim::decode_int8_seconds_per_call(KeyScaling::per_token, shape, 33, 0, 0), std::invalid_argument);
}

TEST(Int8AppendSchedules, SameBytesUnderEveryThreadOrder) {
  testing::SeededRng rng;
  Tensor<float> k_new({2, 3, 40}), v_new({2, 3, 40});
  for (int64_t i = 0; i < k_new.size(); ++i) k_new[i] = rng.normal(), v_new[i] = rng.normal();
  KvCache first({2, 3, 4, 40}, KvFormat::int8(KeyScaling::per_token));
  sim::int8_append_cuda(first, k_new, v_new);
  for (const simt::Schedule& schedule : testing::default_schedules()) {
    simt::ScopedSchedule scoped(schedule);
    KvCache again({2, 3, 4, 40}, KvFormat::int8(KeyScaling::per_token));
    sim::int8_append_cuda(again, k_new, v_new);
    EXPECT_TRUE(std::ranges::equal(again.k_int8(), first.k_int8()));
    EXPECT_TRUE(std::ranges::equal(again.v_int8(), first.v_int8()));
  }
}
#endif

}  // namespace
}  // namespace inferlab
