// Wrong answers to every chapter's prediction questions (exercises/NN-slug/predictions.h), run
// through the very checks that grade the students (tests/NN-slug/predictions_check.h): each
// classic mistake must be rejected, with a message that names the mistake, and the same formula
// without the mistake must pass. The mistakes: the article's traffic model where the real one is
// asked (and its algebra slip), bits for bytes, KB or GB for KiB or GiB where the difference
// shows, forgetting the ×2 for K and V, GQA ignored, the wrong roof, the KV of one token for all
// of them, the weights read per sequence, a whole step for half of one, no rounding up; for a real
// model's file: the tied output head forgotten or counted twice, the codes without their block's
// scale and minimum, Q4_0's block for Q4_1; for a server: the KV of one sequence, the batch
// forgotten (tokens/s for requests/s), the queue or the TTFT forgotten, λ / W for λ · W; for
// speculative decoding: the target's own token forgotten, the draft's time forgotten, every guess
// accepted, Σ p·q for Σ min(p, q), greedy speculation changing the output.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "tests/01-naive-cpu-attention/predictions_check.h"
#include "tests/02-gpu-prefill/predictions_check.h"
#include "tests/03-kv-cache-decode/predictions_check.h"
#include "tests/04-int8-kv-cache/predictions_check.h"
#include "tests/05-fused-attention/predictions_check.h"
#include "tests/06-paged-attention/predictions_check.h"
#include "tests/07-continuous-batching/predictions_check.h"
#include "tests/08-real-model/predictions_check.h"
#include "tests/09-serving/predictions_check.h"
#include "tests/10-parallelism/predictions_check.h"
#include "tests/11-compute-roof/predictions_check.h"
#include "tests/12-speculative-decoding/predictions_check.h"

namespace inferlab {
namespace {

using ::testing::HasSubstr;

// A wrong answer must fail its check, and the failure must say which mistake it is.
void expect_rejected(const ::testing::AssertionResult& result, const std::string& mistake) {
  EXPECT_FALSE(result) << "a wrong answer (" << mistake << ") passed";
  EXPECT_THAT(std::string(result.message()), HasSubstr("your answer is what " + mistake)) << result.message();
}

// ---- chapter 01 ----

double flops(double L, double d) { return 4.0 * L * L * d; }

TEST(WrongPredictionsCh01, RightAnswersPass) {
  EXPECT_TRUE(testing::ch01::check_article_ai(
      [](int64_t L, int64_t d, double e) { return flops(L, d) / (e * (double(L) * L + 4.0 * L * d)); }));
  EXPECT_TRUE(testing::ch01::check_unfused_ai(
      [](int64_t L, int64_t d, double e) { return flops(L, d) / (e * (4.0 * L * L + 4.0 * L * d)); }));
  EXPECT_TRUE(testing::ch01::check_fused_ai([](int64_t L, int64_t, double e) { return double(L) / e; }));
  EXPECT_TRUE(testing::ch01::check_attainable([](double ai, double p, double b) { return std::min(p, ai * b); }));
  EXPECT_TRUE(testing::ch01::check_time_floor([](int64_t h, int64_t L, int64_t d, double e, double p, double b) {
    return 1e3 * h * std::max(flops(L, d) / (p * 1e9), e * (4.0 * L * L + 4.0 * L * d) / (b * 1e9));
  }));
}

TEST(WrongPredictionsCh01, TheArticlesModelForTheRealUnfusedOne) {
  expect_rejected(testing::ch01::check_unfused_ai([](int64_t L, int64_t d, double e) {
                    return flops(L, d) / (e * (double(L) * L + 4.0 * L * d));
                  }),
                  "the article's model");
}

TEST(WrongPredictionsCh01, BitsInsteadOfBytes) {
  expect_rejected(testing::ch01::check_article_ai([](int64_t L, int64_t d, double e) {
                    return flops(L, d) / (8.0 * e * (double(L) * L + 4.0 * L * d));
                  }),
                  "counting bits instead of bytes");
}

TEST(WrongPredictionsCh01, TheArticlesAlgebraSlip) {
  expect_rejected(testing::ch01::check_article_ai(
                      [](int64_t L, int64_t d, double) { return 2.0 * L / (1.0 + 4.0 * double(d) / double(L)); }),
                  "the article's algebra slip");
}

TEST(WrongPredictionsCh01, FusedAiAlwaysHalfL) {
  EXPECT_FALSE(testing::ch01::check_fused_ai([](int64_t L, int64_t, double) { return double(L) / 2.0; }));
}

TEST(WrongPredictionsCh01, MaxInsteadOfMinOnTheRoofline) {
  expect_rejected(testing::ch01::check_attainable([](double ai, double p, double b) { return std::max(p, ai * b); }),
                  "max instead of min");
}

TEST(WrongPredictionsCh01, TimeFloorWithTheArticlesBytes) {
  expect_rejected(testing::ch01::check_time_floor([](int64_t h, int64_t L, int64_t d, double e, double p, double b) {
                    return 1e3 * h * std::max(flops(L, d) / (p * 1e9), e * (double(L) * L + 4.0 * L * d) / (b * 1e9));
                  }),
                  "the article's byte count");
}

// ---- chapter 02 ----

double unfused_ai_fp16(double L, double d) { return flops(L, d) / (2.0 * (4.0 * L * L + 4.0 * L * d)); }
double article_ai_fp16(double L, double d) { return flops(L, d) / (2.0 * (L * L + 4.0 * L * d)); }

int64_t pow2_tile(double budget, double tiles, double e) {
  int64_t t = 1;
  while (tiles * double(2 * t) * double(2 * t) * e <= budget) t *= 2;
  return t;
}

TEST(WrongPredictionsCh02, RightAnswersPass) {
  EXPECT_TRUE(testing::ch02::check_article_ai([](int64_t L, int64_t d) { return article_ai_fp16(L, d); }));
  EXPECT_TRUE(testing::ch02::check_unfused_ai([](int64_t L, int64_t d) { return unfused_ai_fp16(L, d); }));
  EXPECT_TRUE(testing::ch02::check_ceiling(
      [](int64_t L, int64_t d, double p, double b) { return std::min(p, unfused_ai_fp16(L, d) * b); }));
  EXPECT_TRUE(testing::ch02::check_tile([](int64_t kib, double e) { return pow2_tile(kib * 1024.0, 2.0, e); }));
}

TEST(WrongPredictionsCh02, TheArticlesModelForTheRealUnfusedOne) {
  expect_rejected(testing::ch02::check_unfused_ai([](int64_t L, int64_t d) { return article_ai_fp16(L, d); }),
                  "the article's model");
}

TEST(WrongPredictionsCh02, CeilingFromTheArticlesModel) {
  expect_rejected(testing::ch02::check_ceiling(
                      [](int64_t L, int64_t d, double p, double b) { return std::min(p, article_ai_fp16(L, d) * b); }),
                  "the article's model");
}

TEST(WrongPredictionsCh02, CeilingIgnoringTheMemoryRoof) {
  expect_rejected(testing::ch02::check_ceiling([](int64_t, int64_t, double p, double) { return p; }),
                  "the peak alone");
}

TEST(WrongPredictionsCh02, TileWithKilobytesForKibibytes) {
  expect_rejected(testing::ch02::check_tile([](int64_t kib, double e) { return pow2_tile(kib * 1000.0, 2.0, e); }),
                  "KB = 1000 bytes");
}

TEST(WrongPredictionsCh02, TileForgettingTheSecondOperand) {
  expect_rejected(testing::ch02::check_tile([](int64_t kib, double e) { return pow2_tile(kib * 1024.0, 1.0, e); }),
                  "one tile instead of two");
}

// ---- chapter 03 ----

double decode_ai(double L, double d, double g, double e) { return g * 4.0 * L * d / (e * (2.0 * L * d + 2.0 * g * d)); }
double kv_token(double layers, double heads, double d, double e) { return 2.0 * layers * heads * d * e; }

TEST(WrongPredictionsCh03, RightAnswersPass) {
  EXPECT_TRUE(testing::ch03::check_decode_ai(
      [](int64_t L, int64_t d, int64_t g, double e) { return decode_ai(L, d, g, e); }));
  EXPECT_TRUE(testing::ch03::check_kv_bytes_per_token(
      [](int64_t n, int64_t h, int64_t d, double e) { return kv_token(n, h, d, e); }));
  EXPECT_TRUE(testing::ch03::check_decode_step_ms(
      [](double w, int64_t n, int64_t h, int64_t d, double e, int64_t b, int64_t L, double bw) {
        return 1e3 * (w * 1e9 + double(b) * L * kv_token(n, h, d, e)) / (bw * 1e9);
      }));
  EXPECT_TRUE(testing::ch03::check_max_cached_tokens([](double gib, double w, int64_t n, int64_t h, int64_t d, double e) {
    const double free_bytes = gib * 1073741824.0 - w * 1e9;
    return free_bytes <= 0 ? int64_t{0} : int64_t(std::floor(free_bytes / kv_token(n, h, d, e)));
  }));
}

TEST(WrongPredictionsCh03, DecodeAiIgnoringGqa) {
  expect_rejected(testing::ch03::check_decode_ai(
                      [](int64_t L, int64_t d, int64_t, double e) { return decode_ai(L, d, 1.0, e); }),
                  "reading K and V once per query head");
}

TEST(WrongPredictionsCh03, KvBytesForgettingKAndV) {
  expect_rejected(testing::ch03::check_kv_bytes_per_token(
                      [](int64_t n, int64_t h, int64_t d, double e) { return kv_token(n, h, d, e) / 2.0; }),
                  "forgetting the ×2 for K and V");
}

TEST(WrongPredictionsCh03, KvBytesInBits) {
  expect_rejected(testing::ch03::check_kv_bytes_per_token(
                      [](int64_t n, int64_t h, int64_t d, double e) { return 8.0 * kv_token(n, h, d, e); }),
                  "counting bits instead of bytes");
}

TEST(WrongPredictionsCh03, StepReadingTheKvOfOneToken) {
  expect_rejected(testing::ch03::check_decode_step_ms(
                      [](double w, int64_t n, int64_t h, int64_t d, double e, int64_t b, int64_t, double bw) {
                        return 1e3 * (w * 1e9 + double(b) * kv_token(n, h, d, e)) / (bw * 1e9);
                      }),
                  "the KV of one token per step");
}

TEST(WrongPredictionsCh03, GibibytesReadAsGigabytes) {
  expect_rejected(testing::ch03::check_max_cached_tokens([](double gib, double w, int64_t n, int64_t h, int64_t d, double e) {
                    return int64_t(std::floor((gib - w) * 1e9 / kv_token(n, h, d, e)));
                  }),
                  "the device's GiB read as GB");
}

// ---- chapter 04 ----

TEST(WrongPredictionsCh04, RightAnswersPass) {
  EXPECT_TRUE(testing::ch04::check_int8_kv_bytes_per_token(
      [](int64_t n, int64_t h, int64_t d, double s) { return 2.0 * n * h * (double(d) + s); }));
  EXPECT_TRUE(testing::ch04::check_int8_decode_speedup([](int64_t d, double s, double e) { return e * d / (d + s); }));
  EXPECT_TRUE(testing::ch04::check_int8_max_abs_error([](double m) { return m / 254.0; }));
  EXPECT_TRUE(testing::ch04::check_int8_kv_step_speedup(
      [](double w, int64_t n, int64_t h, int64_t d, double s, int64_t b, int64_t L) {
        const double t = double(b) * L;
        return (w * 1e9 + t * kv_token(n, h, d, 2.0)) / (w * 1e9 + t * 2.0 * n * h * (double(d) + s));
      }));
}

TEST(WrongPredictionsCh04, Int8BytesForgettingKAndV) {
  expect_rejected(testing::ch04::check_int8_kv_bytes_per_token(
                      [](int64_t n, int64_t h, int64_t d, double s) { return double(n) * h * (double(d) + s); }),
                  "forgetting the ×2 for K and V");
}

TEST(WrongPredictionsCh04, Int8BytesForgettingTheScales) {
  expect_rejected(testing::ch04::check_int8_kv_bytes_per_token(
                      [](int64_t n, int64_t h, int64_t d, double) { return 2.0 * n * h * double(d); }),
                  "forgetting the scales");
}

TEST(WrongPredictionsCh04, SpeedupIsTheElementSizeRatio) {
  expect_rejected(testing::ch04::check_int8_decode_speedup([](int64_t, double, double e) { return e; }),
                  "the element sizes alone");
}

TEST(WrongPredictionsCh04, ErrorOfAWholeStep) {
  expect_rejected(testing::ch04::check_int8_max_abs_error([](double m) { return m / 127.0; }),
                  "a whole step");
}

TEST(WrongPredictionsCh04, ErrorWith255Levels) {
  expect_rejected(testing::ch04::check_int8_max_abs_error([](double m) { return m / 255.0; }), "255 levels");
}

TEST(WrongPredictionsCh04, StepSpeedupForgettingTheWeights) {
  expect_rejected(testing::ch04::check_int8_kv_step_speedup(
                      [](double, int64_t, int64_t, int64_t d, double s, int64_t, int64_t) { return 2.0 * d / (d + s); }),
                  "the KV bytes alone");
}

// ---- chapter 05 ----

int64_t query_tile(double budget, int64_t d, int64_t bc, double e, double score_bytes) {
  int64_t br = 0;
  while (e * (double(br + 16) * d + 2.0 * bc * d) + score_bytes * double(br + 16) * bc <= budget) br += 16;
  return br;
}

TEST(WrongPredictionsCh05, RightAnswersPass) {
  EXPECT_TRUE(testing::ch05::check_fused_ai_gqa(
      [](int64_t L, int64_t, int64_t g, double e) { return 2.0 * g * L / (e * (g + 1.0)); }));
  EXPECT_TRUE(testing::ch05::check_fused_traffic_share([](int64_t L, int64_t d) { return double(d) / double(L + d); }));
  EXPECT_TRUE(testing::ch05::check_fused_bytes_with_query_tiles([](int64_t L, int64_t d, int64_t br, double e) {
    return e * (2.0 * L * d + 2.0 * L * d * double((L + br - 1) / br));
  }));
  EXPECT_TRUE(testing::ch05::check_max_query_tile(
      [](int64_t kib, int64_t d, int64_t bc, double e) { return query_tile(kib * 1024.0, d, bc, e, 4.0); }));
}

TEST(WrongPredictionsCh05, FusedAiIgnoringGqa) {
  expect_rejected(testing::ch05::check_fused_ai_gqa([](int64_t L, int64_t, int64_t, double e) { return L / e; }),
                  "L / e, the MHA law");
}

TEST(WrongPredictionsCh05, ShareAgainstTheArticlesModel) {
  expect_rejected(testing::ch05::check_fused_traffic_share(
                      [](int64_t L, int64_t d) { return 4.0 * d / (double(L) + 4.0 * d); }),
                  "the article's unfused model");
}

TEST(WrongPredictionsCh05, TiledBytesWithoutRoundingUp) {
  expect_rejected(testing::ch05::check_fused_bytes_with_query_tiles([](int64_t L, int64_t d, int64_t br, double e) {
                    return e * (2.0 * L * d + 2.0 * L * d * double(L) / double(br));
                  }),
                  "L / Br without rounding up");
}

TEST(WrongPredictionsCh05, QueryTileWithKilobytes) {
  expect_rejected(testing::ch05::check_max_query_tile(
                      [](int64_t kib, int64_t d, int64_t bc, double e) { return query_tile(kib * 1000.0, d, bc, e, 4.0); }),
                  "KB = 1000 bytes");
}

// ---- chapter 06 ----

TEST(WrongPredictionsCh06, RightAnswersPass) {
  EXPECT_TRUE(testing::ch06::check_blocks_needed([](std::span<const int64_t> lengths, int64_t b) {
    int64_t n = 0;
    for (int64_t l : lengths) n += (l + b - 1) / b;
    return n;
  }));
  EXPECT_TRUE(testing::ch06::check_block_bytes([](int64_t b, int64_t h, int64_t d, double e) { return 2.0 * b * h * d * e; }));
  EXPECT_TRUE(testing::ch06::check_sequences_contiguous(
      [](double gib, double kv, int64_t m) { return int64_t(std::floor(gib * 1073741824.0 / (kv * double(m)))); }));
  EXPECT_TRUE(testing::ch06::check_sequences_paged([](double gib, double kv, int64_t b, double mean) {
    return int64_t(std::floor(gib * 1073741824.0 / kv / (mean + (b - 1) / 2.0)));
  }));
}

TEST(WrongPredictionsCh06, BlocksPooledAcrossSequences) {
  expect_rejected(testing::ch06::check_blocks_needed([](std::span<const int64_t> lengths, int64_t b) {
                    int64_t tokens = 0;
                    for (int64_t l : lengths) tokens += l;
                    return (tokens + b - 1) / b;
                  }),
                  "⌈Σ L / B⌉");
}

TEST(WrongPredictionsCh06, BlockBytesForgettingKAndV) {
  expect_rejected(testing::ch06::check_block_bytes([](int64_t b, int64_t h, int64_t d, double e) { return double(b) * h * d * e; }),
                  "forgetting the ×2 for K and V");
}

TEST(WrongPredictionsCh06, ContiguousPoolInGigabytes) {
  expect_rejected(testing::ch06::check_sequences_contiguous(
                      [](double gib, double kv, int64_t m) { return int64_t(std::floor(gib * 1e9 / (kv * double(m)))); }),
                  "GiB read as GB");
}

TEST(WrongPredictionsCh06, PagedWithoutTheLastBlocksWaste) {
  expect_rejected(testing::ch06::check_sequences_paged([](double gib, double kv, int64_t, double mean) {
                    return int64_t(std::floor(gib * 1073741824.0 / kv / mean));
                  }),
                  "no waste at all");
}

// ---- chapter 07 ----

using student::ServingModel;

double kv_sequence(const ServingModel& m, double L) { return 2.0 * m.layers * m.kv_heads * m.head_dim * m.kv_bytes * L; }
double step_flops(const ServingModel& m, double B, double L) {
  return B * (2.0 * m.parameters + 4.0 * L * m.head_dim * m.heads * m.layers);
}

TEST(WrongPredictionsCh07, RightAnswersPass) {
  EXPECT_TRUE(testing::ch07::check_decode_step_ai([](const ServingModel& m, int64_t b, int64_t L) {
    return step_flops(m, b, L) / (m.parameters * m.weight_bytes + b * kv_sequence(m, L));
  }));
  EXPECT_TRUE(testing::ch07::check_decode_tokens_per_second([](const ServingModel& m, int64_t b, int64_t L, double p, double bw) {
    return b / std::max(step_flops(m, b, L) / (p * 1e9), (m.parameters * m.weight_bytes + b * kv_sequence(m, L)) / (bw * 1e9));
  }));
  EXPECT_TRUE(testing::ch07::check_kv_equals_weights_batch(
      [](const ServingModel& m, int64_t L) { return m.parameters * m.weight_bytes / kv_sequence(m, L); }));
}

TEST(WrongPredictionsCh07, WeightsReadOncePerSequence) {
  expect_rejected(testing::ch07::check_decode_step_ai([](const ServingModel& m, int64_t b, int64_t L) {
                    return step_flops(m, b, L) / (b * (m.parameters * m.weight_bytes + kv_sequence(m, L)));
                  }),
                  "the weights read once per sequence");
}

TEST(WrongPredictionsCh07, TheWholeStepAtAttentionsAi) {
  expect_rejected(testing::ch07::check_decode_step_ai([](const ServingModel& m, int64_t, int64_t) {
                    return 2.0 * double(m.heads) / (double(m.kv_heads) * m.kv_bytes);
                  }),
                  "decode attention's AI");
}

TEST(WrongPredictionsCh07, TokensPerSecondIgnoringTheComputeRoof) {
  expect_rejected(testing::ch07::check_decode_tokens_per_second([](const ServingModel& m, int64_t b, int64_t L, double, double bw) {
                    return b / ((m.parameters * m.weight_bytes + b * kv_sequence(m, L)) / (bw * 1e9));
                  }),
                  "the memory time alone");
}

TEST(WrongPredictionsCh07, CrossoverForgettingKAndV) {
  expect_rejected(testing::ch07::check_kv_equals_weights_batch([](const ServingModel& m, int64_t L) {
                    return 2.0 * m.parameters * m.weight_bytes / kv_sequence(m, L);
                  }),
                  "forgetting the ×2 for K and V");
}

// ---- chapter 08 ----

using student::RealModelShape;
using student::WeightType;

// Bytes a weight, as a student would tabulate it (with @p scale_and_min false: the codes alone).
double ch08_per_weight(WeightType t, bool scale_and_min = true) {
  switch (t) {
    case WeightType::f32:
      return 4.0;
    case WeightType::f16:
      return 2.0;
    case WeightType::q8_0:
      return scale_and_min ? 34.0 / 32.0 : 1.0;
    case WeightType::q4_1:
      return scale_and_min ? 20.0 / 32.0 : 0.5;
  }
  return 0.0;
}
// Weights in all layers' matrices (kv_heads replaced by heads when @p gqa is false).
double ch08_layer_weights(const RealModelShape& m, bool gqa = true) {
  const double q = double(m.heads * m.head_dim), kv = double((gqa ? m.kv_heads : m.heads) * m.head_dim);
  return double(m.layers) * (2.0 * q * m.dim + 2.0 * kv * m.dim + 3.0 * double(m.dim) * m.hidden_dim);
}
double ch08_head_weights(const RealModelShape& m) { return double(m.vocab) * double(m.dim); }
double ch08_norm_bytes(const RealModelShape& m) { return 4.0 * double(m.dim) * double(2 * m.layers + 1); }
double ch08_weight_bytes(const RealModelShape& m, WeightType w, WeightType h) {
  return ch08_layer_weights(m) * ch08_per_weight(w) + ch08_head_weights(m) * ch08_per_weight(h) + ch08_norm_bytes(m);
}
double ch08_kv_token(const RealModelShape& m, double e) { return 2.0 * double(m.layers * m.kv_heads * m.head_dim) * e; }

TEST(WrongPredictionsCh08, RightAnswersPass) {
  EXPECT_TRUE(testing::ch08::check_weight_bytes_per_token(ch08_weight_bytes));
  EXPECT_TRUE(testing::ch08::check_tokens_per_second_ceiling(
      [](const RealModelShape& m, WeightType w, WeightType h, double gbs) { return gbs * 1e9 / ch08_weight_bytes(m, w, h); }));
  EXPECT_TRUE(testing::ch08::check_kv_bytes_per_token(ch08_kv_token));
  EXPECT_TRUE(testing::ch08::check_weight_to_kv_ratio([](const RealModelShape& m, WeightType w, WeightType h, double e,
                                                         int64_t L) { return ch08_weight_bytes(m, w, h) / (ch08_kv_token(m, e) * L); }));
}

TEST(WrongPredictionsCh08, TheTiedHeadForgotten) {
  expect_rejected(testing::ch08::check_weight_bytes_per_token([](const RealModelShape& m, WeightType w, WeightType) {
                    return ch08_layer_weights(m) * ch08_per_weight(w) + ch08_norm_bytes(m);
                  }),
                  "forgetting the output head");
}

TEST(WrongPredictionsCh08, TokenEmbdCountedTwice) {
  expect_rejected(testing::ch08::check_weight_bytes_per_token([](const RealModelShape& m, WeightType w, WeightType h) {
                    return ch08_weight_bytes(m, w, h) + ch08_head_weights(m) * ch08_per_weight(h);
                  }),
                  "counting token_embd twice");
}

TEST(WrongPredictionsCh08, TheHeadInTheMatricesFormat) {
  expect_rejected(testing::ch08::check_weight_bytes_per_token(
                      [](const RealModelShape& m, WeightType w, WeightType) { return ch08_weight_bytes(m, w, w); }),
                  "the head in the matrices' format");
}

TEST(WrongPredictionsCh08, TheCodesWithoutTheirScales) {
  expect_rejected(testing::ch08::check_weight_bytes_per_token([](const RealModelShape& m, WeightType w, WeightType h) {
                    return ch08_layer_weights(m) * ch08_per_weight(w, false) + ch08_head_weights(m) * ch08_per_weight(h, false) + ch08_norm_bytes(m);
                  }),
                  "the codes alone");
}

TEST(WrongPredictionsCh08, Q4_0sBlockForQ4_1) {
  expect_rejected(testing::ch08::check_weight_bytes_per_token([](const RealModelShape& m, WeightType w, WeightType h) {
                    const auto b = [](WeightType t) { return t == WeightType::q4_1 ? 18.0 / 32.0 : ch08_per_weight(t); };
                    return ch08_layer_weights(m) * b(w) + ch08_head_weights(m) * b(h) + ch08_norm_bytes(m);
                  }),
                  "Q4_0's 18-byte block");
}

TEST(WrongPredictionsCh08, GqaIgnoredInTheWeights) {
  expect_rejected(testing::ch08::check_weight_bytes_per_token([](const RealModelShape& m, WeightType w, WeightType h) {
                    return ch08_layer_weights(m, false) * ch08_per_weight(w) + ch08_head_weights(m) * ch08_per_weight(h) + ch08_norm_bytes(m);
                  }),
                  "GQA ignored (wk and wv");
}

TEST(WrongPredictionsCh08, CeilingInGiBPerSecond) {
  expect_rejected(testing::ch08::check_tokens_per_second_ceiling(
                      [](const RealModelShape& m, WeightType w, WeightType h, double gbs) {
                        return gbs * 1073741824.0 / ch08_weight_bytes(m, w, h);
                      }),
                  "GiB/s for GB/s");
}

TEST(WrongPredictionsCh08, KvForgettingKAndV) {
  expect_rejected(testing::ch08::check_kv_bytes_per_token(
                      [](const RealModelShape& m, double e) { return ch08_kv_token(m, e) / 2.0; }),
                  "forgetting the ×2 for K and V");
}

TEST(WrongPredictionsCh08, KvWithQueryHeads) {
  expect_rejected(testing::ch08::check_kv_bytes_per_token([](const RealModelShape& m, double e) {
                    return 2.0 * double(m.layers * m.heads * m.head_dim) * e;
                  }),
                  "GQA ignored (query heads");
}

TEST(WrongPredictionsCh08, RatioUpsideDown) {
  expect_rejected(testing::ch08::check_weight_to_kv_ratio([](const RealModelShape& m, WeightType w, WeightType h,
                                                             double e, int64_t L) {
                    return ch08_kv_token(m, e) * L / ch08_weight_bytes(m, w, h);
                  }),
                  "the inverse");
}

TEST(WrongPredictionsCh08, RatioWithOneTokensKv) {
  expect_rejected(testing::ch08::check_weight_to_kv_ratio([](const RealModelShape& m, WeightType w, WeightType h,
                                                             double e, int64_t) {
                    return ch08_weight_bytes(m, w, h) / ch08_kv_token(m, e);
                  }),
                  "the KV of one token instead of the whole context");
}


// ---- chapter 09 ----

double ch09_tpot(double w, double kv, int64_t b, int64_t L, double gbs) {
  return (w + double(b) * double(L) * kv) / (gbs * 1e9);
}

TEST(WrongPredictionsCh09, RightAnswersPass) {
  EXPECT_TRUE(testing::ch09::check_tpot_seconds(ch09_tpot));
  EXPECT_TRUE(testing::ch09::check_saturation_rate(
      [](double t, int64_t b, int64_t n) { return double(b) / (double(n) * t); }));
  EXPECT_TRUE(testing::ch09::check_ttft_seconds(
      [](int64_t ahead, double rate, int64_t p, double prefill) { return double(ahead) / rate + double(p) / prefill; }));
  EXPECT_TRUE(testing::ch09::check_requests_in_flight(
      [](double rate, double ttft, double tpot, int64_t n) { return rate * (ttft + double(n - 1) * tpot); }));
}

TEST(WrongPredictionsCh09, TpotWithOneSequencesKv) {
  expect_rejected(testing::ch09::check_tpot_seconds([](double w, double kv, int64_t, int64_t L, double gbs) {
                    return ch09_tpot(w, kv, 1, L, gbs);
                  }),
                  "the KV cache of one sequence");
}

TEST(WrongPredictionsCh09, TpotWithTheWeightsPerSequence) {
  expect_rejected(testing::ch09::check_tpot_seconds([](double w, double kv, int64_t b, int64_t L, double gbs) {
                    return ch09_tpot(double(b) * w, kv, b, L, gbs);
                  }),
                  "the weights read once per sequence");
}

TEST(WrongPredictionsCh09, TpotInGiBPerSecond) {
  expect_rejected(testing::ch09::check_tpot_seconds([](double w, double kv, int64_t b, int64_t L, double gbs) {
                    return (w + double(b) * double(L) * kv) / (gbs * 1073741824.0);
                  }),
                  "GiB/s for GB/s");
}

TEST(WrongPredictionsCh09, SaturationInTokensPerSecond) {
  expect_rejected(testing::ch09::check_saturation_rate([](double t, int64_t b, int64_t) { return double(b) / t; }),
                  "tokens/s instead of requests/s");
}

TEST(WrongPredictionsCh09, SaturationWithoutTheBatch) {
  expect_rejected(testing::ch09::check_saturation_rate([](double t, int64_t, int64_t n) { return 1.0 / (double(n) * t); }),
                  "one request at a time");
}

TEST(WrongPredictionsCh09, TtftWithoutTheQueue) {
  expect_rejected(testing::ch09::check_ttft_seconds(
                      [](int64_t, double, int64_t p, double prefill) { return double(p) / prefill; }),
                  "the prefill alone");
}

TEST(WrongPredictionsCh09, TtftWithoutThePrefill) {
  expect_rejected(testing::ch09::check_ttft_seconds(
                      [](int64_t ahead, double rate, int64_t, double) { return double(ahead) / rate; }),
                  "the queue alone");
}

TEST(WrongPredictionsCh09, LittlesLawWithoutTheTtft) {
  expect_rejected(testing::ch09::check_requests_in_flight(
                      [](double rate, double, double tpot, int64_t n) { return rate * double(n - 1) * tpot; }),
                  "W without the TTFT");
}

TEST(WrongPredictionsCh09, LittlesLawWithNTpots) {
  expect_rejected(testing::ch09::check_requests_in_flight(
                      [](double rate, double ttft, double tpot, int64_t n) { return rate * (ttft + double(n) * tpot); }),
                  "n TPOTs after the first token");
}

TEST(WrongPredictionsCh09, LittlesLawUpsideDown) {
  expect_rejected(testing::ch09::check_requests_in_flight([](double rate, double ttft, double tpot, int64_t n) {
                    return rate / (ttft + double(n - 1) * tpot);
                  }),
                  "λ / W instead of λ · W");
}


// ---- chapter 10 ----

double ch10_step(double w, int64_t p, double gbs, int64_t layers, double latency) {
  return w / (double(p) * gbs * 1e9) + (p == 1 ? 0.0 : 2.0 * double(layers) * latency);
}

int64_t ch10_replicas(int64_t h, int64_t g, int64_t p) {
  if (h % p != 0) return 0;
  if (p <= g) return g % p == 0 ? 1 : 0;
  return p % g == 0 ? p / g : 0;
}

TEST(WrongPredictionsCh10, RightAnswersPass) {
  EXPECT_TRUE(testing::ch10::check_pipeline_bubble(
      [](int64_t p, int64_t m) { return double(p - 1) / double(m + p - 1); }));
  EXPECT_TRUE(testing::ch10::check_allreduce_payload([](int64_t d, int64_t b) { return 2.0 * double(d * b); }));
  EXPECT_TRUE(testing::ch10::check_ring_bytes([](double n, int64_t p) { return 2.0 * double(p - 1) / double(p) * n; }));
  EXPECT_TRUE(testing::ch10::check_tp_step_seconds(ch10_step));
  EXPECT_TRUE(testing::ch10::check_tp_speedup([](double w, int64_t p, double gbs, int64_t l, double a) {
    return ch10_step(w, 1, gbs, l, a) / ch10_step(w, p, gbs, l, a);
  }));
  EXPECT_TRUE(testing::ch10::check_kv_replicas(ch10_replicas));
}

TEST(WrongPredictionsCh10, BubbleOneSlotOff) {
  expect_rejected(testing::ch10::check_pipeline_bubble(
                      [](int64_t p, int64_t m) { return double(p - 1) / double(m + p); }),
                  "(p − 1) / (m + p), one slot too many");
}

TEST(WrongPredictionsCh10, BubbleOverTheWorkingTime) {
  expect_rejected(testing::ch10::check_pipeline_bubble([](int64_t p, int64_t m) { return double(p - 1) / double(m); }),
                  "(p − 1) / m, the idle time over the working time");
}

TEST(WrongPredictionsCh10, PayloadOfOneAllReduceALayer) {
  expect_rejected(testing::ch10::check_allreduce_payload([](int64_t d, int64_t b) { return double(d * b); }),
                  "one all-reduce a layer");
}

TEST(WrongPredictionsCh10, RingReduceScatterAlone) {
  expect_rejected(testing::ch10::check_ring_bytes([](double n, int64_t p) { return double(p - 1) / double(p) * n; }),
                  "the reduce-scatter alone");
}

TEST(WrongPredictionsCh10, StepWithTheWholeModelOnEveryRank) {
  expect_rejected(testing::ch10::check_tp_step_seconds([](double w, int64_t p, double gbs, int64_t l, double a) {
                    return ch10_step(w * double(p), p, gbs, l, a);
                  }),
                  "the whole model read by each rank");
}

TEST(WrongPredictionsCh10, StepWithAllReducesOnOneRank) {
  expect_rejected(testing::ch10::check_tp_step_seconds([](double w, int64_t p, double gbs, int64_t l, double a) {
                    return w / (double(p) * gbs * 1e9) + 2.0 * double(l) * a;
                  }),
                  "all-reduces on one rank too");
}

TEST(WrongPredictionsCh10, TheIdealSpeedUp) {
  expect_rejected(testing::ch10::check_tp_speedup([](double, int64_t p, double, int64_t, double) { return double(p); }),
                  "the ideal p");
}

TEST(WrongPredictionsCh10, GqaWithoutReplication) {
  expect_rejected(testing::ch10::check_kv_replicas(
                      [](int64_t h, int64_t g, int64_t p) -> int64_t { return h % p == 0 && g % p == 0 ? 1 : 0; }),
                  "no replication");
}

TEST(WrongPredictionsCh10, GqaWithoutTheQueryHeads) {
  expect_rejected(testing::ch10::check_kv_replicas(
                      [](int64_t, int64_t g, int64_t p) { return ch10_replicas(p * g, g, p); }),
                  "the query heads forgotten");
}

// ---- chapter 11 ----

TEST(WrongPredictionsCh11, RightAnswersPass) {
  const auto ops = [](int64_t bits) { return 2.0 * double(bits) / 8.0; };
  EXPECT_TRUE(testing::ch11::check_dot_ops(ops));
  EXPECT_TRUE(testing::ch11::check_int8_ceiling(
      [&](int64_t cores, double ghz, int64_t bits, double ipc) { return double(cores) * ghz * ipc * ops(bits); }));
  const auto ai = [](int64_t m, int64_t n, int64_t k, double w) {
    return 2.0 * double(m) * double(n) * double(k) / (double(n) * double(k) * w + 4.0 * double(m) * double(k + n));
  };
  EXPECT_TRUE(testing::ch11::check_gemm_intensity(ai));
  EXPECT_TRUE(testing::ch11::check_rows_at_ridge([&](double g, double b, int64_t n, int64_t k, double w) -> int64_t {
    if (double(n) * double(k) / (2.0 * double(n + k)) <= g / b) return 0;
    int64_t m = 1;
    while (ai(m, n, k, w) < g / b) ++m;
    return m;
  }));
}

TEST(WrongPredictionsCh11, ProductsWithoutTheirAdds) {
  expect_rejected(testing::ch11::check_dot_ops([](int64_t bits) { return double(bits) / 8.0; }),
                  "the products only");
}

TEST(WrongPredictionsCh11, TheFp32PeakForTheInt8Ceiling) {
  expect_rejected(testing::ch11::check_int8_ceiling([](int64_t cores, double ghz, int64_t bits, double ipc) {
                    return double(cores) * ghz * ipc * 2.0 * double(bits) / 32.0;
                  }),
                  "the fp32 FMA peak");
}

TEST(WrongPredictionsCh11, IntensityOfTheWeightsAlone) {
  expect_rejected(testing::ch11::check_gemm_intensity(
                      [](int64_t m, int64_t, int64_t, double w) { return 2.0 * double(m) / w; }),
                  "the weights' bytes only");
}

TEST(WrongPredictionsCh11, RidgeRowsFromTheWeightsAlone) {
  expect_rejected(testing::ch11::check_rows_at_ridge([](double g, double b, int64_t, int64_t, double w) {
                    return int64_t(std::ceil(g / b * w / 2.0));
                  }),
                  "the weights' bytes only");
}

// ---- chapter 12 ----

double ch12_tokens(double alpha, int64_t gamma) {
  return alpha == 1.0 ? double(gamma + 1) : (1.0 - std::pow(alpha, double(gamma + 1))) / (1.0 - alpha);
}

TEST(WrongPredictionsCh12, RightAnswersPass) {
  EXPECT_TRUE(testing::ch12::check_tokens_per_step(ch12_tokens));
  EXPECT_TRUE(testing::ch12::check_speedup([](double a, int64_t g, double t1, double d, double v) {
    return ch12_tokens(a, g) * t1 / (double(g) * d + v);
  }));
  EXPECT_TRUE(testing::ch12::check_guess_acceptance([](std::span<const double> p, int32_t d) { return p[size_t(d)]; }));
  EXPECT_TRUE(testing::ch12::check_acceptance_rate([](std::span<const double> p, std::span<const double> q) {
    double a = 0.0;
    for (size_t t = 0; t < p.size(); ++t) a += std::min(p[t], q[t]);
    return a;
  }));
  EXPECT_TRUE(testing::ch12::check_greedy_unchanged([] { return false; }));
}

TEST(WrongPredictionsCh12, TheTargetsOwnTokenForgotten) {
  expect_rejected(testing::ch12::check_tokens_per_step([](double a, int64_t g) { return ch12_tokens(a, g) - 1.0; }),
                  "the accepted guesses only");
}

TEST(WrongPredictionsCh12, TheBonusTokenForgotten) {
  expect_rejected(testing::ch12::check_tokens_per_step([](double a, int64_t g) {
                    return a == 1.0 ? double(g) : (1.0 - std::pow(a, double(g))) / (1.0 - a);
                  }),
                  "(1 − α^γ) / (1 − α) (one power short");
}

TEST(WrongPredictionsCh12, TheDraftsTimeForgotten) {
  expect_rejected(testing::ch12::check_speedup(
                      [](double a, int64_t g, double t1, double, double v) { return ch12_tokens(a, g) * t1 / v; }),
                  "the draft's time forgotten");
}

TEST(WrongPredictionsCh12, EveryGuessAccepted) {
  expect_rejected(testing::ch12::check_speedup([](double, int64_t g, double t1, double d, double v) {
                    return double(g + 1) * t1 / (double(g) * d + v);
                  }),
                  "γ + 1 tokens a step (every guess accepted)");
}

TEST(WrongPredictionsCh12, ADeterministicGuessAlwaysAccepted) {
  expect_rejected(testing::ch12::check_guess_acceptance([](std::span<const double>, int32_t) { return 1.0; }),
                  "always accepted");
}

TEST(WrongPredictionsCh12, AcceptOnlyWhenEqualToADrawFromP) {
  expect_rejected(testing::ch12::check_acceptance_rate([](std::span<const double> p, std::span<const double> q) {
                    double a = 0.0;
                    for (size_t t = 0; t < p.size(); ++t) a += p[t] * q[t];
                    return a;
                  }),
                  "Σ p·q");
}

TEST(WrongPredictionsCh12, GreedySpeculationChangesTheOutput) {
  expect_rejected(testing::ch12::check_greedy_unchanged([] { return true; }), "true (the drafter's mistakes");
}
}  // namespace
}  // namespace inferlab
