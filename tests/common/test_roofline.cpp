#include <gtest/gtest.h>

#include <algorithm>
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

TEST(Roofline, DotCeilingsNameTheirInstructionAndSurviveSaveLoadAndMedian) {
  // Every int8/bf16 instruction the CPU reports is measured and named; the int8 ceiling is the
  // fastest int8 one. On x86-64 with AVX2 there is at least vpmaddubsw.
  const std::vector<DotCeiling> measured = measure_dot_ceilings(0.05);
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) {
    ASSERT_FALSE(measured.empty());
    bool avx2 = false;
    for (const DotCeiling& c : measured) avx2 = avx2 || c.instruction.find("vpmaddubsw") != std::string::npos;
    EXPECT_TRUE(avx2);
  }
  if (__builtin_cpu_supports("avx512vnni")) {
    EXPECT_TRUE(std::any_of(measured.begin(), measured.end(),
                            [](const DotCeiling& c) { return c.instruction == "vpdpbusd zmm (AVX512-VNNI)"; }));
  }
#endif
  for (const DotCeiling& c : measured) {
    EXPECT_GT(c.gops, 0.1) << c.instruction;
    EXPECT_FALSE(c.instruction.empty());
  }
  // Three runs: the median of each instruction, and of the int8 ceiling.
  Roofline a, b, c;
  for (Roofline* r : {&a, &b, &c}) {
    r->peak_gflops = 100, r->read_gbs = 10, r->triad_gbs = 10;
    r->int8_instruction = "vpdpbusd zmm (AVX512-VNNI)";
  }
  a.int8_gops = 400, b.int8_gops = 100, c.int8_gops = 410;
  a.dot_ceilings = {{DotType::int8, "vpdpbusd zmm (AVX512-VNNI)", 400}, {DotType::bf16, "vdpbf16ps zmm (AVX512-BF16)", 200}};
  b.dot_ceilings = {{DotType::int8, "vpdpbusd zmm (AVX512-VNNI)", 100}, {DotType::bf16, "vdpbf16ps zmm (AVX512-BF16)", 210}};
  c.dot_ceilings = {{DotType::int8, "vpdpbusd zmm (AVX512-VNNI)", 410}, {DotType::bf16, "vdpbf16ps zmm (AVX512-BF16)", 90}};
  const Roofline m = median_roofline({a, b, c});
  EXPECT_DOUBLE_EQ(m.int8_gops, 400);
  EXPECT_DOUBLE_EQ(m.int8_ridge_point(), 40);  // 400 op/s over 10 GB/s of triad
  ASSERT_EQ(m.dot_ceilings.size(), 2u);
  EXPECT_DOUBLE_EQ(m.dot_ceilings[0].gops, 400);
  EXPECT_DOUBLE_EQ(m.dot_ceilings[1].gops, 200);
  const auto path = std::filesystem::temp_directory_path() / ("inferlab_dot_" + std::to_string(::getpid()) + ".json");
  save_roofline(m, path);
  const auto back = load_roofline(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(back.has_value());
  EXPECT_DOUBLE_EQ(back->int8_gops, 400);
  EXPECT_EQ(back->int8_instruction, "vpdpbusd zmm (AVX512-VNNI)");
  ASSERT_EQ(back->dot_ceilings.size(), 2u);
  EXPECT_EQ(back->dot_ceilings[1].type, DotType::bf16);
  EXPECT_EQ(back->dot_ceilings[1].instruction, "vdpbf16ps zmm (AVX512-BF16)");
  // An int8 kernel's percentage is of the int8 ceiling; without one, of the fp32 peak.
  EXPECT_DOUBLE_EQ(m.int8_ceiling(), 400);
  Roofline none;
  none.peak_gflops = 100;
  EXPECT_DOUBLE_EQ(none.int8_ceiling(), 100);
}

}  // namespace
}  // namespace inferlab
