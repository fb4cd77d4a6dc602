// Correct kernels: the right answer, and the same bytes under every schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "simt/device_buffer.h"
#include "simt_test_kernels.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"

namespace inferlab::sim::simt_tests {
namespace {

using testing::DeviceOutput;
using testing::same_under_schedules;

std::vector<float> random_floats(Rng& rng, size_t count) {
  std::vector<float> values(count);
  for (float& v : values) v = rng.uniform(-1.0f, 1.0f);
  return values;
}

TEST(SimtKernels, ReductionIsCorrectUnderEverySchedule) {
  testing::SeededRng rng;
  for (int count : {1, 33, 1000, 4097}) {
    const int blocks = 5;
    for (int threads : {64, 128, 256}) {
      const std::vector<float> values = random_floats(rng, count);
      DeviceBuffer<float> in(values), partial(blocks);
      EXPECT_TRUE(same_under_schedules([&] { return block_sums(in.data(), count, partial.data(), blocks, threads); },
                                       {DeviceOutput{"partial", partial.data(), partial.bytes()}}))
          << "count " << count << " threads " << threads;
      ASSERT_EQ(block_sums(in.data(), count, partial.data(), blocks, threads), cudaSuccess);
      double expected = 0.0, got = 0.0;
      for (float v : values) expected += v;
      for (float p : partial.download()) got += p;
      EXPECT_NEAR(got, expected, 1e-4 * (1.0 + std::sqrt(count)));
    }
  }
}

TEST(SimtKernels, SyncwarpTailIsCorrectUnderEverySchedule) {
  testing::SeededRng rng;
  const int count = 777, blocks = 3;
  const std::vector<float> values = random_floats(rng, count);
  DeviceBuffer<float> in(values), partial(blocks);
  EXPECT_TRUE(same_under_schedules([&] { return block_sums_syncwarp_tail(in.data(), count, partial.data(), blocks); },
                                   {DeviceOutput{"partial", partial.data(), partial.bytes()}}));
  double expected = 0.0, got = 0.0;
  for (float v : values) expected += v;
  for (float p : partial.download()) got += p;
  EXPECT_NEAR(got, expected, 1e-3);
}

TEST(SimtKernels, TiledMatmulIsCorrectUnderEverySchedule) {
  testing::SeededRng rng;
  const int m = 37, n = 29, k = 45;  // odd: partial tiles on every edge
  const std::vector<float> a = random_floats(rng, m * k), b = random_floats(rng, k * n);
  DeviceBuffer<float> da(a), db(b), dc(m * n);
  EXPECT_TRUE(same_under_schedules([&] { return tiled_matmul(da.data(), db.data(), dc.data(), m, n, k); },
                                   {DeviceOutput{"c", dc.data(), dc.bytes()}}));
  const std::vector<float> c = dc.download();
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double expected = 0.0;
      for (int p = 0; p < k; ++p) expected += static_cast<double>(a[i * k + p]) * b[p * n + j];
      ASSERT_NEAR(c[i * n + j], expected, 1e-4) << "c[" << i << "][" << j << "]";
    }
}

TEST(SimtKernels, WarpSoftmaxIsCorrectUnderEverySchedule) {
  testing::SeededRng rng;
  const int rows = 7, cols = 77;
  std::vector<float> x = random_floats(rng, rows * cols);
  for (float& v : x) v *= 8.0f;
  DeviceBuffer<float> dx(x), dy(rows * cols);
  EXPECT_TRUE(same_under_schedules([&] { return warp_softmax(dx.data(), dy.data(), rows, cols); },
                                   {DeviceOutput{"y", dy.data(), dy.bytes()}}));
  const std::vector<float> y = dy.download();
  for (int r = 0; r < rows; ++r) {
    double row_max = -INFINITY, sum = 0.0;
    for (int j = 0; j < cols; ++j) row_max = std::max<double>(row_max, x[r * cols + j]);
    for (int j = 0; j < cols; ++j) sum += std::exp(x[r * cols + j] - row_max);
    for (int j = 0; j < cols; ++j) ASSERT_NEAR(y[r * cols + j], std::exp(x[r * cols + j] - row_max) / sum, 1e-6);
  }
}

TEST(SimtKernels, Int8Dp4aDotIsCorrectUnderEverySchedule) {
  testing::SeededRng rng;
  const int rows = 5, cols = 4 * 75;  // 75 packed ints per row
  std::vector<int8_t> a(rows * cols), b(cols);
  for (auto& v : a) v = static_cast<int8_t>(rng.integer(-128, 127));
  for (auto& v : b) v = static_cast<int8_t>(rng.integer(-128, 127));
  std::vector<int> a_packed(rows * cols / 4), b_packed(cols / 4);
  std::memcpy(a_packed.data(), a.data(), a.size());
  std::memcpy(b_packed.data(), b.data(), b.size());
  DeviceBuffer<int> da(a_packed), db(b_packed), dout(rows);
  EXPECT_TRUE(same_under_schedules([&] { return int8_dot(da.data(), db.data(), dout.data(), rows, cols / 4); },
                                   {DeviceOutput{"out", dout.data(), dout.bytes()}}));
  const std::vector<int> out = dout.download();
  for (int r = 0; r < rows; ++r) {
    int expected = 0;
    for (int j = 0; j < cols; ++j) expected += a[r * cols + j] * b[j];
    EXPECT_EQ(out[r], expected) << "row " << r;
  }
}

TEST(SimtKernels, DynamicSharedMemoryIsCorrectUnderEverySchedule) {
  testing::SeededRng rng;
  const int count = 301, threads = 96;
  const std::vector<float> values = random_floats(rng, count);
  DeviceBuffer<float> in(values), out(count);
  EXPECT_TRUE(same_under_schedules(
      [&] { return reverse_chunks(in.data(), out.data(), count, threads, threads * sizeof(float)); },
      {DeviceOutput{"out", out.data(), out.bytes()}}));
  const std::vector<float> got = out.download();
  for (int base = 0; base < count; base += threads) {
    const int valid = std::min(threads, count - base);
    for (int t = 0; t < valid; ++t) ASSERT_EQ(got[base + t], values[base + valid - 1 - t]) << "element " << base + t;
  }
}

TEST(SimtKernels, DynamicSharedMemoryAboveDefaultLimitNeedsTheAttribute) {
  const int count = 64, threads = 64;
  DeviceBuffer<float> in(std::vector<float>(count, 1.0f)), out(count);
  const size_t big = 64 * 1024;  // > 48 KiB
  EXPECT_EQ(reverse_chunks(in.data(), out.data(), count, threads, big), cudaErrorInvalidValue);
  EXPECT_NE(simt::last_error_message().find("cudaFuncSetAttribute"), std::string::npos) << simt::last_error_message();
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not sticky
  ASSERT_EQ(
      cudaFuncSetAttribute(reverse_chunks_kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(big)),
      cudaSuccess);
  EXPECT_EQ(reverse_chunks(in.data(), out.data(), count, threads, big), cudaSuccess);
  EXPECT_EQ(cudaFuncSetAttribute(reverse_chunks_kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, 300 * 1024),
            cudaErrorInvalidValue);
  cudaGetLastError();
}

// A CPU model of warp_collectives_kernel.
TEST(SimtKernels, WarpCollectivesMatchCudaSemantics) {
  testing::SeededRng rng;
  const int threads = 64;
  std::vector<int> in(threads);
  for (int& v : in) v = static_cast<int>(rng.integer(0, 20));
  in[37] = 7;
  DeviceBuffer<int> din(in), dout(12 * threads);
  EXPECT_TRUE(same_under_schedules([&] { return warp_collectives(din.data(), dout.data(), threads); },
                                   {DeviceOutput{"out", dout.data(), dout.bytes()}}));
  const std::vector<int> out = dout.download();
  for (int t = 0; t < threads; ++t) {
    const int base = t / 32 * 32, lane = t % 32;
    const int* o = &out[12 * t];
    const auto at = [&](int l) { return in[base + l]; };
    EXPECT_EQ(o[0], at(5)) << t;
    EXPECT_EQ(o[1], at(lane / 16 * 16 + (lane + 3) % 16)) << t;
    EXPECT_EQ(o[2], lane % 16 >= 3 ? at(lane - 3) : at(lane)) << t;
    EXPECT_EQ(o[3], lane + 5 < 32 ? at(lane + 5) : at(lane)) << t;
    EXPECT_EQ(o[4], at(lane ^ 9)) << t;
    unsigned ballot = 0, match = 0;
    int any = 0, all = 1, sum = 0, max = at(0);
    for (int l = 0; l < 32; ++l) {
      ballot |= (at(l) % 3 == 0 ? 1u : 0u) << l;
      match |= (at(l) % 4 == at(lane) % 4 ? 1u : 0u) << l;
      any |= at(l) == 7;
      all &= at(l) >= 0;
      sum += at(l);
      max = std::max(max, at(l));
    }
    EXPECT_EQ(static_cast<unsigned>(o[5]), ballot) << t;
    EXPECT_EQ(o[6], any) << t;
    EXPECT_EQ(o[7], all) << t;
    EXPECT_EQ(o[8], sum) << t;
    EXPECT_EQ(o[9], max) << t;
    EXPECT_EQ(static_cast<unsigned>(o[10]), match) << t;
    EXPECT_EQ(o[11], lane % 2 == 0 ? at(lane ^ 2) : -1) << t;
  }
}

TEST(SimtKernels, BlockCollectivesCountAndOr) {
  const int threads = 96;
  std::vector<int> in(threads);
  for (int t = 0; t < threads; ++t) in[t] = t + 1;  // all positive; 48 odd; 42 present
  DeviceBuffer<int> din(in), dout(3);
  ASSERT_EQ(block_collectives(din.data(), dout.data(), threads), cudaSuccess);
  EXPECT_EQ(dout.download(), (std::vector<int>{48, 1, 1}));
  in[10] = -5;   // odd count unchanged (11 -> -5 both odd), not all positive
  in[41] = 100;  // no 42 any more
  din.upload(in);
  ASSERT_EQ(block_collectives(din.data(), dout.data(), threads), cudaSuccess);
  EXPECT_EQ(dout.download(), (std::vector<int>{48, 0, 0}));
}

TEST(SimtKernels, AtomicsAcrossBlocksAndWorkers) {
  const int blocks = 9, threads = 70, total = blocks * threads;
  const std::vector<int> start{0, 0, -1, 0, 0, 0, 0};
  DeviceBuffer<int> counters(start);
  DeviceBuffer<float> sum(std::vector<float>{0.0f});
  DeviceBuffer<unsigned> bits(std::vector<unsigned>{0u, ~0u, 0u});
  const auto run = [&] {
    counters.upload(start);
    sum.upload(std::vector<float>{0.0f});
    bits.upload(std::vector<unsigned>{0u, ~0u, 0u});
    return atomics(counters.data(), sum.data(), bits.data(), blocks, threads);
  };
  // Float atomics legitimately depend on the order: compare them with a tolerance.
  EXPECT_TRUE(same_under_schedules(run, {DeviceOutput{"counters[0..3]", counters.data(), 4 * sizeof(int)},
                                         DeviceOutput{"counters[5..6]", counters.data() + 5, 2 * sizeof(int)},
                                         DeviceOutput{"float sum", sum.data(), sizeof(float), 1e-5f},
                                         DeviceOutput{"bits", bits.data(), bits.bytes()}}));
  ASSERT_EQ(run(), cudaSuccess);
  const std::vector<int> c = counters.download();
  EXPECT_EQ(c[0], total);
  EXPECT_EQ(c[1], -2 * total);
  EXPECT_EQ(c[2], total - 1);
  EXPECT_EQ(c[3], -(total - 1));
  EXPECT_GE(c[4], 1);
  EXPECT_EQ(c[5], 1);
  EXPECT_EQ(c[6], 7);
  double expected = 0.0;
  for (int g = 0; g < total; ++g) expected += 0.1 * (g % 10);
  EXPECT_NEAR(sum.download()[0], expected, 1e-2);
  EXPECT_EQ(bits.download(), (std::vector<unsigned>{~0u, 0xffff0000u, static_cast<unsigned>(total)}));
}

TEST(SimtKernels, HalfAndBfloat16Math) {
  testing::SeededRng rng;
  const int pairs = 70;
  std::vector<__half2> x(pairs);
  std::vector<__nv_bfloat16> xb(pairs);
  for (int i = 0; i < pairs; ++i) {
    x[i] = __floats2half2_rn(rng.uniform(-2.0f, 2.0f), rng.uniform(-2.0f, 2.0f));
    xb[i] = __float2bfloat16(rng.uniform(-2.0f, 2.0f));
  }
  DeviceBuffer<__half2> dx(x), dy(pairs);
  DeviceBuffer<__nv_bfloat16> dxb(xb), dyb(pairs);
  EXPECT_TRUE(
      same_under_schedules([&] { return half_math(dx.data(), dy.data(), dxb.data(), dyb.data(), pairs); },
                           {DeviceOutput{"y", dy.data(), dy.bytes()}, DeviceOutput{"yb", dyb.data(), dyb.bytes()}}));
  const std::vector<__half2> y = dy.download();
  const std::vector<__nv_bfloat16> yb = dyb.download();
  for (int i = 0; i < pairs; ++i) {
    const float lo = __low2float(x[i]), hi = __high2float(x[i]);
    EXPECT_NEAR(__low2float(y[i]), std::exp(lo) * 2 + lo, 1e-2 * (1 + std::exp(lo) * 2)) << i;
    EXPECT_NEAR(__high2float(y[i]), std::exp(hi) * 2 + hi, 1e-2 * (1 + std::exp(hi) * 2)) << i;
    const float v = __bfloat162float(xb[i]);
    EXPECT_NEAR(__bfloat162float(yb[i]), std::exp(v) * 2 + v, 2e-2 * (1 + std::exp(v) * 2)) << i;
  }
}

TEST(SimtKernels, ThreeDimensionalIndices) {
  const dim3 grid(3, 2, 2), block(8, 4, 2);
  const int per_block = 64, total = 12 * per_block;
  DeviceBuffer<int> out(4 * total);
  EXPECT_TRUE(same_under_schedules([&] { return indices_3d(out.data(), grid, block); },
                                   {DeviceOutput{"out", out.data(), out.bytes()}}));
  const std::vector<int> o = out.download();
  for (int g = 0; g < total; ++g) {
    const int t = g % per_block;
    ASSERT_EQ(o[4 * g + 0], t % 8) << g;
    ASSERT_EQ(o[4 * g + 1], t / 8 % 4) << g;
    ASSERT_EQ(o[4 * g + 2], t / 32) << g;
    ASSERT_EQ(o[4 * g + 3], g / per_block) << g;
  }
}

TEST(SimtKernels, SameAnswerWithOneAndTwoWorkers) {
  testing::SeededRng rng;
  const int count = 5000, blocks = 16, threads = 128;
  const std::vector<float> values = random_floats(rng, count);
  DeviceBuffer<float> in(values), partial(blocks);
  std::vector<std::vector<float>> results;
  const int saved = simt::workers();
  for (int workers : {1, 2}) {
    simt::set_workers(workers);
    ASSERT_EQ(block_sums(in.data(), count, partial.data(), blocks, threads), cudaSuccess);
    results.push_back(partial.download());
  }
  simt::set_workers(saved);
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace
}  // namespace inferlab::sim::simt_tests
