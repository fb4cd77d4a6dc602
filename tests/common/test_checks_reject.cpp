// Proof that no shared check can be passed by an implementation that computes nothing: every
// check of tests/support/*_check.h that judges an output, and compare_to_oracle() under every
// tolerance common/tolerance.h can produce, is fed
//   - the correct output (the control: the check must accept it, so a rejection below is the
//     corruption's doing),
//   - an all-zeros output,
//   - a constant output — the mean of the correct one, the constant closest to it,
//   - the correct output shuffled (a fixed random permutation of its elements),
// at every precision (fp32, tf32, fp16, bf16; fp32 and fp16 KV caches, INT8 and FP8) and at the
// extreme logit scales (×40, ×400), and each corruption must be rejected — by the comparison, not
// by a crash or a side check. Outputs whose elements are fixed by a mask (−∞ scores, zero
// probabilities) keep them; the corruption applies to the rest. The "correct" outputs are the
// float64 oracles themselves, on the inputs rounded to the precision under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/tolerance.h"
#include "kernels/attention/attention.h"
#include "kernels/decode/decode.h"
#include "kernels/kv/fp8_e4m3.h"
#include "kernels/kv/quantize.h"
#include "kernels/registry.h"
#include "tests/support/attention_check.h"
#include "tests/support/decode_check.h"
#include "tests/support/fp8_check.h"
#include "tests/support/int8_check.h"
#include "tests/support/prefill_steps_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

enum class Corruption { none, zeros, constant, shuffled };

constexpr Corruption kCorruptions[] = {Corruption::zeros, Corruption::constant, Corruption::shuffled};
constexpr Precision kPrecisions[] = {Precision::fp32, Precision::tf32, Precision::fp16, Precision::bf16};

const char* to_string(Corruption corruption) {
  switch (corruption) {
    case Corruption::none: return "correct";
    case Corruption::zeros: return "all zeros";
    case Corruption::constant: return "constant (the mean of the correct output)";
    case Corruption::shuffled: return "shuffled";
  }
  return "?";
}

// Applies @p corruption to the elements of @p x that are not fixed (fixed[i], when given: masked
// elements keep their value). The permutation depends on @p seed and the count only, so a fake
// run twice (under several thread schedules) writes the same bits both times.
void corrupt(std::span<float> x, Corruption corruption, uint64_t seed, const std::vector<bool>* fixed = nullptr) {
  std::vector<size_t> free;
  for (size_t i = 0; i < x.size(); ++i)
    if (fixed == nullptr || !(*fixed)[i]) free.push_back(i);
  switch (corruption) {
    case Corruption::none: return;
    case Corruption::zeros:
      for (const size_t i : free) x[i] = 0.0f;
      return;
    case Corruption::constant: {
      double sum = 0.0;
      for (const size_t i : free) sum += x[i];
      const float mean = free.empty() ? 0.0f : float(sum / double(free.size()));
      for (const size_t i : free) x[i] = mean;
      return;
    }
    case Corruption::shuffled: {
      std::vector<size_t> order = free;
      std::mt19937_64 engine(seed);
      std::shuffle(order.begin(), order.end(), engine);
      std::vector<float> values;
      for (const size_t i : order) values.push_back(x[i]);
      for (size_t n = 0; n < free.size(); ++n) x[free[n]] = values[n];
      return;
    }
  }
}

void corrupt(Tensor<float>& x, Corruption corruption, uint64_t seed, const std::vector<bool>* fixed = nullptr) {
  corrupt(x.span(), corruption, seed, fixed);
}

// The control must pass; each corruption must fail with @p why in its message (the comparison
// rejected it, not something else).
void expect_only_the_control_passes(const std::function<::testing::AssertionResult(Corruption)>& check,
                                    const std::string& what, const std::string& why) {
  const ::testing::AssertionResult control = check(Corruption::none);
  ASSERT_TRUE(control) << what << ": the correct output must pass for the rejections to mean anything";
  for (const Corruption corruption : kCorruptions) {
    const ::testing::AssertionResult result = check(corruption);
    EXPECT_FALSE(result) << what << ": a " << to_string(corruption) << " output passed";
    if (!result) {
      EXPECT_NE(std::string(result.message()).find(why), std::string::npos)
          << what << ", " << to_string(corruption) << ": rejected, but not by the comparison:\n"
          << result.message();
    }
  }
}

Tensor<float> to_float(const Tensor<double>& x) {
  return convert<float>(x);
}

const KvAppendFn cpu_append = [](KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.append(k_new, v_new);
};

// ---- common/tolerance.h and compare_to_oracle() ----

// Every tolerance the header hands out, at every precision, logit size and condition number.
std::vector<std::pair<std::string, Tolerance>> every_tolerance() {
  std::vector<std::pair<std::string, Tolerance>> all;
  for (const Precision p : kPrecisions) {
    const std::string name(to_string(p));
    all.push_back({"tolerance_for(" + name + ")", tolerance_for(p)});
    for (const double s : {0.0, 1.0, 40.0, 400.0, 1e4, 1e6, 1e12})
      all.push_back({"attention_tolerance(" + name + ", " + std::to_string(s) + ")", attention_tolerance(p, s)});
    for (const double condition : {1.0, 1e3, 1e6, 1e12})
      all.push_back({"product_tolerance(" + name + ", " + std::to_string(condition) + ")",
                     product_tolerance(p, condition)});
  }
  return all;
}

TEST(ChecksReject, EveryToleranceStaysUnderTheCaps) {
  static_assert(kMaxRelFrobenius < 1.0 && kMaxAbs < 1.0);
  for (const auto& [name, tolerance] : every_tolerance()) {
    EXPECT_LE(tolerance.rel_frobenius, kMaxRelFrobenius) << name;
    EXPECT_LE(tolerance.max_abs, kMaxAbs) << name;
  }
  // The widening follows the fp32 accumulation at every precision: the old 8·s·u of the inputs
  // (1.56 for fp16 at s = 400) is gone, and fp32 is unchanged.
  EXPECT_EQ(attention_tolerance(Precision::fp16, 400.0).rel_frobenius, tolerance_for(Precision::fp16).rel_frobenius);
  EXPECT_EQ(attention_tolerance(Precision::bf16, 400.0).max_abs, tolerance_for(Precision::bf16).max_abs);
  EXPECT_EQ(attention_tolerance(Precision::fp32, 1000.0).rel_frobenius, 8.0 * 1000.0 * 0x1p-24);
}

TEST(ChecksReject, CompareToOracleUnderEveryTolerance) {
  testing::SeededRng rng;
  for (const int64_t n : {int64_t(33), int64_t(257)}) {
    const Tensor<float> correct = rng.normal_tensor({n});
    const Tensor<double> ref = convert<double>(correct);
    for (const auto& [name, tolerance] : every_tolerance())
      expect_only_the_control_passes(
          [&, tol = tolerance](Corruption corruption) -> ::testing::AssertionResult {
            Tensor<float> out = correct;
            corrupt(out, corruption, rng.seed());
            const Comparison c = compare_to_oracle(out, ref, tol);
            if (c.ok) return ::testing::AssertionSuccess();
            return ::testing::AssertionFailure() << c.report();
          },
          name + ", n = " + std::to_string(n), "DOES NOT MATCH");
  }
}

TEST(ChecksReject, RoundToPrecisionRoundsToNearest) {
  // fp16 and tf32 keep 10 mantissa bits (a step of 2^-10 at 1), bf16 7 (2^-7).
  EXPECT_EQ(round_to_precision(1.0f + 0x1p-11f, Precision::fp16), 1.0f);                 // a tie: to even
  EXPECT_EQ(round_to_precision(1.0f + 3 * 0x1p-11f, Precision::fp16), 1.0f + 0x1p-9f);   // a tie: to even
  EXPECT_EQ(round_to_precision(1.0f + 0x1p-12f, Precision::fp16), 1.0f);
  EXPECT_EQ(round_to_precision(1.0f + 0x1p-8f, Precision::bf16), 1.0f);                  // a tie: to even
  EXPECT_EQ(round_to_precision(1.0f + 3 * 0x1p-8f, Precision::bf16), 1.0f + 0x1p-6f);    // a tie: to even
  EXPECT_EQ(round_to_precision(1.0f + 0x1p-11f, Precision::tf32), 1.0f + 0x1p-10f);      // a tie: away from 0
  EXPECT_EQ(round_to_precision(-1.0f - 0x1p-11f, Precision::tf32), -1.0f - 0x1p-10f);
  EXPECT_EQ(round_to_precision(-1.0f - 0x1p-12f, Precision::tf32), -1.0f);
  EXPECT_EQ(round_to_precision(70000.0f, Precision::fp16), std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_to_precision(0.1f, Precision::fp32), 0.1f);
  EXPECT_TRUE(std::isnan(round_to_precision(std::numeric_limits<float>::quiet_NaN(), Precision::bf16)));
  const Tensor<float> x({3}, std::vector<float>{1.0f + 0x1p-11f, 0.1f, -2.0f});
  const Tensor<float> rounded = round_to_precision(x, Precision::fp16);
  EXPECT_EQ(rounded.shape(), x.shape());
  for (int64_t i = 0; i < x.size(); ++i) EXPECT_EQ(rounded[i], round_to_precision(x[i], Precision::fp16));
}

// ---- tests/support/attention_check.h ----

// A prefill "implementation" computing the float64 oracle of its inputs rounded to @p precision,
// then corrupting it.
AttentionFn attention_fake(Precision precision, Corruption corruption, uint64_t seed) {
  return [=](const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal, Tensor<float>& out) {
    out = to_float(attention_reference(round_to_precision(q, precision), round_to_precision(k, precision),
                                       round_to_precision(v, precision), causal));
    corrupt(out, corruption, seed);
  };
}

TEST(ChecksReject, AttentionAtEveryPrecisionAndLogitScale) {
  testing::SeededRng rng;
  for (const Precision precision : kPrecisions)
    for (const testing::AttentionCase& c : testing::odd_attention_cases(33))
      expect_only_the_control_passes(
          [&](Corruption corruption) {
            return testing::attention_matches_oracle(attention_fake(precision, corruption, rng.seed()), precision, c);
          },
          std::string(to_string(precision)) + " " + c.name(), "DOES NOT MATCH");
}

// ---- tests/support/decode_check.h ----

DecodeFn decode_fake(Corruption corruption, uint64_t seed) {
  return [=](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    out = to_float(decode_reference(q, cache));  // over what the cache holds (fp16: rounded)
    corrupt(out, corruption, seed);
  };
}

TEST(ChecksReject, DecodeStepsOverFp32AndFp16Caches) {
  testing::SeededRng rng;
  std::vector<testing::DecodeCase> cases = testing::odd_decode_cases(40);
  testing::DecodeCase paged{{9, 17}, 2, 4, 2, 64};
  paged.block_size = 4;
  cases.push_back(paged);
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
    for (const testing::DecodeCase& c : cases)
      expect_only_the_control_passes(
          [&](Corruption corruption) {
            return testing::decode_steps_match_prefill(decode_fake(corruption, rng.seed()), dtype, cpu_append, c);
          },
          std::string(to_string(dtype)) + " cache " + c.name(), "DOES NOT MATCH");
}

// An append storing its corrupted tokens (through the CPU append), for the checks that judge a
// cache: what the cache holds is their output.
KvAppendFn append_fake(Corruption corruption, uint64_t seed) {
  return [=](KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
    Tensor<float> k = k_new, v = v_new;
    corrupt(k, corruption, seed);
    corrupt(v, corruption, seed + 1);
    cache.append(k, v);
  };
}

TEST(ChecksReject, AppendToFp32AndFp16Caches) {
  testing::SeededRng rng;
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
    for (const testing::DecodeCase& c : {testing::DecodeCase{{2, 31, 9}, 2, 4, 4, 96}, testing::DecodeCase{{5}, 5, 2, 1, 80}})
      expect_only_the_control_passes(
          [&](Corruption corruption) {
            return testing::append_matches_reference(append_fake(corruption, rng.seed()), dtype, c);
          },
          std::string(to_string(dtype)) + " cache " + c.name(), "differ from the CPU append's");
}

// ---- tests/support/prefill_steps_check.h ----

TEST(ChecksReject, PrefillScores) {
  testing::SeededRng rng;
  for (const testing::AttentionCase& c :
       {testing::AttentionCase{2, 1, 33, 64, true}, testing::AttentionCase{4, 2, 31, 80, false},
        testing::AttentionCase{8, 1, 2, 96, false}, testing::AttentionCase{2, 1, 33, 64, false, 40.0f},
        testing::AttentionCase{4, 2, 31, 80, true, 400.0f}})
    expect_only_the_control_passes(
        [&](Corruption corruption) {
          return testing::scores_match_oracle(
              [&](const Tensor<float>& q, const Tensor<float>& k, bool causal, Tensor<float>& scores) {
                const int64_t H = q.dim(0), L = q.dim(1), d = q.dim(2), group = H / k.dim(0);
                scores = Tensor<float>({H, L, L});
                std::vector<bool> masked(size_t(scores.size()), false);
                for (int64_t h = 0; h < H; ++h)
                  for (int64_t i = 0; i < L; ++i)
                    for (int64_t j = 0; j < L; ++j) {
                      const int64_t at = (h * L + i) * L + j;
                      double dot = 0.0;
                      for (int64_t x = 0; x < d; ++x)
                        dot += double(q[(h * L + i) * d + x]) * k[((h / group) * L + j) * d + x];
                      masked[size_t(at)] = causal && j > i;
                      scores[at] = masked[size_t(at)] ? -std::numeric_limits<float>::infinity()
                                                      : float(dot / std::sqrt(double(d)));
                    }
                corrupt(scores, corruption, rng.seed(), &masked);
              },
              c);
        },
        "scores " + c.name(), "DOES NOT MATCH");
}

TEST(ChecksReject, PrefillSoftmax) {
  testing::SeededRng rng;
  for (const testing::SoftmaxCase& c :
       {testing::SoftmaxCase{5, 33, 128}, testing::SoftmaxCase{7, 257, 64, true},
        testing::SoftmaxCase{3, 31, 32, false, 40.0f}, testing::SoftmaxCase{6, 65, 128, true, 400.0f}})
    expect_only_the_control_passes(
        [&](Corruption corruption) {
          return testing::softmax_matches_oracle(
              [&](const Tensor<float>& scores, Tensor<float>& probs, int) {
                const int64_t rows = scores.dim(0), n = scores.dim(1);
                probs = Tensor<float>(scores.shape());
                std::vector<bool> masked(size_t(scores.size()), false);
                for (int64_t r = 0; r < rows; ++r) {
                  double m = -INFINITY, sum = 0.0;
                  for (int64_t j = 0; j < n; ++j) m = std::max(m, double(scores[r * n + j]));
                  for (int64_t j = 0; j < n; ++j) sum += std::exp(double(scores[r * n + j]) - m);
                  for (int64_t j = 0; j < n; ++j) {
                    masked[size_t(r * n + j)] = std::isinf(scores[r * n + j]);
                    probs[r * n + j] = float(std::exp(double(scores[r * n + j]) - m) / sum);
                  }
                }
                corrupt(probs, corruption, rng.seed(), &masked);
              },
              c);
        },
        "softmax " + c.name(), "DOES NOT MATCH");
}

TEST(ChecksReject, PrefillGemm) {
  testing::SeededRng rng;
  for (const testing::GemmCase& c : testing::odd_gemm_cases()) {
    if (c.m * c.n < 16) continue;  // one or two elements: a constant or a shuffle may be right
    expect_only_the_control_passes(
        [&](Corruption corruption) {
          return testing::gemm_matches_oracle(
              [&](const Tensor<float>& a, const Tensor<float>& b, Tensor<float>& out) {
                out = Tensor<float>({c.m, c.n});
                for (int64_t i = 0; i < c.m; ++i)
                  for (int64_t j = 0; j < c.n; ++j) {
                    double sum = 0.0;
                    for (int64_t t = 0; t < c.k; ++t) sum += double(a[i * c.k + t]) * b[t * c.n + j];
                    out[i * c.n + j] = float(sum);
                  }
                corrupt(out, corruption, rng.seed());
              },
              c);
        },
        "gemm " + c.name(), "DOES NOT MATCH");
  }
}

// ---- tests/support/int8_check.h ----

TEST(ChecksReject, Int8Decode) {
  testing::SeededRng rng;
  for (const testing::Int8Case& c : testing::int8_decode_cases(40))
    expect_only_the_control_passes(
        [&](Corruption corruption) {
          return testing::int8_decode_within_budget(decode_fake(corruption, rng.seed()), cpu_append, c);
        },
        "int8 " + c.name(), "differs from the float64 decode of its own dequantized cache");
}

TEST(ChecksReject, Int8CacheContents) {
  testing::SeededRng rng;
  for (const KeyScaling scaling : {KeyScaling::per_token, KeyScaling::per_channel})
    for (const ScaleDtype scales : {ScaleDtype::fp32, ScaleDtype::fp16}) {
      const std::string what = std::string(to_string(scaling)) + ", " + std::string(to_string(scales)) + " scales";
      expect_only_the_control_passes(
          [&](Corruption corruption) {
            return testing::round_trip_within_half_step(append_fake(corruption, rng.seed()), scaling, 4, scales);
          },
          "INT8 round trip, " + what, "dequantizes to");
      for (const int64_t prompt : {int64_t(0), int64_t(4)})
        expect_only_the_control_passes(
            [&](Corruption corruption) {
              return testing::int8_scales_match_definition(append_fake(corruption, rng.seed()), scaling, scales,
                                                            prompt, 3);
            },
            "INT8 scale definition, " + what + ", prompt " + std::to_string(prompt), "the definition");
    }
}

TEST(ChecksReject, Int8Quantizer) {
  expect_only_the_control_passes(
      [](Corruption corruption) {
        return testing::quantizer_saturates([corruption](float x, float scale) -> int8_t {
          switch (corruption) {
            case Corruption::none: return quantize_int8(x, scale);
            case Corruption::zeros: return 0;
            case Corruption::constant: return 33;
            case Corruption::shuffled: return quantize_int8(-x, scale);  // the codes of other inputs
          }
          return 0;
        });
      },
      "quantize_int8", "expected");
}

// ---- tests/support/fp8_check.h ----

TEST(ChecksReject, Fp8Decode) {
  testing::SeededRng rng;
  for (const testing::Int8Case& c : testing::fp8_decode_cases(40))
    expect_only_the_control_passes(
        [&](Corruption corruption) {
          return testing::fp8_decode_within_budget(decode_fake(corruption, rng.seed()), c);
        },
        "fp8 " + c.name(), "differs from the float64 decode of its own dequantized cache");
}

TEST(ChecksReject, Fp8CacheContents) {
  testing::SeededRng rng;
  expect_only_the_control_passes(
      [&](Corruption corruption) {
        return testing::fp8_cache_scales_match_definition(append_fake(corruption, rng.seed()), 3);
      },
      "FP8 cache", "the definition");
  expect_only_the_control_passes(
      [&](Corruption corruption) {
        return testing::fp8_row_round_trip([&](std::span<const float> row, std::span<uint8_t> codes) {
          int64_t saturated = 0;
          const float scale = quantize_row_fp8(row, codes, saturated);
          std::vector<float> values(codes.size());
          for (size_t i = 0; i < codes.size(); ++i) values[i] = float(codes[i]);
          corrupt(values, corruption, rng.seed());
          for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t(values[i]);
          return scale;
        });
      },
      "FP8 row quantizer", "comes back as");
}

TEST(ChecksReject, Fp8Format) {
  // Codes as "outputs": all zero, one constant code, or the value of another code.
  const auto wrong_code = [](Corruption corruption, uint8_t right) -> uint8_t {
    switch (corruption) {
      case Corruption::none: return right;
      case Corruption::zeros: return 0x00;
      case Corruption::constant: return 0x38;  // 1.0
      case Corruption::shuffled: return uint8_t(right ^ 0x01);
    }
    return right;
  };
  expect_only_the_control_passes(
      [&](Corruption corruption) {
        return testing::fp8_decoder_matches_definition(
            [&](uint8_t code) { return fp8_e4m3_to_float(wrong_code(corruption, code)); });
      },
      "E4M3 decoder", "the format defines");
  expect_only_the_control_passes(
      [&](Corruption corruption) {
        return testing::fp8_encoder_matches_definition(
            [&](float x) { return wrong_code(corruption, float_to_fp8_e4m3(x)); });
      },
      "E4M3 encoder", "expected");
}

}  // namespace
}  // namespace inferlab
