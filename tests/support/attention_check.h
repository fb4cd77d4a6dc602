#pragma once
/// @file attention_check.h
/// The one check every prefill attention implementation goes through — reference versions,
/// student code and the wrong fixtures in tests/wrong alike: fresh random inputs, a poisoned
/// output, the float64 oracle, and the tolerance of the implementation's precision.

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "kernels/registry.h"

namespace inferlab::testing {

/// One test shape.
struct AttentionCase {
  int64_t num_heads = 1;
  int64_t num_kv_heads = 1;
  int64_t seq_len = 1;
  int64_t head_dim = 64;
  bool causal = false;
  float logit_scale = 1.0f;  ///< Q is multiplied by this: large values give extreme logits

  /// "h8_kv2_L33_d80_causal" — usable as a gtest parameter name.
  std::string name() const;
};

/// The odd shapes of the testing policy: seq_len ∈ {1, 2, 31, 33, 127, 257}, head_dim ∈ {64, 80,
/// 96, 128}, GQA ratio ∈ {1, 2, 4, 8}, causal and not, and extreme-logit cases. @p max_seq_len
/// drops longer cases (the emulator runs smaller grids).
std::vector<AttentionCase> odd_attention_cases(int64_t max_seq_len = 257);

/// One registered version on one test shape: the parameter of the chapters' version suites.
struct VersionCase {
  const AttentionVersion* version = nullptr;  ///< the version under test
  AttentionCase shape;                        ///< the shape it runs on
};

/// Prints "cpu/blocked (cpu) h8_kv2_L33_d80_causal" in gtest messages instead of raw bytes.
void PrintTo(const VersionCase& c, std::ostream* out);

/// "cpu_blocked_cpu_h8_kv2_L33_d80_causal": a gtest parameter name for @p info's case.
std::string version_case_name(const ::testing::TestParamInfo<VersionCase>& info);

/// Every version of @p chapter registered on @p backend, crossed with odd_attention_cases(@p max_seq_len).
std::vector<VersionCase> version_cases(Backend backend, int chapter, int64_t max_seq_len = 257);

/// Runs @p run on fresh random inputs of @p c (output poisoned with NaN first) and compares
/// with the float64 oracle of the inputs rounded to @p precision (round_to_precision: what an
/// fp16 / bf16 implementation computes from) under attention_tolerance(@p precision, max |logit|).
/// The failure message carries the comparison report and the seed.
::testing::AssertionResult attention_matches_oracle(const AttentionFn& run, Precision precision,
                                                    const AttentionCase& c);

/// Runs @p run (a sim-backend version) on one set of fresh random inputs of @p c under every
/// schedule of default_schedules() (forward, reverse, shuffled thread orders; output poisoned
/// before each run) and fails when any output bit differs from the first schedule's, naming
/// the first differing element. A missing __syncthreads shows up here as a difference.
::testing::AssertionResult attention_same_under_schedules(const AttentionFn& run, const AttentionCase& c);

}  // namespace inferlab::testing
