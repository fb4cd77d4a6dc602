// Chapters 02-03: the device-level timing harness the benchmarks use (kernels/timing/cuda_timing.h),
// exercised on the sim backend (the emulator's times mean nothing; the plumbing is what is
// tested: every version has a device-level function, bad names and counts are rejected).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kernels/timing/cuda_timing.h"
#include "kernels/registry.h"

namespace inferlab {
namespace {

const AttentionShape kSmall{4, 2, 17, 24, true};  // GQA, odd seq_len and head_dim, causal

TEST(DeviceTiming, EveryRegisteredCudaVersionHasAPositiveTime) {
  int timed = 0;
  for (const AttentionVersion& version : attention_versions()) {
    // Chapter 02's versions; chapter 05's fused ones are timed in tests/05-fused-attention.
    if (version.backend != Backend::sim || version.chapter != 2 || version.name.rfind("cuda/", 0) != 0) continue;
    SCOPED_TRACE(version.name);
    const double seconds = sim::seconds_per_call(version.name, kSmall, 1, 2);
    EXPECT_GT(seconds, 0.0);
    EXPECT_LT(seconds, 60.0);
    ++timed;
  }
  EXPECT_EQ(timed, 5);  // naive, tiled, cublas, cublas_fp16, cublas_bf16
}

TEST(DeviceTiming, WithoutWarmupAndNonCausal) {
  EXPECT_GT(sim::seconds_per_call("cuda/tiled", AttentionShape{1, 1, 1, 1, false}, 0, 1), 0.0);
}

TEST(DeviceTiming, UnknownVersionThrowsNamingIt) {
  for (const std::string name : {"cuda/nope", "cpu/naive", ""}) {
    try {
      sim::seconds_per_call(name, kSmall, 0, 1);
      ADD_FAILURE() << "no exception for version '" << name << "'";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("version = " + name + ":"), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("cuda/tiled"), std::string::npos) << error.what();  // lists known
    }
  }
}

TEST(DeviceTiming, BadCountsAndShapesThrow) {
  EXPECT_THROW(sim::seconds_per_call("cuda/naive", kSmall, 0, 0), std::invalid_argument);
  EXPECT_THROW(sim::seconds_per_call("cuda/naive", kSmall, -1, 1), std::invalid_argument);
  EXPECT_THROW(sim::seconds_per_call("cuda/naive", AttentionShape{3, 2, 8, 8, false}, 0, 1), std::invalid_argument);
  EXPECT_THROW(sim::seconds_per_call("cuda/naive", AttentionShape{2, 2, 0, 8, false}, 0, 1), std::invalid_argument);
}

// Chapter 03's cuda/decode (ragged lengths are the tests' business; the benchmark times full
// sequences): both cache dtypes, GQA, a sequence shorter than the cache's capacity.
TEST(DeviceTiming, DecodeHasAPositiveTimeForBothCacheDtypes) {
  const DecodeShape shape{2, 4, 2, 40, 24};  // batch, heads, KV heads (GQA 2:1), max_seq_len, d
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    const double seconds = sim::decode_seconds_per_call(dtype, shape, 33, 1, 2);
    EXPECT_GT(seconds, 0.0);
    EXPECT_LT(seconds, 60.0);
  }
  EXPECT_GT(sim::decode_seconds_per_call(KvDtype::fp32, DecodeShape{1, 1, 1, 1, 1}, 1, 0, 1), 0.0);
}

TEST(DeviceTiming, DecodeBadCountsAndShapesThrow) {
  const DecodeShape shape{2, 4, 2, 40, 24};
  EXPECT_THROW(sim::decode_seconds_per_call(KvDtype::fp32, shape, 33, 0, 0), std::invalid_argument);
  EXPECT_THROW(sim::decode_seconds_per_call(KvDtype::fp32, shape, 33, -1, 1), std::invalid_argument);
  EXPECT_THROW(sim::decode_seconds_per_call(KvDtype::fp32, shape, 0, 0, 1), std::invalid_argument);
  EXPECT_THROW(sim::decode_seconds_per_call(KvDtype::fp32, shape, 41, 0, 1), std::invalid_argument);
  EXPECT_THROW(sim::decode_seconds_per_call(KvDtype::fp16, DecodeShape{2, 3, 2, 40, 24}, 8, 0, 1),
               std::invalid_argument);
}

TEST(DeviceTiming, CeilingsArePositive) {
  const DeviceCeilings ceilings = sim::measure_device_ceilings(32, 0.25, 0.001);
  EXPECT_FALSE(ceilings.device.empty());
  EXPECT_EQ(ceilings.gemm_size, 32);
  EXPECT_DOUBLE_EQ(ceilings.copy_mib, 0.25);
  EXPECT_GT(ceilings.copy_gbs, 0.0);
  EXPECT_GT(ceilings.sgemm_gflops, 0.0);
  EXPECT_GT(ceilings.hgemm_gflops, 0.0);
  EXPECT_THROW(sim::measure_device_ceilings(0, 1.0, 0.001), std::invalid_argument);
}

}  // namespace
}  // namespace inferlab
