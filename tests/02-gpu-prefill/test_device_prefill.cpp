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

// ---- sim: every version, odd shapes up to L = 127, against the oracle ----

class SimPrefill : public ::testing::TestWithParam<VersionCase> {};

TEST_P(SimPrefill, MatchesFloat64Oracle) {
  const VersionCase& c = GetParam();
  EXPECT_TRUE(testing::attention_matches_oracle(c.version->run, c.version->precision, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch02, SimPrefill, ::testing::ValuesIn(testing::version_cases(Backend::sim, 2, 127)),
                         testing::version_case_name);

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
