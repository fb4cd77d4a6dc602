// Chapter 02 exercises, graded on the sim backend: the student's kernels (run by the SIMT
// emulator) against float64 oracles, on odd shapes, with outputs poisoned and every launch run
// under several thread schedules (tests/support/prefill_steps_check.h). Each TEST is one grading
// unit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "02-gpu-prefill/ch02.h"
#include "tests/support/expect_all.h"
#include "tests/support/prefill_steps_check.h"

namespace inferlab {
namespace {

using testing::AttentionCase;
using testing::GemmCase;
using testing::SoftmaxCase;

using testing::expect_all;

// ---- 2.1 attention_scores: one thread per score ----

void expect_scores(const std::vector<AttentionCase>& cases) {
  expect_all(cases,
             [](const AttentionCase& c) { return testing::scores_match_oracle(sim::student::attention_scores, c); });
}

TEST(Ch02Scores, OddShapes) {
  // seq_len ∈ {1, 2, 31, 33, 127} × head_dim ∈ {64, 80, 96, 128}, GQA ratios 1/2/4/8, causal and
  // not, and Q scaled up to logits in the hundreds.
  expect_scores(testing::odd_attention_cases(127));
}

TEST(Ch02Scores, CausalMask) {
  expect_scores({{2, 2, 17, 64, true}, {1, 1, 33, 80, true}, {4, 2, 127, 64, true}});
}

TEST(Ch02Scores, GroupedQueryAttention) {
  // Query head h reads KV head h / (num_heads / num_kv_heads).
  expect_scores({{8, 8, 17, 96, false},
                 {8, 4, 17, 96, true},
                 {8, 2, 17, 96, false},
                 {8, 1, 17, 96, true},
                 {6, 3, 31, 128, false}});
}

TEST(Ch02Scores, LongerSequence) {
  expect_scores({{2, 1, 127, 128, false}, {2, 2, 65, 80, true}});
}

TEST(Ch02Scores, SeqLenOne) {
  expect_scores({{1, 1, 1, 96, true}, {2, 1, 1, 64, false}});
}

// ---- 2.2 softmax_rows: warp shuffles and a block reduction ----

void expect_softmax(const std::vector<SoftmaxCase>& cases) {
  expect_all(cases, [](const SoftmaxCase& c) {
    return testing::softmax_matches_oracle([](const Tensor<float>& scores, Tensor<float>& probs,
                                              int threads) { sim::student::softmax_rows(scores, probs, threads); },
                                           c);
  });
}

TEST(Ch02Softmax, RowLengths) {
  // Shorter than a warp, around a warp, around the block, and several times the block.
  std::vector<SoftmaxCase> cases;
  for (int64_t row_len : {1, 2, 17, 31, 32, 33, 64, 127, 128, 129, 257, 1000}) cases.push_back({5, row_len});
  expect_softmax(cases);
}

TEST(Ch02Softmax, BlockSizes) {
  // One warp (no cross-warp step needed), a few warps, an odd number of warps, 32 warps.
  std::vector<SoftmaxCase> cases;
  for (int threads : {32, 64, 96, 256, 1024})
    for (int64_t row_len : {33, 300}) cases.push_back({3, row_len, threads});
  cases.push_back({2, 2049, 1024});
  expect_softmax(cases);
}

TEST(Ch02Softmax, MaskedEntriesBecomeZero) {
  // Row r keeps its first (r mod row_len) + 1 entries: the rows of causal attention.
  expect_softmax({{17, 17, 128, true}, {66, 33, 128, true}, {127, 127, 64, true}, {40, 300, 256, true}});
}

TEST(Ch02Softmax, ExtremeLogits) {
  // Logits in the hundreds: exp() without subtracting the max overflows to Inf.
  expect_softmax({{4, 33, 128, false, 300.0f}, {4, 257, 128, false, 300.0f}, {33, 33, 32, true, 300.0f}});
}

// ---- 2.3 gemm_tiled: shared-memory tiles, any M, N, K ----

void expect_gemm(const std::vector<GemmCase>& cases) {
  expect_all(cases, [](const GemmCase& c) { return testing::gemm_matches_oracle(sim::student::gemm_tiled, c); });
}

TEST(Ch02Gemm, OddShapes) {
  expect_gemm(testing::odd_gemm_cases());
}

TEST(Ch02Gemm, TileMultiples) {
  expect_gemm({{16, 16, 16}, {32, 64, 48}, {64, 16, 32}});
}

TEST(Ch02Gemm, VectorsAndScalars) {
  // A row times a matrix, a matrix times a column, outer products (K = 1), 1×1×1.
  expect_gemm({{1, 33, 17}, {31, 1, 33}, {17, 31, 1}, {1, 1, 1}, {1, 1, 127}});
}

TEST(Ch02Gemm, LongK) {
  expect_gemm({{17, 33, 257}, {33, 17, 513}});
}

}  // namespace
}  // namespace inferlab
