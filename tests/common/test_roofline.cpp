#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <unistd.h>

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

TEST(Roofline, MedianOfRunsIsTakenCeilingByCeiling) {
  // Three runs, one disturbed (the second reads low bandwidth, the third low peak): the median of
  // {80, 81, 40} is 80, of {18, 9, 19} is 18, of {20, 10, 21} is 20; the highest load is kept.
  Roofline a, b, c;
  a.peak_gflops = 80, a.read_gbs = 18, a.triad_gbs = 20, a.load_average = 0.5, a.threads = 2;
  b.peak_gflops = 81, b.read_gbs = 9, b.triad_gbs = 10, b.load_average = 3.0, b.threads = 2;
  c.peak_gflops = 40, c.read_gbs = 19, c.triad_gbs = 21, c.load_average = 1.0, c.threads = 2;
  const Roofline m = median_roofline({a, b, c});
  EXPECT_DOUBLE_EQ(m.peak_gflops, 80);
  EXPECT_DOUBLE_EQ(m.read_gbs, 18);
  EXPECT_DOUBLE_EQ(m.triad_gbs, 20);
  EXPECT_DOUBLE_EQ(m.load_average, 3.0);
  EXPECT_EQ(m.runs, 3);
  EXPECT_TRUE(m.measured_busy());  // 3.0 > 2 threads
  // An even count: the mean of the middle two ({9, 18} of read → 13.5).
  EXPECT_DOUBLE_EQ(median_roofline({a, b}).read_gbs, 13.5);
  EXPECT_THROW(median_roofline({}), std::invalid_argument);
  // runs survives a save and a load.
  const auto path = std::filesystem::temp_directory_path() / ("inferlab_median_" + std::to_string(::getpid()) + ".json");
  save_roofline(m, path);
  EXPECT_EQ(load_roofline(path)->runs, 3);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace inferlab
