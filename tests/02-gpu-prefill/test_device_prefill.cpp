// Chapter 02: every CUDA version of prefill attention against the float64 oracle, on odd shapes,
// with outputs poisoned. Compiled twice (tests/02-gpu-prefill/CMakeLists.txt):
//  - INFERLAB_TEST_BACKEND_SIM: the sim backend (the SIMT emulator runs the kernels themselves),
//    always; plus every launch under several thread schedules (a missing barrier changes the
//    result under some order);
//  - otherwise the cuda backend, which skips (saying why) without a GPU.
#include <gtest/gtest.h>

#include <cctype>

#include "kernels/attention/registry.h"
#include "tests/support/attention_check.h"

namespace inferlab {
namespace {

using testing::AttentionCase;

struct VersionCase {
  const AttentionVersion* version;
  AttentionCase shape;
};

// Shown by gtest instead of the raw bytes of the parameter.
void PrintTo(const VersionCase& c, std::ostream* out) {
  *out << c.version->name << " (" << to_string(c.version->backend) << ") " << c.shape.name();
}

std::string case_name(const ::testing::TestParamInfo<VersionCase>& info) {
  std::string name = info.param.version->name + "_" + std::string(to_string(info.param.version->backend)) + "_" +
                     info.param.shape.name();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

std::vector<VersionCase> cases_for(Backend backend, int64_t max_seq_len) {
  std::vector<VersionCase> cases;
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != backend || version.chapter != 2) continue;
    for (const AttentionCase& shape : testing::odd_attention_cases(max_seq_len)) cases.push_back({&version, shape});
  }
  return cases;
}

#if defined(INFERLAB_TEST_BACKEND_SIM)

// ---- sim: every version, odd shapes up to L = 127, against the oracle ----

class SimPrefill : public ::testing::TestWithParam<VersionCase> {};

TEST_P(SimPrefill, MatchesFloat64Oracle) {
  const VersionCase& c = GetParam();
  EXPECT_TRUE(testing::attention_matches_oracle(c.version->run, c.version->precision, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch02, SimPrefill, ::testing::ValuesIn(cases_for(Backend::sim, 127)), case_name);

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

INSTANTIATE_TEST_SUITE_P(Ch02, SimPrefillSchedules, ::testing::ValuesIn(schedule_cases()), case_name);

#else

// ---- cuda: the same checks on a real GPU (skipped, saying why, without one) ----

class CudaPrefill : public ::testing::TestWithParam<VersionCase> {};

TEST_P(CudaPrefill, MatchesFloat64Oracle) {
  if (!backend_available(Backend::cuda)) GTEST_SKIP() << backend_unavailable_reason(Backend::cuda);
  const VersionCase& c = GetParam();
  EXPECT_TRUE(testing::attention_matches_oracle(c.version->run, c.version->precision, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch02, CudaPrefill, ::testing::ValuesIn(cases_for(Backend::cuda, 257)), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaPrefill);  // a build without nvcc has no cuda versions

#endif

}  // namespace
}  // namespace inferlab
