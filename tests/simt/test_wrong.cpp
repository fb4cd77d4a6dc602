// Wrong kernels: each must be caught, with a message naming the kernel, block, thread and line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "simt/device_buffer.h"
#include "simt_test_kernels.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"

namespace inferlab::sim::simt_tests {
namespace {

using testing::DeviceOutput;
using ::testing::HasSubstr;
using testing::same_under_schedules;

std::vector<float> random_floats(Rng& rng, size_t count) {
  std::vector<float> values(count);
  for (float& v : values) v = rng.uniform(-1.0f, 1.0f);
  return values;
}

// A kernel fault: the launch fails with the sticky cudaErrorLaunchFailure and the message.
std::string expect_launch_failure(cudaError_t status) {
  EXPECT_EQ(status, cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure) << "a kernel fault is sticky";
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure) << "cudaGetLastError does not clear a sticky error";
  const std::string message = simt::last_error_message();
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "cudaDeviceReset clears it";
  return message;
}

// ---- races: found by comparing schedules -------------------------------------------------------
// racecheck reports these first (test_checks.cpp); here it is off, to prove that the comparison
// of schedules (the race detector of the asan/tsan presets, and the one for device memory) sees
// them too.

TEST(SimtWrongKernels, MissingBarrierAfterSharedLoadIsARace) {
  const simt::ScopedChecks no_racecheck(simt::Checks::parse("memcheck"));
  testing::SeededRng rng;
  const int count = 200;
  DeviceBuffer<float> in(random_floats(rng, count)), out(count);
  const auto result = same_under_schedules([&] { return missing_barrier_after_load(in.data(), out.data(), count); },
                                           {DeviceOutput{"out", out.data(), out.bytes()}});
  ASSERT_FALSE(result);
  const std::string message = result.message();
  EXPECT_THAT(message, HasSubstr("race: kernel 'inferlab::sim::simt_tests::missing_barrier_after_load_kernel"));
  EXPECT_THAT(message, HasSubstr("last written by block ("));
  EXPECT_THAT(message, HasSubstr("thread ("));
  EXPECT_THAT(message, HasSubstr("wrong_kernels.cu:"));
  std::cout << message << "\n";
}

TEST(SimtWrongKernels, MissingSecondBarrierInTiledLoopIsARace) {
  const simt::ScopedChecks no_racecheck(simt::Checks::parse("memcheck"));
  testing::SeededRng rng;
  const int m = 20, n = 18, k = 50;
  DeviceBuffer<float> a(random_floats(rng, m * k)), b(random_floats(rng, k * n)), c(m * n);
  const auto result =
      same_under_schedules([&] { return matmul_missing_second_barrier(a.data(), b.data(), c.data(), m, n, k); },
                           {DeviceOutput{"c", c.data(), c.bytes()}});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("matmul_missing_second_barrier_kernel"));
  EXPECT_THAT(result.message(), HasSubstr("wrong_kernels.cu:"));
  std::cout << result.message() << "\n";
}

TEST(SimtWrongKernels, WarpSynchronousTailWithoutSyncwarpIsARace) {
  const simt::ScopedChecks no_racecheck(simt::Checks::parse("memcheck"));
  testing::SeededRng rng;
  const int count = 500, blocks = 2;
  DeviceBuffer<float> in(random_floats(rng, count)), partial(blocks);
  const auto result =
      same_under_schedules([&] { return block_sums_unsynced_tail(in.data(), count, partial.data(), blocks); },
                           {DeviceOutput{"partial", partial.data(), partial.bytes()}});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("block_sums_unsynced_tail_kernel"));
  EXPECT_THAT(result.message(), HasSubstr("thread (0,0,0)"));  // thread 0 writes partial[]
  std::cout << result.message() << "\n";
}

// ---- faults: found by the scheduler ------------------------------------------------------------

TEST(SimtWrongKernels, BarrierInDivergentBranchIsReported) {
  DeviceBuffer<float> out(64);
  const std::string message = expect_launch_failure(barrier_in_branch(out.data()));
  EXPECT_THAT(message, HasSubstr("barrier divergence: threads wait at different __syncthreads() calls, at "
                                 "wrong_kernels.cu:"));  // the first line names the lines
  EXPECT_THAT(message, HasSubstr("barrier_in_branch_kernel"));
  EXPECT_THAT(message, HasSubstr("block ("));
  EXPECT_THAT(message, HasSubstr("threads 0-15 wait at __syncthreads() at wrong_kernels.cu:"));
  EXPECT_THAT(message, HasSubstr("threads 16-31 wait at __syncthreads() at wrong_kernels.cu:"));
  std::cout << message << "\n";
}

TEST(SimtWrongKernels, BarrierAfterEarlyExitIsReported) {
  DeviceBuffer<float> out(32);
  const std::string message = expect_launch_failure(barrier_after_early_exit(out.data()));
  EXPECT_THAT(message, HasSubstr("thread 0 exited while others wait at __syncthreads() at wrong_kernels.cu:"));
  EXPECT_THAT(message, HasSubstr("barrier_after_early_exit_kernel"));
  EXPECT_THAT(message, HasSubstr("block (0,0,0)"));
  EXPECT_THAT(message, HasSubstr("threads 1-31 wait at __syncthreads() at wrong_kernels.cu:"));
  std::cout << message << "\n";
}

TEST(SimtWrongKernels, ShuffleNamingExitedLanesIsReported) {
  DeviceBuffer<float> out(32);
  const std::string message = expect_launch_failure(shuffle_exited_lane(out.data()));
  EXPECT_THAT(message, HasSubstr("__shfl_down_sync(mask 0xffffffff) at wrong_kernels.cu:"));
  EXPECT_THAT(message, HasSubstr("names threads 16-31, which have already exited"));
  EXPECT_THAT(message, HasSubstr("shuffle_exited_lane_kernel"));
  EXPECT_THAT(message, HasSubstr("threads 0-15 wait at __shfl_down_sync"));
  std::cout << message << "\n";
}

TEST(SimtWrongKernels, ShuffleNamingMissingLanesIsReported) {
  DeviceBuffer<float> out(33);
  const std::string message = expect_launch_failure(shuffle_missing_lanes(out.data()));
  EXPECT_THAT(message, HasSubstr("names threads 33-63, which do not exist (the block has 33 threads)"));
  EXPECT_THAT(message, HasSubstr("shuffle_missing_lanes_kernel"));
  std::cout << message << "\n";
}

TEST(SimtWrongKernels, EveryScheduleReportsTheFault) {
  DeviceBuffer<float> out(64);
  const auto result = same_under_schedules([&] { return barrier_in_branch(out.data()); },
                                           {DeviceOutput{"out", out.data(), out.bytes()}});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("cudaErrorLaunchFailure"));
  EXPECT_THAT(result.message(), HasSubstr("barrier divergence"));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the helper resets the device after a fault";
}

// ---- out of bounds: memcheck (default build) or AddressSanitizer / UBSan (asan preset) ----------

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

TEST(SimtWrongKernelsDeathTest, OutOfBoundsGlobalWriteIsCaught) {
  const int count = 45;
  if (simt::checks_compiled()) {
    DeviceBuffer<float> out(count);
    const std::string message = expect_launch_failure(out_of_bounds_write(out.data(), count));
    EXPECT_THAT(message, HasSubstr("simt: memcheck: out-of-bounds write of 4 bytes at wrong_kernels.cu:"));
    EXPECT_THAT(message, HasSubstr("out_of_bounds_write_kernel"));
    EXPECT_THAT(message, HasSubstr("by thread (13,0,0)"));
    EXPECT_THAT(message, HasSubstr("block (1,0,0)"));
    return;
  }
  if (!kAsan) GTEST_SKIP() << "neither the emulator's checks nor AddressSanitizer are compiled in (tsan preset)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        float* out = nullptr;
        cudaMalloc(&out, count * sizeof(float));
        out_of_bounds_write(out, count);
      },
      "(heap-buffer-overflow|use-after-poison|unknown-crash|SEGV)(.|\n)*out_of_bounds_write_kernel(.|\n)*wrong_kernels.cu:[0-9]+(.|\n)*"
      "simt: the fault above happened in kernel 'inferlab::sim::simt_tests::out_of_bounds_write_kernel"
      "(.|\n)*block \\(1,0,0\\)(.|\n)*thread \\(13,0,0\\)");
}

TEST(SimtWrongKernelsDeathTest, StaticSharedOverflowIsCaught) {
  if (simt::checks_compiled()) {
    DeviceBuffer<float> out(33);
    const std::string message = expect_launch_failure(static_shared_overflow(out.data()));
    EXPECT_THAT(message, HasSubstr("simt: memcheck: out-of-bounds index 32 into an array of type 'float [32]' at "
                                   "wrong_kernels.cu:"));
    EXPECT_THAT(message, HasSubstr("by thread (32,0,0)"));
    return;
  }
  if (!kAsan) GTEST_SKIP() << "neither the emulator's checks nor UBSan are compiled in (tsan preset)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        float* out = nullptr;
        cudaMalloc(&out, 33 * sizeof(float));
        static_shared_overflow(out);
      },
      "wrong_kernels.cu:[0-9]+(.|\n)*index 32 out of bounds(.|\n)*"
      "simt: the fault above happened in kernel 'inferlab::sim::simt_tests::static_shared_overflow_kernel");
}

}  // namespace
}  // namespace inferlab::sim::simt_tests
