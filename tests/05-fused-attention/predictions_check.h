#pragma once
// Chapter 05 prediction questions (exercises/05-fused-attention/predictions.h), checked against
// values worked out here from first principles: the graded tests (test_predictions.cpp) pass the
// student's functions, tests/wrong/wrong_predictions.cpp passes the classic wrong answers and
// requires each to be rejected.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/prediction_check.h"
#include "tests/support/seeded.h"

namespace inferlab::testing::ch05 {

using FusedAiQuestion = std::function<double(int64_t seq_len, int64_t head_dim, int64_t group_size, double e)>;

/// P5.1: g·4·L²·d / (e·(2·g·L·d + 2·L·d)) = 2·g·L / (e·(g + 1)).
inline ::testing::AssertionResult check_fused_ai_gqa(const FusedAiQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    int64_t L, d, g;
    double e;
  };
  std::vector<Scenario> scenarios = {{2048, 128, 1, 2.0}, {2048, 128, 1, 4.0}, {4096, 128, 4, 2.0},
                                     {1, 64, 1, 4.0},     {33, 80, 8, 2.0},     {257, 96, 3, 1.0}};
  const int64_t groups[] = {1, 2, 4, 8};
  const double sizes[] = {1.0, 2.0, 4.0};
  for (int i = 0; i < 5; ++i)
    scenarios.push_back({rng.integer(1, 65536), rng.integer(16, 256), groups[rng.integer(0, 3)], sizes[rng.integer(0, 2)]});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double L = double(s.L), d = double(s.d), g = double(s.g);
    const double flops = g * 4.0 * L * L * d, bytes = s.e * (2.0 * g * L * d + 2.0 * L * d);
    const double expected = flops / bytes;
    predictions.push_back(
        {"L = " + std::to_string(s.L) + ", d = " + std::to_string(s.d) + ", group " + std::to_string(s.g) + ", " +
             prediction_number(s.e) + " B/element",
         expected,
         "FLOPs g·4·L²·d = " + prediction_number(flops) + " over bytes e·(2·g·L·d (Q, O) + 2·L·d (K, V)) = " +
             prediction_number(bytes) + " = 2·g·L / (e·(g + 1))",
         predict(s.L, s.d, s.g, s.e),
         {{"L / e, the MHA law (GQA's shared K and V ignored)", L / s.e},
          {"L / 2 whatever the element size", L / 2.0},
          {"the real unfused model", 4.0 * L * L * d / (s.e * (4.0 * L * L + 4.0 * L * d))},
          {"counting bits instead of bytes", expected / 8.0}}});
  }
  return predictions_match("P5.1 predict_fused_ai_gqa (FLOP/byte)", predictions, 0.01, 0.0,
                           "chapters/05-fused-attention/README.md §1 (fused: Q, K, V read once, O written once; "
                           "with GQA a KV head's K and V serve the whole group)",
                           seed_note(rng.seed()));
}

using ShareQuestion = std::function<double(int64_t seq_len, int64_t head_dim)>;

/// P5.2: 4·L·d / (4·L² + 4·L·d) = d / (L + d).
inline ::testing::AssertionResult check_fused_traffic_share(const ShareQuestion& predict) {
  SeededRng rng;
  std::vector<std::pair<int64_t, int64_t>> scenarios = {{64, 128}, {128, 128}, {4096, 128}, {1, 64}, {33, 80}, {512, 96}};
  for (int i = 0; i < 5; ++i) scenarios.push_back({rng.integer(2, 65536), rng.integer(16, 256)});
  std::vector<Prediction> predictions;
  for (auto [Li, di] : scenarios) {
    const double L = double(Li), d = double(di), expected = d / (L + d);
    predictions.push_back({"L = " + std::to_string(Li) + ", d = " + std::to_string(di), expected,
                           "fused e·4·L·d over real unfused e·(4·L² + 4·L·d) = d / (L + d)", predict(Li, di),
                           {{"the article's unfused model (scores once): 4d / (L + 4d)", 4.0 * d / (L + 4.0 * d)},
                            {"the inverse ratio (unfused / fused)", (L + d) / d},
                            {"the saving (1 − fused/unfused) instead of the share", L / (L + d)}}});
  }
  return predictions_match("P5.2 predict_fused_traffic_share (fused bytes / unfused bytes)", predictions, 0.01, 0.0,
                           "chapters/05-fused-attention/README.md §1 (what the unfused pipeline moves)",
                           seed_note(rng.seed()));
}

using TiledBytesQuestion = std::function<double(int64_t seq_len, int64_t head_dim, int64_t query_tile, double e)>;

/// P5.3: e·(2·L·d + 2·L·d·⌈L / Br⌉).
inline ::testing::AssertionResult check_fused_bytes_with_query_tiles(const TiledBytesQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    int64_t L, d, br;
    double e;
  };
  std::vector<Scenario> scenarios = {{4096, 128, 128, 2.0}, {4096, 128, 64, 2.0}, {1000, 64, 192, 4.0},
                                     {33, 80, 32, 4.0},     {1, 64, 64, 2.0},     {257, 96, 16, 2.0}};
  for (int i = 0; i < 5; ++i)
    scenarios.push_back({rng.integer(1, 32768), rng.integer(16, 256), 16 * rng.integer(1, 16), rng.integer(0, 1) == 0 ? 2.0 : 4.0});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double L = double(s.L), d = double(s.d);
    const int64_t tiles = (s.L + s.br - 1) / s.br;
    const double expected = s.e * (2.0 * L * d + 2.0 * L * d * double(tiles));
    predictions.push_back(
        {"L = " + std::to_string(s.L) + ", d = " + std::to_string(s.d) + ", Br = " + std::to_string(s.br) + ", " +
             prediction_number(s.e) + " B/element",
         expected,
         "e·(2·L·d (Q, O) + 2·L·d (K, V) · ⌈L / Br⌉ = " + std::to_string(tiles) + " query tiles)",
         predict(s.L, s.d, s.br, s.e),
         {{"the compulsory traffic only (K and V once)", s.e * 4.0 * L * d},
          {"L / Br without rounding up (the last, partial tile reads K and V too)",
           s.e * (2.0 * L * d + 2.0 * L * d * L / double(s.br))},
          {"forgetting the ×2 for K and V", s.e * (2.0 * L * d + L * d * double(tiles))}}});
  }
  return predictions_match("P5.3 predict_fused_bytes_with_query_tiles (bytes)", predictions, 0.01, 0.0,
                           "chapters/05-fused-attention/README.md §4 (the bytes a real fused kernel reads)",
                           seed_note(rng.seed()));
}

using QueryTileQuestion = std::function<int64_t(int64_t shared_memory_kib, int64_t head_dim, int64_t key_tile, double e)>;

/// P5.4: the largest multiple of 16, Br, with e·(Br·d + 2·Bc·d) + 4·Br·Bc ≤ budget.
inline ::testing::AssertionResult check_max_query_tile(const QueryTileQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    int64_t kib, d, bc;
    double e;
  };
  // An H100 (227 KiB), an A100 (163 KiB), the 48 KiB default, cuda/flash_tc's 64 KiB exactly
  // (Br = 64 at d = 128, Bc = 64, fp16), one where not even 16 rows fit, then fresh ones.
  std::vector<Scenario> scenarios = {{227, 128, 64, 2.0}, {163, 128, 128, 2.0}, {48, 64, 32, 4.0},
                                     {64, 128, 64, 2.0},  {8, 256, 64, 4.0},    {100, 80, 48, 2.0}};
  for (int i = 0; i < 5; ++i)
    scenarios.push_back({rng.integer(16, 228), 16 * rng.integer(2, 16), 16 * rng.integer(1, 8), rng.integer(0, 1) == 0 ? 2.0 : 4.0});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double d = double(s.d), bc = double(s.bc);
    auto largest = [&](double budget, double k_and_v, double score_bytes) {
      int64_t br = 0;
      while (s.e * (double(br + 16) * d + k_and_v * bc * d) + score_bytes * double(br + 16) * bc <= budget) br += 16;
      return double(br);
    };
    const double budget = double(s.kib) * 1024.0, expected = largest(budget, 2.0, 4.0);
    predictions.push_back(
        {std::to_string(s.kib) + " KiB, d = " + std::to_string(s.d) + ", Bc = " + std::to_string(s.bc) + ", " +
             prediction_number(s.e) + " B/element",
         expected,
         "e·(Br·d + 2·Bc·d) + 4·Br·Bc ≤ " + prediction_number(budget) + " bytes; at Br = " + prediction_number(expected) +
             ": " + prediction_number(s.e * (expected * d + 2.0 * bc * d) + 4.0 * expected * bc),
         double(predict(s.kib, s.d, s.bc, s.e)),
         {{"KB = 1000 bytes instead of KiB", largest(double(s.kib) * 1000.0, 2.0, 4.0)},
          {"a K tile without its V tile", largest(budget, 1.0, 4.0)},
          {"the scores in the input's element size instead of fp32", largest(budget, 2.0, s.e)}}});
  }
  return predictions_match("P5.4 predict_max_query_tile (rows)", predictions, 0.0, 0.0,
                           "chapters/05-fused-attention/README.md §3 (tiling) and §4 (the tile-size trade-off)",
                           seed_note(rng.seed()));
}

}  // namespace inferlab::testing::ch05
