#pragma once
// Chapter 06 prediction questions (exercises/06-paged-attention/predictions.h), checked against
// values worked out here from first principles: the graded tests (test_predictions.cpp) pass the
// student's functions, tests/wrong/wrong_predictions.cpp passes the classic wrong answers and
// requires each to be rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tests/support/prediction_check.h"
#include "tests/support/seeded.h"

namespace inferlab::testing::ch06 {

inline const char* kLesson = "chapters/06-paged-attention/README.md, \"Predict first\" and \"The memory table\"";

using BlocksQuestion = std::function<int64_t(std::span<const int64_t> lengths, int64_t block_size)>;

/// P6.1: Σ ⌈L_i / B⌉.
inline ::testing::AssertionResult check_blocks_needed(const BlocksQuestion& predict) {
  SeededRng rng;
  std::vector<std::pair<std::vector<int64_t>, int64_t>> scenarios = {
      {{499}, 16}, {{1, 16, 17, 33}, 16}, {{2048, 2048}, 16}, {{7, 9, 130}, 1}, {{31, 1, 257}, 128}};
  for (int i = 0; i < 5; ++i) {
    std::vector<int64_t> lengths(static_cast<size_t>(rng.integer(1, 40)));
    for (int64_t& l : lengths) l = rng.integer(1, 4096);
    const int64_t sizes[] = {1, 8, 16, 32, 128};
    scenarios.push_back({lengths, sizes[rng.integer(0, 4)]});
  }
  std::vector<Prediction> predictions;
  for (const auto& [lengths, b] : scenarios) {
    int64_t blocks = 0, tokens = 0, floor_blocks = 0;
    std::string list;
    for (size_t i = 0; i < lengths.size(); ++i) {
      blocks += (lengths[i] + b - 1) / b;
      floor_blocks += lengths[i] / b;
      tokens += lengths[i];
      if (i < 6) list += (i ? ", " : "") + std::to_string(lengths[i]);
    }
    if (lengths.size() > 6) list += ", … (" + std::to_string(lengths.size()) + " sequences)";
    predictions.push_back({"lengths {" + list + "}, block " + std::to_string(b), double(blocks),
                           "Σ ⌈L / " + std::to_string(b) + "⌉ over the sequences (each rounds up on its own)",
                           double(predict(std::span<const int64_t>(lengths), b)),
                           {{"⌈Σ L / B⌉ (sequences pooled into shared blocks)", double((tokens + b - 1) / b)},
                            {"⌊L / B⌋ (the partial last block forgotten)", double(floor_blocks)}}});
  }
  return predictions_match("P6.1 predict_blocks_needed (blocks)", predictions, 0.0, 0.0, kLesson, seed_note(rng.seed()));
}

using BlockBytesQuestion = std::function<double(int64_t block_size, int64_t kv_heads, int64_t head_dim, double e)>;

/// P6.2: 2 · B · kv_heads · d · e.
inline ::testing::AssertionResult check_block_bytes(const BlockBytesQuestion& predict) {
  SeededRng rng;
  struct Scenario {
    int64_t b, h, d;
    double e;
  };
  std::vector<Scenario> scenarios = {{16, 32, 128, 2.0}, {16, 8, 128, 1.0}, {1, 1, 80, 4.0}, {128, 4, 64, 4.0}, {32, 3, 96, 2.0}};
  const double sizes[] = {1.0, 2.0, 4.0};
  for (int i = 0; i < 5; ++i)
    scenarios.push_back({rng.integer(1, 256), rng.integer(1, 64), rng.integer(16, 256), sizes[rng.integer(0, 2)]});
  std::vector<Prediction> predictions;
  for (const Scenario& s : scenarios) {
    const double expected = 2.0 * double(s.b) * double(s.h) * double(s.d) * s.e;
    predictions.push_back({"block " + std::to_string(s.b) + ", " + std::to_string(s.h) + " KV heads × d = " +
                               std::to_string(s.d) + ", " + prediction_number(s.e) + " B/element",
                           expected, "2 (K and V) · block · KV heads · d · e", predict(s.b, s.h, s.d, s.e),
                           {{"forgetting the ×2 for K and V", expected / 2.0},
                            {"counting bits instead of bytes", expected * 8.0}}});
  }
  return predictions_match("P6.2 predict_block_bytes (bytes)", predictions, 0.01, 0.0, kLesson, seed_note(rng.seed()));
}

using ContiguousQuestion = std::function<int64_t(double pool_gib, double kv_bytes_per_token, int64_t max_seq_len)>;
using PagedQuestion = std::function<int64_t(double pool_gib, double kv_bytes_per_token, int64_t block_size, double mean)>;

struct Pool {
  double gib, kv;
};

// The lesson's LLaMA-7B in 16 GiB (512 KiB per token), an 80 GB A100's pool, the chapter 07
// model's 24 KiB per token, Llama-3-8B in int8, then fresh ones.
inline std::vector<Pool> pools(SeededRng& rng) {
  std::vector<Pool> p = {{16.0, 524288.0}, {66.5, 524288.0}, {4.0, 24576.0}, {30.0, 65536.0}};
  for (int i = 0; i < 4; ++i) p.push_back({double(rng.integer(4, 160)), double(1024 * rng.integer(16, 1024))});
  return p;
}

inline std::string pool_inputs(const Pool& p) {
  return prediction_number(p.gib) + " GiB, " + prediction_number(p.kv) + " B of KV per token";
}

/// P6.3 (a): ⌊pool / (max_seq_len · KV per token)⌋.
inline ::testing::AssertionResult check_sequences_contiguous(const ContiguousQuestion& predict) {
  SeededRng rng;
  const int64_t max_lengths[] = {2048, 4096, 1000, 2047};
  std::vector<Prediction> predictions;
  int i = 0;
  for (const Pool& p : pools(rng)) {
    const int64_t m = i++ < 2 ? 2048 : max_lengths[rng.integer(0, 3)];
    const double slot = p.kv * double(m), expected = std::floor(p.gib * 1073741824.0 / slot);
    predictions.push_back({pool_inputs(p) + ", max_seq_len " + std::to_string(m), expected,
                           "⌊" + prediction_number(p.gib) + " · 2³⁰ B / (" + std::to_string(m) + " · " +
                               prediction_number(p.kv) + " B)⌋",
                           double(predict(p.gib, p.kv, m)),
                           {{"GiB read as GB (1e9 bytes)", std::floor(p.gib * 1e9 / slot)}}});
  }
  return predictions_match("P6.3 (a) predict_sequences_contiguous (sequences)", predictions, 0.0, 0.0, kLesson,
                           seed_note(rng.seed()));
}

/// P6.3 (b): ⌊(pool / KV per token) / (mean + (B − 1)/2)⌋, within 1.
inline ::testing::AssertionResult check_sequences_paged(const PagedQuestion& predict) {
  SeededRng rng;
  const int64_t blocks[] = {1, 8, 16, 32, 128};
  std::vector<Prediction> predictions;
  // The lesson's ShareGPT case (block 16, mean 499: 64 sequences) and Alpaca-like short
  // sequences in big blocks, where the last block's waste decides; then fresh ones.
  const int64_t fixed_blocks[] = {16, 128, 32, 16};
  const double fixed_means[] = {499.0, 78.0, 499.0, 200.0};
  size_t i = 0;
  for (const Pool& p : pools(rng)) {
    const int64_t b = i < 4 ? fixed_blocks[i] : blocks[rng.integer(0, 4)];
    const double mean = i < 4 ? fixed_means[i] : double(rng.integer(20, 2000));
    ++i;
    const double tokens = p.gib * 1073741824.0 / p.kv;
    const double expected = std::floor(tokens / (mean + double(b - 1) / 2.0));
    predictions.push_back(
        {pool_inputs(p) + ", block " + std::to_string(b) + ", mean length " + prediction_number(mean), expected,
         "pool " + prediction_number(tokens) + " tokens / (mean " + prediction_number(mean) + " + (B − 1)/2 = " +
             prediction_number(double(b - 1) / 2.0) + " wasted)",
         double(predict(p.gib, p.kv, b, mean)),
         {{"no waste at all (the last block's empty slots forgotten)", std::floor(tokens / mean)},
          {"a whole empty block per sequence", std::floor(tokens / (mean + double(b)))},
          {"GiB read as GB (1e9 bytes)", std::floor(p.gib * 1e9 / p.kv / (mean + double(b - 1) / 2.0))}}});
  }
  return predictions_match("P6.3 (b) predict_sequences_paged (sequences)", predictions, 0.0, 1.0, kLesson,
                           seed_note(rng.seed()));
}

}  // namespace inferlab::testing::ch06
