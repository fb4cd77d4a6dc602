// Chapter 03: every CPU decode version (cpu/decode, cpu/decode_simd; fp32 and fp16 caches)
// replays generation step by step — prefill, then append + decode — and every step must equal
// row t of the chapter-02 causal prefill over tokens 0..t. The cache is poisoned past every
// sequence's length, so reading one slot too far fails.
#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "tests/support/decode_check.h"

namespace inferlab {
namespace {

using testing::DecodeVersionCase;

class CpuDecode : public ::testing::TestWithParam<DecodeVersionCase> {};

TEST_P(CpuDecode, EveryStepEqualsRowTOfTheCausalPrefill) {
  const DecodeVersionCase& c = GetParam();
  EXPECT_TRUE(testing::decode_steps_match_prefill(c.version->run, c.version->input,
                                                  kv_append_version_for(Backend::cpu, c.version->input).run, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch03, CpuDecode, ::testing::ValuesIn(testing::decode_version_cases(Backend::cpu)),
                         testing::decode_version_case_name);

// Many consecutive steps on one ragged batch: 40 tokens generated from a prompt of 1..21.
TEST(CpuDecodeLong, FortyConsecutiveSteps) {
  for (const DecodeVersion& version : decode_versions()) {
    // Chapter 04's INT8/FP8 rows have their own suites, with the quantization error budget.
    if (version.backend != Backend::cpu || KvFormat(version.input).quantized()) continue;
    const testing::DecodeCase c{{41, 61, 45}, 40, 8, 2, 80};
    EXPECT_TRUE(testing::decode_steps_match_prefill(version.run, version.input,
                                                    kv_append_version_for(Backend::cpu, version.input).run, c))
        << version.name << " " << to_string(version.input);
  }
}

}  // namespace
}  // namespace inferlab
