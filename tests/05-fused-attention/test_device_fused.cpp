// Chapter 05: the fused CUDA prefill versions (cuda/flash, cuda/flash_tc, cuda/flash_tc_bf16)
// against the float64 oracle and against chapter 02's unfused cuda/tiled, on odd shapes, with
// outputs poisoned. Compiled twice (tests/05-fused-attention/CMakeLists.txt):
//  - INFERLAB_TEST_BACKEND_SIM: the sim backend (the SIMT emulator runs the kernels; for
//    flash_tc the WMMA fragments are modelled by simt/wmma.h), plus the checks only the emulator
//    can make: every launch under several thread schedules, the device-memory peak of a call
//    (no L×L buffer), and the benchmark's timing harness;
//  - otherwise the cuda backend, which skips (saying why) without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/compare.h"
#include "kernels/registry.h"
#include "kernels/fused/fused.h"
#include "tests/support/attention_check.h"
#include "tests/support/seeded.h"

#if defined(INFERLAB_TEST_BACKEND_SIM)
#include "kernels/timing/cuda_timing.h"
#include "simt/simt.h"
#endif

namespace inferlab {
namespace {

using testing::AttentionCase;
using testing::VersionCase;

#if defined(INFERLAB_TEST_BACKEND_SIM)
constexpr Backend kBackend = Backend::sim;
#else
constexpr Backend kBackend = Backend::cuda;
#endif

bool is_tensor_core(const AttentionVersion& version) {
  return version.name.rfind("cuda/flash_tc", 0) == 0;
}

// The shapes: seq_len 1, 15, 17, 63, 129, 200 — around the tiles of both kernels (32 and 64
// rows and keys). Up to 63 every seq_len meets every head_dim (64/80/96/128) and the GQA ratio
// (1/2/4) steps along a Latin square, so every head_dim meets every ratio; the long ones (the
// emulator is slow) take two head_dims each with GQA 2. All causal and not. Then extreme logits,
// and small odd head_dims for cuda/flash (cuda/flash_tc refuses them: see InvalidArguments).
std::vector<AttentionCase> fused_cases(const AttentionVersion& version) {
  struct Heads {
    int64_t num_heads, num_kv_heads;
  };
  const Heads ratios[] = {{2, 2}, {4, 2}, {4, 1}};  // GQA 1, 2, 4
  const int64_t head_dims[] = {64, 80, 96, 128};
  // cuda/flash_tc_bf16 is cuda/flash_tc's source with another input type: a few shapes suffice.
  if (version.precision == Precision::bf16)
    return {{4, 1, 17, 96, true}, {2, 2, 63, 128, false}, {2, 1, 200, 80, true}, {4, 2, 70, 80, true, 400.0f}};
  std::vector<AttentionCase> cases;
  const int64_t short_seq_lens[] = {1, 15, 17, 63};
  for (size_t i = 0; i < std::size(short_seq_lens); ++i)
    for (size_t j = 0; j < std::size(head_dims); ++j) {
      const Heads heads = ratios[(i + j) % std::size(ratios)];
      for (const bool causal : {false, true})
        cases.push_back({heads.num_heads, heads.num_kv_heads, short_seq_lens[i], head_dims[j], causal});
    }
  for (const int64_t seq_len : {129, 200})
    for (const int64_t head_dim : {seq_len == 129 ? 64 : 80, seq_len == 129 ? 96 : 128})
      for (const bool causal : {false, true}) cases.push_back({2, 1, seq_len, head_dim, causal});
  // Extreme logits (|score| in the hundreds): an un-rescaled exp would overflow.
  for (const float scale : {40.0f, 400.0f}) {
    cases.push_back({2, 1, 33, 64, false, scale});
    cases.push_back({4, 2, 70, 80, true, scale});
  }
  if (!is_tensor_core(version)) {
    cases.push_back({3, 1, 17, 7, true});
    cases.push_back({2, 2, 40, 33, false});
  }
  return cases;
}

std::vector<VersionCase> fused_version_cases() {
  std::vector<VersionCase> cases;
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != kBackend || version.chapter != 5 || version.name.rfind("cuda/", 0) != 0) continue;
    for (const AttentionCase& shape : fused_cases(version)) cases.push_back({&version, shape});
  }
  return cases;
}

// An upper bound on max |q·k|/√d (Cauchy–Schwarz: the largest query norm times the largest key
// norm), for the tolerance of comparing two versions with each other.
double logit_bound(const Tensor<float>& q, const Tensor<float>& k, int64_t head_dim) {
  auto max_norm = [head_dim](const Tensor<float>& x) {
    double best = 0.0;
    for (int64_t row = 0; row < x.size() / head_dim; ++row) {
      double sum = 0.0;
      for (int64_t c = 0; c < head_dim; ++c) sum += double(x[row * head_dim + c]) * x[row * head_dim + c];
      best = std::max(best, std::sqrt(sum));
    }
    return best;
  };
  return max_norm(q) * max_norm(k) / std::sqrt(double(head_dim));
}

// The fused version and chapter 02's unfused cuda/tiled on the same fresh inputs (rounded to the
// fused version's precision for cuda/tiled): the outputs agree within the fused version's
// tolerance (both are also checked against the oracle).
::testing::AssertionResult matches_unfused(const AttentionVersion& fused, const AttentionCase& c) {
  const AttentionVersion& tiled = find_attention_version("cuda/tiled", fused.backend);
  testing::SeededRng rng;
  const Tensor<float> q = rng.normal_tensor({c.num_heads, c.seq_len, c.head_dim}, 0.0f, c.logit_scale);
  const Tensor<float> k = rng.normal_tensor({c.num_kv_heads, c.seq_len, c.head_dim});
  const Tensor<float> v = rng.normal_tensor({c.num_kv_heads, c.seq_len, c.head_dim});
  Tensor<float> fused_out({c.num_heads, c.seq_len, c.head_dim}), tiled_out(fused_out.shape());
  fused_out.poison();
  tiled_out.poison();
  fused.run(q, k, v, c.causal, fused_out);
  // cuda/tiled (fp32) on the inputs rounded to the fused version's precision: what the fused
  // version computes from (tolerance.h: attention_tolerance() is relative to those inputs).
  tiled.run(round_to_precision(q, fused.precision), round_to_precision(k, fused.precision),
            round_to_precision(v, fused.precision), c.causal, tiled_out);
  Tensor<double> reference(tiled_out.shape());
  for (int64_t i = 0; i < tiled_out.size(); ++i) reference[i] = tiled_out[i];
  const Comparison comparison =
      compare_to_oracle(fused_out, reference, attention_tolerance(fused.precision, logit_bound(q, k, c.head_dim)));
  if (!comparison.ok)
    return ::testing::AssertionFailure() << fused.name << " vs cuda/tiled, " << c.name() << ": " << comparison.report();
  return ::testing::AssertionSuccess();
}

class FusedPrefill : public ::testing::TestWithParam<VersionCase> {
 protected:
  void SetUp() override {
    if (!backend_available(kBackend)) GTEST_SKIP() << backend_unavailable_reason(kBackend);
  }
};

TEST_P(FusedPrefill, MatchesFloat64Oracle) {
  const VersionCase& c = GetParam();
  EXPECT_TRUE(testing::attention_matches_oracle(c.version->run, c.version->precision, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch05, FusedPrefill, ::testing::ValuesIn(fused_version_cases()), testing::version_case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FusedPrefill);  // a build without nvcc has no cuda versions

// Against chapter 02's unfused kernel, on a few of the shapes (the oracle covers them all).
std::vector<VersionCase> unfused_comparison_cases() {
  std::vector<VersionCase> cases;
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != kBackend || version.chapter != 5 || version.name.rfind("cuda/", 0) != 0) continue;
    for (const AttentionCase& shape : {AttentionCase{4, 2, 63, 80, true}, AttentionCase{4, 1, 17, 64, false},
                                       AttentionCase{2, 1, 70, 96, true, 40.0f}})
      cases.push_back({&version, shape});
  }
  return cases;
}

class FusedVsUnfused : public FusedPrefill {};

TEST_P(FusedVsUnfused, MatchesChapter02Tiled) {
  const VersionCase& c = GetParam();
  EXPECT_TRUE(matches_unfused(*c.version, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch05, FusedVsUnfused, ::testing::ValuesIn(unfused_comparison_cases()),
                         testing::version_case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FusedVsUnfused);

// ---- invalid arguments: std::invalid_argument naming the argument ----

void expect_invalid(const AttentionFn& run, const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                    Tensor<float>& out, const std::string& names) {
  try {
    run(q, k, v, false, out);
    ADD_FAILURE() << "no exception; expected one naming '" << names << "'";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(names), std::string::npos) << error.what();
  }
}

TEST(FusedPrefillArguments, InvalidArgumentsThrowNamingThem) {
  if (!backend_available(kBackend)) GTEST_SKIP() << backend_unavailable_reason(kBackend);
  const AttentionFn& flash = find_attention_version("cuda/flash", kBackend).run;
  for (const char* name : {"cuda/flash_tc", "cuda/flash_tc_bf16"}) {
    SCOPED_TRACE(name);
    const AttentionFn& tc = find_attention_version(name, kBackend).run;
    // head_dim not a multiple of 16: the fragments' K.
    const Tensor<float> q24({2, 9, 24}), kv24({1, 9, 24});
    Tensor<float> out24({2, 9, 24});
    expect_invalid(tc, q24, kv24, kv24, out24, "head_dim = 24");
    const Tensor<float> q144({1, 5, 144}), kv144({1, 5, 144});
    Tensor<float> out144({1, 5, 144});
    expect_invalid(tc, q144, kv144, kv144, out144, "head_dim = 144");
  }
  const Tensor<float> q144({1, 5, 144}), kv144({1, 5, 144});
  Tensor<float> out144({1, 5, 144});
  expect_invalid(flash, q144, kv144, kv144, out144, "head_dim = 144");
  // Shapes that do not fit together (checked by attention_shape, as for every version).
  const Tensor<float> q({4, 9, 64}), kv({3, 9, 64}), kv_short({2, 8, 64});
  Tensor<float> out({4, 9, 64}), wrong_out({4, 9, 32});
  expect_invalid(flash, q, kv, kv, out, "num_heads = 4");
  expect_invalid(flash, q, kv_short, kv_short, out, "k.shape");
  const Tensor<float> kv2({2, 9, 64});
  expect_invalid(flash, q, kv2, kv2, wrong_out, "out");
}

#if defined(INFERLAB_TEST_BACKEND_SIM)

// ---- sim: the same launch under forward, reverse and shuffled thread orders ----

std::vector<VersionCase> schedule_cases() {
  std::vector<VersionCase> cases;
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != Backend::sim || version.chapter != 5 || version.name.rfind("cuda/", 0) != 0) continue;
    for (const AttentionCase& shape : {AttentionCase{4, 2, 70, 80, true}, AttentionCase{2, 1, 17, 64, false}}) {
      if (version.precision == Precision::bf16 && shape.seq_len < 64) continue;  // flash_tc's source again
      cases.push_back({&version, shape});
    }
  }
  return cases;
}

class FusedSchedules : public ::testing::TestWithParam<VersionCase> {};

TEST_P(FusedSchedules, SameOutputUnderEverySchedule) {
  const VersionCase& c = GetParam();
  EXPECT_TRUE(testing::attention_same_under_schedules(c.version->run, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch05, FusedSchedules, ::testing::ValuesIn(schedule_cases()), testing::version_case_name);

// ---- sim: the L×L matrix never exists ----

// The most device memory the emulator saw allocated at once during one call of @p run.
size_t peak_device_bytes(const AttentionFn& run, const AttentionCase& c) {
  testing::SeededRng rng;
  const Tensor<float> q = rng.normal_tensor({c.num_heads, c.seq_len, c.head_dim});
  const Tensor<float> k = rng.normal_tensor({c.num_kv_heads, c.seq_len, c.head_dim});
  const Tensor<float> v = rng.normal_tensor({c.num_kv_heads, c.seq_len, c.head_dim});
  Tensor<float> out({c.num_heads, c.seq_len, c.head_dim});
  const size_t before = simt::device_bytes_in_use();
  simt::reset_device_bytes_peak();
  run(q, k, v, c.causal, out);
  EXPECT_EQ(simt::device_bytes_in_use(), before) << "the call leaked device memory";
  return simt::device_bytes_peak() - before;
}

TEST(FusedMemory, NoScoreMatrixIsAllocated) {
  // L = 1024 with a small head_dim (the emulator's cost grows with L²·d): L² floats = 4 MiB,
  // while Q, K, V and O together are 256 KiB.
  const AttentionCase c{1, 1, 1024, 16, true};
  const AttentionShape shape{c.num_heads, c.num_kv_heads, c.seq_len, c.head_dim, c.causal};
  const size_t score_bytes = size_t(c.seq_len * c.seq_len) * sizeof(float);
  for (const auto& [name, input_bytes] : {std::pair{"cuda/flash", 4}, std::pair{"cuda/flash_tc", 2}}) {
    SCOPED_TRACE(name);
    const size_t peak = peak_device_bytes(find_attention_version(name, Backend::sim).run, c);
    EXPECT_LT(peak, score_bytes / 4);
    EXPECT_EQ(peak, size_t(fused_prefill_device_bytes(shape, input_bytes)))
        << "the fused path allocates exactly Q, K, V and O";
  }
}

TEST(FusedMemory, TheUnfusedControlDoesAllocateTheScores) {
  // The counter sees an L×L buffer where there is one: chapter 02's cuda/tiled at L = 96.
  const AttentionCase c{2, 1, 96, 16, false};
  const size_t peak = peak_device_bytes(find_attention_version("cuda/tiled", Backend::sim).run, c);
  EXPECT_GE(peak, size_t(c.num_heads * c.seq_len * c.seq_len) * sizeof(float));
}

// ---- sim: the benchmark's device-level timing of the fused versions ----

TEST(FusedTiming, EveryFusedVersionHasAPositiveTime) {
  const AttentionShape shape{4, 2, 40, 32, true};  // GQA, odd seq_len, head_dim a multiple of 16
  int timed = 0;
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != Backend::sim || version.chapter != 5 || version.name.rfind("cuda/", 0) != 0) continue;
    SCOPED_TRACE(version.name);
    const double seconds = sim::seconds_per_call(version.name, shape, 1, 2);
    EXPECT_GT(seconds, 0.0);
    EXPECT_LT(seconds, 60.0);
    ++timed;
  }
  EXPECT_EQ(timed, 3);  // flash, flash_tc, flash_tc_bf16
}

TEST(FusedTiming, AllocatesNoScratch) {
  const AttentionShape shape{2, 1, 512, 16, true};
  simt::reset_device_bytes_peak();
  const size_t before = simt::device_bytes_in_use();
  sim::seconds_per_call("cuda/flash", shape, 0, 1);
  EXPECT_EQ(simt::device_bytes_peak() - before, size_t(fused_prefill_device_bytes(shape, 4)));
}

TEST(FusedTiming, UnsupportedHeadDimThrowsNamingIt) {
  try {
    sim::seconds_per_call("cuda/flash_tc", AttentionShape{2, 1, 17, 24, false}, 0, 1);
    ADD_FAILURE() << "no exception for head_dim 24";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("head_dim = 24"), std::string::npos) << error.what();
  }
}

#endif

}  // namespace
}  // namespace inferlab
