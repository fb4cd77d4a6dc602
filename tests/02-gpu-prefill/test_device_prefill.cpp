// Chapter 02: every CUDA version of prefill attention against the float64 oracle, on odd shapes,
// with outputs poisoned. Compiled twice (tests/02-gpu-prefill/CMakeLists.txt):
//  - INFERLAB_TEST_BACKEND_SIM: the sim backend (the SIMT emulator runs the kernels themselves),
//    always; plus every launch under several thread schedules (a missing barrier changes the
//    result under some order);
//  - otherwise the cuda backend, which skips (saying why) without a GPU.
#include <gtest/gtest.h>

#include <cctype>

#include "kernels/registry.h"
#include "tests/support/attention_check.h"

namespace inferlab {
namespace {

using testing::AttentionCase;
using testing::VersionCase;

#if defined(INFERLAB_TEST_BACKEND_SIM)

// ---- sim: every version on every shape the cuda build runs, against the oracle ----

// The cuda build's cases (odd_attention_cases up to L = 257), so that a machine without a GPU
// checks the same kernels on the same shapes. Up to L = 127 they are the cuda ones as they are.
// At L = 257 (16 tiles of 16 and one row past them) each case keeps its L, head_dim, causality
// and GQA ratio with a single KV head — h8_kv2 → h4_kv1, h4_kv2 → h2_kv1, h2_kv2 → h1_kv1, h8_kv1
// as is — because the emulator's cost grows with the heads: the 40 cases at the cuda head counts
// took 17 s of CPU on 2 cores, these about two thirds of that.
std::vector<VersionCase> sim_cases() {
  std::vector<VersionCase> cases = testing::version_cases(Backend::sim, 2);
  for (VersionCase& c : cases)
    if (c.shape.seq_len > 127) {
      c.shape.num_heads /= c.shape.num_kv_heads;
      c.shape.num_kv_heads = 1;
    }
  return cases;
}

class SimPrefill : public ::testing::TestWithParam<VersionCase> {};

TEST_P(SimPrefill, MatchesFloat64Oracle) {
  const VersionCase& c = GetParam();
  EXPECT_TRUE(testing::attention_matches_oracle(c.version->run, c.version->precision, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch02, SimPrefill, ::testing::ValuesIn(sim_cases()), testing::version_case_name);

// ---- sim: the same launch under forward, reverse and shuffled thread orders ----

std::vector<VersionCase> schedule_cases() {
  std::vector<VersionCase> cases;
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != Backend::sim || version.chapter != 2) continue;
    for (const AttentionCase& shape : {AttentionCase{4, 2, 33, 80, true}, AttentionCase{2, 2, 17, 64, false}})
      cases.push_back({&version, shape});
  }
  return cases;
}

class SimPrefillSchedules : public ::testing::TestWithParam<VersionCase> {};

TEST_P(SimPrefillSchedules, SameOutputUnderEverySchedule) {
  const VersionCase& c = GetParam();
  EXPECT_TRUE(testing::attention_same_under_schedules(c.version->run, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch02, SimPrefillSchedules, ::testing::ValuesIn(schedule_cases()),
                         testing::version_case_name);

#else

// ---- cuda: the same checks on a real GPU (skipped, saying why, without one) ----

class CudaPrefill : public ::testing::TestWithParam<VersionCase> {};

TEST_P(CudaPrefill, MatchesFloat64Oracle) {
  if (!backend_available(Backend::cuda)) GTEST_SKIP() << backend_unavailable_reason(Backend::cuda);
  const VersionCase& c = GetParam();
  EXPECT_TRUE(testing::attention_matches_oracle(c.version->run, c.version->precision, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch02, CudaPrefill, ::testing::ValuesIn(testing::version_cases(Backend::cuda, 2)),
                         testing::version_case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaPrefill);  // a build without nvcc has no cuda versions

#endif

}  // namespace
}  // namespace inferlab
