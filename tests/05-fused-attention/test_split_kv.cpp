// Chapter 05: split-KV decode (cpu/decode_split, cuda/decode_split) against the chapter-02
// causal-prefill oracle (generation replayed step by step, tests/support/decode_check.h), the
// float64 decode oracle and chapter 03's decode on the same cache, for S = 1, 2, 3, 7 and S
// greater than every length (empty splits), ragged batches, GQA, fp32 and fp16 caches.
// Compiled three times (tests/05-fused-attention/CMakeLists.txt):
//  - INFERLAB_TEST_BACKEND_CPU: cpu/decode_split against cpu/decode_simd; the heuristic;
//  - INFERLAB_TEST_BACKEND_SIM: cuda/decode_split on the SIMT emulator against cuda/decode, plus
//    every launch under several thread schedules;
//  - otherwise the cuda backend, which skips (saying why) without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/compare.h"
#include "kernels/registry.h"
#include "kernels/fused/cuda_decode_split.h"
#include "kernels/fused/split_kv.h"
#include "tests/support/decode_check.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using testing::DecodeCase;

// The longest sequence of the shapes, and an S above every length (empty splits): the same on
// every backend, so that a machine without a GPU checks the kernels on the shapes a GPU runs.
constexpr int64_t kMaxLength = 301;
constexpr int64_t kMoreSplitsThanTokens = 400;

// split_fn(S): the backend's split-KV decode with S splits. previous: chapter 03's decode there.
#if defined(INFERLAB_TEST_BACKEND_CPU)
constexpr Backend kBackend = Backend::cpu;
const char* const kChapter03Decode = "cpu/decode_simd";
void split_decode(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out, int64_t num_splits) {
  decode_cpu_split(q, cache, out, num_splits);
}
#define INFERLAB_SKIP_WITHOUT_BACKEND()
#elif defined(INFERLAB_TEST_BACKEND_SIM)
constexpr Backend kBackend = Backend::sim;
const char* const kChapter03Decode = "cuda/decode";
void split_decode(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out, int64_t num_splits) {
  sim::decode_split_cuda(q, cache, out, num_splits);
}
#define INFERLAB_SKIP_WITHOUT_BACKEND()
#else
constexpr Backend kBackend = Backend::cuda;
const char* const kChapter03Decode = "cuda/decode";
void split_decode(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out, int64_t num_splits) {
#if INFERLAB_WITH_CUDA
  cuda::decode_split_cuda(q, cache, out, num_splits);
#else
  (void)q, (void)cache, (void)out, (void)num_splits;
  throw std::runtime_error("this build has no cuda backend (configured without nvcc)");
#endif
}
#define INFERLAB_SKIP_WITHOUT_BACKEND() \
  if (!backend_available(Backend::cuda)) GTEST_SKIP() << backend_unavailable_reason(Backend::cuda)
#endif

DecodeFn with_splits(int64_t num_splits) {
  return [num_splits](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    split_decode(q, cache, out, num_splits);
  };
}

const KvAppendFn& append(KvDtype dtype) {
  return kv_append_version_for(kBackend, dtype).run;
}

// Ragged batches from length 1 to a few hundred, GQA 1, 4 and 8.
std::vector<DecodeCase> split_cases() {
  // On the emulator the longest batch keeps its lengths, head_dim and GQA ratio with one KV head
  // (4 heads, not 8 over 2): its cost grows with the blocks, heads × batch × S (12 800 at 8 heads
  // and S = 400).
  const bool sim = kBackend == Backend::sim;
  return {
      {{1, 5, 130, 301}, 1, sim ? 4 : 8, sim ? 1 : 2, 80},  // lengths 1 … 301, GQA 4
      {{2, 64, 17}, 2, 4, 4, 128},                          // MHA, a split boundary inside every sequence
      {{33, 65}, 3, 8, 1, 64, 0},                           // MQA (GQA 8); the longest fills its cache
      {{1, 9, 40}, 1, 2, 2, 7},                             // head_dim off the vector width
  };
}

// ---- the registered versions (S from the heuristic) replay generation ----

TEST(SplitKvDecode, RegisteredVersionsEqualTheCausalPrefillAtEveryStep) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  int versions = 0;
  for (const DecodeVersion& version : decode_versions()) {
    if (version.backend != kBackend || version.chapter != 5) continue;
    ++versions;
    for (const DecodeCase& c : testing::odd_decode_cases(kMaxLength))
      EXPECT_TRUE(testing::decode_steps_match_prefill(version.run, version.input, append(version.input), c))
          << version.name << " " << to_string(version.input);
  }
  EXPECT_EQ(versions, 2) << "one chapter-05 split-KV decode per cache dtype on " << to_string(kBackend);
}

// ---- explicit S: 1, 2, 3, 7 and more splits than tokens ----

class SplitKvExplicit : public ::testing::TestWithParam<int64_t> {};

TEST_P(SplitKvExplicit, EveryStepEqualsTheCausalPrefill) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  const int64_t num_splits = GetParam();
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
    for (const DecodeCase& c : split_cases())
      EXPECT_TRUE(testing::decode_steps_match_prefill(with_splits(num_splits), dtype, append(dtype), c))
          << "S = " << num_splits << ", " << to_string(dtype) << " cache";
}

// One cache state, decoded by the split version and by chapter 03's decode, both compared with
// the float64 decode oracle (decode_reference) under the tolerance of the cache's precision.
TEST_P(SplitKvExplicit, MatchesTheDecodeOracleAndChapter03) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  const int64_t num_splits = GetParam();
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
    for (const DecodeCase& c : split_cases()) {
      testing::SeededRng rng;
      const int64_t batch = int64_t(c.lengths.size());
      KvCache cache({batch, c.num_kv_heads, c.max_seq_len(), c.head_dim}, dtype);
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t T = c.lengths[size_t(b)];
        cache.prefill(b, rng.normal_tensor({c.num_kv_heads, T, c.head_dim}),
                      rng.normal_tensor({c.num_kv_heads, T, c.head_dim}));
      }
      const Tensor<float> q = rng.normal_tensor({batch, c.num_heads, c.head_dim});
      const Tensor<double> oracle = decode_reference(q, cache);
      // N(0, 1) data: logits of a few units, where the precision's tolerance needs no widening.
      const Tolerance tolerance = tolerance_for(precision_of(dtype));
      Tensor<float> split(q.shape()), chapter03(q.shape());
      split.poison();
      chapter03.poison();
      split_decode(q, cache, split, num_splits);
      find_decode_version(kChapter03Decode, kBackend, dtype).run(q, cache, chapter03);
      const Comparison to_oracle = compare_to_oracle(split, oracle, tolerance);
      EXPECT_TRUE(to_oracle.ok) << c.name() << " S = " << num_splits << " " << to_string(dtype) << " vs oracle\n"
                                << to_oracle.report();
      Tensor<double> previous(chapter03.shape());
      for (int64_t i = 0; i < chapter03.size(); ++i) previous[i] = chapter03[i];
      const Comparison to_chapter03 = compare_to_oracle(split, previous, tolerance);
      EXPECT_TRUE(to_chapter03.ok) << c.name() << " S = " << num_splits << " " << to_string(dtype) << " vs "
                                   << kChapter03Decode << "\n"
                                   << to_chapter03.report();
    }
}

INSTANTIATE_TEST_SUITE_P(Ch05, SplitKvExplicit,
                         ::testing::Values(int64_t(1), int64_t(2), int64_t(3), int64_t(7), kMoreSplitsThanTokens),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           std::string name = std::to_string(info.param);
                           return name.insert(0, 1, 'S');
                         });

// ---- invalid arguments ----

TEST(SplitKvDecode, ZeroOrNegativeSplitsAreRejected) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  KvCache cache({1, 1, 8, 16}, KvDtype::fp32);
  testing::SeededRng rng;
  cache.prefill(0, rng.normal_tensor({1, 4, 16}), rng.normal_tensor({1, 4, 16}));
  const Tensor<float> q = rng.normal_tensor({1, 2, 16});
  Tensor<float> out(q.shape());
  for (const int64_t bad : {int64_t(0), int64_t(-3)}) {
    try {
      split_decode(q, cache, out, bad);
      ADD_FAILURE() << "num_splits = " << bad << " was accepted";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("num_splits"), std::string::npos) << error.what();
    }
  }
  Tensor<float> wrong_out({1, 2, 15});
  EXPECT_THROW(split_decode(q, cache, wrong_out, 2), std::invalid_argument);
}

#if defined(INFERLAB_TEST_BACKEND_SIM)

// ---- sim: the partial and reduce kernels under forward, reverse and shuffled thread orders ----

TEST(SplitKvDecodeSchedules, SameOutputUnderEverySchedule) {
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
    for (const int64_t num_splits : {int64_t(3), int64_t(70)})  // 70: more splits than the 47 tokens
      for (const DecodeCase& c : {DecodeCase{{33, 5, 17}, 1, 8, 2, 80}, DecodeCase{{47, 2}, 1, 4, 4, 128}})
        EXPECT_TRUE(testing::decode_same_under_schedules(with_splits(num_splits), dtype, c))
            << "S = " << num_splits << " " << to_string(dtype);
}

#endif

#if defined(INFERLAB_TEST_BACKEND_CPU)

// ---- the heuristic and the split ranges (split_kv.h), against hand-computed values ----

TEST(SplitKvHeuristic, FillsTheMachineWithoutTinySplits) {
  const SplitPolicy cpu{8, 512};
  EXPECT_EQ(choose_num_splits(1, 32768, cpu), 8);   // batch 1, one KV head: ⌈8 / 1⌉
  EXPECT_EQ(choose_num_splits(3, 32768, cpu), 3);   // ⌈8 / 3⌉
  EXPECT_EQ(choose_num_splits(16, 32768, cpu), 1);  // the plain decode already fills the machine
  EXPECT_EQ(choose_num_splits(1, 1500, cpu), 2);    // ⌊1500 / 512⌋ = 2: no split under 512 tokens
  EXPECT_EQ(choose_num_splits(1, 100, cpu), 1);
  const SplitPolicy gpu{528, 256, 8192};
  EXPECT_EQ(choose_num_splits(8, 32768, gpu), 66);    // ⌈528 / 8⌉ = 66 ≤ ⌊32768 / 256⌋ = 128
  EXPECT_EQ(choose_num_splits(1024, 65536, gpu), 8);  // shared memory forces ⌈65536 / 8192⌉ = 8
  EXPECT_GE(choose_num_splits(1, 4096, cpu_split_policy()), 1);
  // Extreme values stay exact (the CPU policy's max_tokens is INT64_MAX: ⌈a / b⌉ must not form
  // a + b − 1; the asan preset's UBSan checks it).
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(choose_num_splits(huge, huge, cpu), 1);              // ⌈8 / huge⌉ = 1
  EXPECT_EQ(choose_num_splits(1, huge, {huge, 1, huge}), huge);  // ⌈huge / 1⌉, ⌊huge / 1⌋, ⌈huge / huge⌉ = 1
  EXPECT_EQ(choose_num_splits(3, huge - 1, {8, huge, huge}), 1);  // ⌈(huge − 1) / huge⌉ = 1
}

TEST(SplitKvHeuristic, BadArgumentsNameThemselves) {
  EXPECT_THROW(choose_num_splits(0, 100, {8, 512}), std::invalid_argument);
  EXPECT_THROW(choose_num_splits(1, 0, {8, 512}), std::invalid_argument);
  EXPECT_THROW(choose_num_splits(1, 100, {0, 512}), std::invalid_argument);
  EXPECT_THROW(choose_num_splits(1, 100, {8, 0}), std::invalid_argument);
}

TEST(SplitKvRanges, CoverEveryKeyOnceAndAllowEmptySplits) {
  for (const int64_t length : {int64_t(1), int64_t(7), int64_t(64), int64_t(301)})
    for (const int64_t splits : {int64_t(1), int64_t(2), int64_t(3), int64_t(7), int64_t(400)}) {
      int64_t next = 0;
      for (int64_t s = 0; s < splits; ++s) {
        const SplitRange r = split_range(length, splits, s);
        EXPECT_EQ(r.begin, next) << "length " << length << ", S " << splits << ", split " << s;
        EXPECT_LE(r.begin, r.end);
        EXPECT_LE(r.end - r.begin, (length + splits - 1) / splits);
        next = r.end;
      }
      EXPECT_EQ(next, length) << "length " << length << ", S " << splits;
    }
  EXPECT_EQ(split_range(10, 3, 0).end, 4);  // ⌈10 / 3⌉ = 4: 0–3, 4–7, 8–9
  EXPECT_EQ(split_range(10, 3, 2).begin, 8);
  EXPECT_EQ(split_range(2, 7, 5).begin, split_range(2, 7, 5).end);  // empty
}

#endif

}  // namespace
}  // namespace inferlab
