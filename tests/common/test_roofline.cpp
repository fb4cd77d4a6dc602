#include <gtest/gtest.h>

#include <filesystem>

#include "common/roofline.h"

namespace inferlab {
namespace {

TEST(Roofline, AttainableIsMinOfComputeAndBandwidthRoofs) {
  Roofline r;
  r.peak_gflops = 200.0;
  r.triad_gbs = 20.0;
  EXPECT_DOUBLE_EQ(r.ridge_point(), 10.0);
  EXPECT_DOUBLE_EQ(r.attainable_gflops(1.0), 20.0);    // memory-bound
  EXPECT_DOUBLE_EQ(r.attainable_gflops(100.0), 200.0); // compute-bound
}

TEST(Roofline, SmallMeasurementIsPositiveAndSavesAsJson) {
  RooflineOptions small;
  small.working_set_mib = 24;  // a smoke test only: `inferlab roofline` measures for real
  small.seconds_per_test = 0.05;
  const Roofline r = measure_roofline(small);
  EXPECT_GT(r.peak_gflops, 0.1);
  EXPECT_GT(r.read_gbs, 0.1);
  EXPECT_GT(r.triad_gbs, 0.1);
  const auto path = std::filesystem::temp_directory_path() / ("inferlab_roofline_" + std::to_string(::getpid()) + ".json");
  save_roofline(r, path);
  const auto back = load_roofline(path);
  ASSERT_TRUE(back.has_value());
  EXPECT_NEAR(back->peak_gflops, r.peak_gflops, r.peak_gflops * 1e-5);
  EXPECT_NEAR(back->triad_gbs, r.triad_gbs, r.triad_gbs * 1e-5);
  EXPECT_EQ(back->simd, r.simd);
  std::filesystem::remove(path);
  EXPECT_FALSE(load_roofline(path).has_value());
}

}  // namespace
}  // namespace inferlab
