// Wrong chapter-03 decode kernels (tests/wrong/kernels/wrong_ch03_kernels.cu), run by the SIMT
// emulator through the very check that the real decode versions pass
// (tests/support/decode_check.h: generation replayed step by step against the chapter-02
// causal prefill, the cache poisoned past every length): each mistake must be rejected, and
// the same kernel without the mistake must pass.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>

#include "tests/support/decode_check.h"
#include "tests/wrong/kernels/wrong_ch03_kernels.h"

namespace inferlab {
namespace {

using testing::DecodeCase;
using ::testing::HasSubstr;
namespace fixtures = sim::wrong_ch03;
using fixtures::DecodeFixture;

DecodeFn decode_with(DecodeFixture fixture) {
  return [fixture](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    fixtures::decode(fixture, q, cache, out);
  };
}

// cpu/append writes every format with the same code; the fp32 row serves both dtypes here.
const KvAppendFn& cpu_append() {
  return kv_append_version_for(Backend::cpu, KvDtype::fp32).run;
}

TEST(WrongCh03, FixtureWithoutMistakesPasses) {
  for (KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
    for (const DecodeCase& c : testing::odd_decode_cases(65))
      EXPECT_TRUE(testing::decode_steps_match_prefill(decode_with(DecodeFixture::correct), dtype, cpu_append(), c));
}

TEST(WrongCh03, ReadingOneTokenPastTheEndHitsThePoisonedCache) {
  for (KvDtype dtype : {KvDtype::fp32, KvDtype::fp16}) {
    const auto result = testing::decode_steps_match_prefill(decode_with(DecodeFixture::one_past_end), dtype,
                                                            cpu_append(), {{33, 2, 17}, 2, 8, 2, 128});
    ASSERT_FALSE(result);
    // the poisoned slot reached the output: counted first, with the first one's position
    EXPECT_THAT(result.message(), HasSubstr("outputs are NaN, first at (sequence "));
    std::cout << result.message() << "\n";
    // Every shape of the graded cases exposes it. (Skipped: a cache filled to capacity, where
    // the extra read leaves the allocation — undefined behaviour that ASan would report.)
    for (const DecodeCase& c : testing::odd_decode_cases(65)) {
      if (c.capacity_slack == 0) continue;
      EXPECT_FALSE(
          testing::decode_steps_match_prefill(decode_with(DecodeFixture::one_past_end), dtype, cpu_append(), c))
          << c.name();
    }
  }
}

TEST(WrongCh03, IgnoringTheGqaMappingFails) {
  const auto fixture = decode_with(DecodeFixture::gqa_modulo);
  const auto result = testing::decode_steps_match_prefill(fixture, KvDtype::fp32, cpu_append(), {{9, 5}, 3, 8, 2, 64});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("is not row t of the causal prefill"));
  std::cout << result.message() << "\n";
  EXPECT_FALSE(testing::decode_steps_match_prefill(fixture, KvDtype::fp16, cpu_append(), {{9, 5}, 3, 8, 2, 64}));
  // Without grouping (one query head per KV head) or with one KV head the two mappings agree:
  // why the graded cases mix GQA ratios 2, 4 and 8 with several KV heads.
  EXPECT_TRUE(testing::decode_steps_match_prefill(fixture, KvDtype::fp32, cpu_append(), {{9, 5}, 2, 4, 4, 64}));
  EXPECT_TRUE(testing::decode_steps_match_prefill(fixture, KvDtype::fp32, cpu_append(), {{9, 5}, 2, 8, 1, 64}));
  int rejected = 0;
  for (const DecodeCase& c : testing::odd_decode_cases(65))
    rejected += !testing::decode_steps_match_prefill(fixture, KvDtype::fp32, cpu_append(), c);
  EXPECT_GE(rejected, 2) << "the graded shapes (odd_decode_cases) must expose the wrong grouping";
}

}  // namespace
}  // namespace inferlab
