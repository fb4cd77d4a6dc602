// Chapter 02, CPU side: every registered cpu version of chapter 02 (cpu/blocked, cpu/openblas)
// against the float64 oracle on the odd shapes of the testing policy, through the same check
// every version goes through (fresh random inputs, poisoned output, per-precision tolerance).
#include <gtest/gtest.h>

#include <cctype>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/registry.h"
#include "tests/support/attention_check.h"

namespace inferlab {
namespace {

using testing::AttentionCase;
using testing::VersionCase;

class Ch02CpuAttention : public ::testing::TestWithParam<VersionCase> {};

TEST_P(Ch02CpuAttention, MatchesFloat64Oracle) {
  const VersionCase& c = GetParam();
  EXPECT_TRUE(testing::attention_matches_oracle(c.version->run, c.version->precision, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch02, Ch02CpuAttention, ::testing::ValuesIn(testing::version_cases(Backend::cpu, 2)),
                         testing::version_case_name);

// Shapes the blocking itself makes interesting: seq_len just around the block and tile sizes
// (cpu_blocked.cpp: the S block holds up to 16 row tiles, i.e. 96 query rows; tiles are 6 rows ×
// 64 keys with AVX-512, 6 × 16 with AVX2, 4 × 2 scalar; P·V steps over 128 keys), head dims that
// are not a multiple of the tile width, and a GQA group of 8 over two KV heads.
std::vector<VersionCase> chapter02_block_edge_cases() {
  std::vector<VersionCase> cases;
  const std::vector<AttentionCase> shapes = {
      {1, 1, 95, 17, true},  {1, 1, 97, 33, false}, {2, 1, 129, 64, true},
      {2, 2, 191, 1, false}, {16, 2, 65, 48, true}, {1, 1, 300, 128, true},
  };
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != Backend::cpu || version.chapter != 2) continue;
    for (const AttentionCase& shape : shapes) cases.push_back({&version, shape});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Ch02BlockEdges, Ch02CpuAttention, ::testing::ValuesIn(chapter02_block_edge_cases()),
                         testing::version_case_name);

TEST(Ch02Registry, BothCpuVersionsAreRegisteredForChapter2) {
  EXPECT_EQ(find_attention_version("cpu/blocked", Backend::cpu).chapter, 2);
  EXPECT_EQ(find_attention_version("cpu/openblas", Backend::cpu).chapter, 2);
  EXPECT_EQ(find_attention_version("cpu/blocked", Backend::cpu).precision, Precision::fp32);
}

TEST(Ch02CpuValidation, BadShapesAreRejectedBeforeAnyWork) {
  const Tensor<float> q({4, 8, 16}), k({3, 8, 16}), v({3, 8, 16});
  for (const char* name : {"cpu/blocked", "cpu/openblas"}) {
    Tensor<float> out({4, 8, 16});
    EXPECT_THROW(find_attention_version(name, Backend::cpu).run(q, k, v, false, out), std::invalid_argument) << name;
    const Tensor<float> kv({2, 8, 16});
    Tensor<float> wrong_out({4, 8, 15});
    EXPECT_THROW(find_attention_version(name, Backend::cpu).run(q, kv, kv, false, wrong_out), std::invalid_argument)
        << name;
  }
}

}  // namespace
}  // namespace inferlab
