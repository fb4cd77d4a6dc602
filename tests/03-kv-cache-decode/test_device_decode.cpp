// Chapter 03: the CUDA code (cuda/decode, cuda/append) against the chapter-02 oracle, replaying
// generation step by step on odd ragged batches with the cache poisoned past every length.
// Compiled twice (tests/03-kv-cache-decode/CMakeLists.txt):
//  - INFERLAB_TEST_BACKEND_SIM: the sim backend (the SIMT emulator runs the kernels themselves),
//    always; plus every launch under several thread schedules;
//  - otherwise the cuda backend, which skips (saying why) without a GPU.
#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "tests/support/decode_check.h"

namespace inferlab {
namespace {

using testing::DecodeCase;
using testing::DecodeVersionCase;

// The longest sequence of the decode shapes, the same on both backends: a machine without a GPU
// checks the kernels on the shapes a GPU runs (decode grids are small: a block per (head,
// sequence); the emulator's L = 127 and 129 cases take a few tens of milliseconds each).
constexpr int64_t kMaxLength = 129;

#if defined(INFERLAB_TEST_BACKEND_SIM)
constexpr Backend kBackend = Backend::sim;
#define INFERLAB_SKIP_WITHOUT_BACKEND()
#else
constexpr Backend kBackend = Backend::cuda;
#define INFERLAB_SKIP_WITHOUT_BACKEND() \
  if (!backend_available(Backend::cuda)) GTEST_SKIP() << backend_unavailable_reason(Backend::cuda)
#endif

// ---- decode: every step of generation equals row t of the causal prefill ----

class DeviceDecode : public ::testing::TestWithParam<DecodeVersionCase> {};

TEST_P(DeviceDecode, EveryStepEqualsRowTOfTheCausalPrefill) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  const DecodeVersionCase& c = GetParam();
  EXPECT_TRUE(testing::decode_steps_match_prefill(c.version->run, c.version->input,
                                                  kv_append_version_for(kBackend, c.version->input).run, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch03, DeviceDecode, ::testing::ValuesIn(testing::decode_version_cases(kBackend, kMaxLength)),
                         testing::decode_version_case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceDecode);  // a build without nvcc has no cuda versions

// Head dims off the 16-byte path (fp32 d % 4 ≠ 0, fp16 d % 8 ≠ 0) and rows that leave some
// lanes of a key group masked (d = 36: 9 float4 per row).
TEST(DeviceDecodeOddHeadDim, ScalarAndMaskedRowSplits) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  for (const DecodeVersion& version : decode_versions()) {
    // Chapter 04's INT8/FP8 rows have their own suites, with the quantization error budget.
    if (version.backend != kBackend || KvFormat(version.input).quantized()) continue;
    for (int64_t d : {int64_t(36), int64_t(20), int64_t(7)}) {
      const DecodeCase c{{9, 4}, 2, 4, 2, d};
      EXPECT_TRUE(
          testing::decode_steps_match_prefill(version.run, version.input,
                                              kv_append_version_for(kBackend, version.input).run, c))
          << version.name << " " << to_string(version.input) << " d = " << d;
    }
  }
}

// ---- append: the same bytes as the CPU append; a full sequence is refused ----

TEST(DeviceAppend, WritesTheSameBytesAsTheCpuAppend) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  for (KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
    for (const DecodeCase& c : {DecodeCase{{1, 6, 3}, 1, 4, 2, 80}, DecodeCase{{5, 5}, 1, 8, 1, 7, 0}})
      EXPECT_TRUE(testing::append_matches_reference(kv_append_version_for(kBackend, dtype).run, dtype, c,
                                                    kBackend == Backend::sim))
          << to_string(dtype);
}

TEST(DeviceAppend, AppendingPastCapacityIsAnError) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  for (KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
    EXPECT_TRUE(testing::append_rejects_full_sequence(kv_append_version_for(kBackend, dtype).run, dtype)) << to_string(dtype);
}

#if defined(INFERLAB_TEST_BACKEND_SIM)

// ---- sim: the same decode launch under forward, reverse and shuffled thread orders ----

std::vector<DecodeVersionCase> schedule_cases() {
  std::vector<DecodeVersionCase> cases;
  for (const DecodeVersion& version : decode_versions()) {
    if (version.backend != Backend::sim || version.chapter != 3) continue;
    for (const DecodeCase& shape : {DecodeCase{{33, 5, 17}, 1, 8, 2, 80}, DecodeCase{{47, 2}, 1, 4, 4, 128}})
      cases.push_back({&version, shape});
  }
  return cases;
}

class SimDecodeSchedules : public ::testing::TestWithParam<DecodeVersionCase> {};

TEST_P(SimDecodeSchedules, SameOutputUnderEverySchedule) {
  const DecodeVersionCase& c = GetParam();
  EXPECT_TRUE(testing::decode_same_under_schedules(c.version->run, c.version->input, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch03, SimDecodeSchedules, ::testing::ValuesIn(schedule_cases()),
                         testing::decode_version_case_name);

#endif

}  // namespace
}  // namespace inferlab
