// The emulator's compute-sanitizer: each bug students make most is reported by its checker with
// the kernel, the thread and the faulty source line (the "FAULT(name)" marker in
// kernels/checked_kernels.cu), under every schedule; clean kernels report nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "simt/device_buffer.h"
#include "simt_test_kernels.h"
#include "tests/support/seeded.h"

namespace inferlab::sim::simt_tests {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// "checked_kernels.cu:LINE" of the line that carries FAULT(name).
std::string fault_site(const std::string& name) {
  std::ifstream source(INFERLAB_CHECKED_KERNELS);
  EXPECT_TRUE(source.good()) << INFERLAB_CHECKED_KERNELS;
  std::string line;
  for (int number = 1; std::getline(source, line); ++number)
    if (line.find("FAULT(" + name + ")") != std::string::npos) return "checked_kernels.cu:" + std::to_string(number);
  ADD_FAILURE() << "no FAULT(" << name << ") marker in checked_kernels.cu";
  return "?";
}

const std::vector<simt::Schedule> kSchedules = {
    {simt::Order::forward, 0}, {simt::Order::reverse, 0}, {simt::Order::random, 1}, {simt::Order::random, 29}};

// Runs @p call under every schedule; each run must fail with a sticky error whose message holds
// every one of @p expected. Returns the forward schedule's message.
std::string report_under_every_schedule(const std::function<cudaError_t()>& call,
                                        const std::vector<std::string>& expected,
                                        cudaError_t error = cudaErrorLaunchFailure) {
  std::string first;
  for (const simt::Schedule& schedule : kSchedules) {
    SCOPED_TRACE("schedule " + schedule.to_string());
    simt::ScopedSchedule scoped(schedule);
    EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
    const cudaError_t status = call();
    EXPECT_EQ(status, error);
    EXPECT_EQ(cudaDeviceSynchronize(), error) << "a check's report is the sticky error";
    const std::string message = simt::last_error_message();
    for (const std::string& text : expected) EXPECT_THAT(message, HasSubstr(text));
    if (first.empty()) first = message;
  }
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
  std::cout << first << "\n";
  return first;
}

class SimtChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!simt::checks_compiled())
      GTEST_SKIP() << "this build's kernels carry no checks (asan/tsan presets: the sanitizers check instead)";
    cudaDeviceReset();
  }
  simt::ScopedChecks all_{simt::Checks{}};
  testing::SeededRng rng_;
  std::vector<float> random(size_t count) {
    std::vector<float> values(count);
    for (float& v : values) v = rng_.uniform(0.5f, 1.5f);
    return values;
  }
};

// ---- memcheck ---------------------------------------------------------------------------------

TEST_F(SimtChecks, ReadOnePastDynamicSharedMemory) {
  const int threads = 48;
  DeviceBuffer<float> in(random(threads)), out(threads);
  const std::string message = report_under_every_schedule(
      [&] { return dynamic_shared_overrun(in.data(), out.data(), threads); },
      {"simt: memcheck: out-of-bounds read of 4 bytes of dynamic shared memory at " +
           fault_site("dynamic_shared_overrun"),
       "byte 192 of the block's 192 bytes of dynamic shared memory", "by thread (47,0,0)",
       "dynamic_shared_overrun_kernel"});
}

TEST_F(SimtChecks, WriteOnePastACudaMallocBuffer) {
  const int count = 45;
  DeviceBuffer<float> in(random(count)), out(count);
  report_under_every_schedule([&] { return global_overrun(in.data(), out.data(), count); },
                              {"simt: memcheck: out-of-bounds write of 4 bytes at " + fault_site("global_overrun"),
                               "0 bytes past its end", "180-byte allocation",
                               "the kernel's argument 1 (float*) points into it", "by thread (13,0,0)",
                               "block (1,0,0)"});
  // The faulty thread stopped before its write; every other thread finished.
  const std::vector<float> input = in.download(), back = out.download();
  for (int i = 0; i < count; ++i) EXPECT_EQ(back[i], 2.0f * input[i]) << i;
}

TEST_F(SimtChecks, ReadAfterCudaFree) {
  const int count = 40;
  float* freed = nullptr;
  ASSERT_EQ(cudaMalloc(&freed, count * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(freed, 0, count * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaFree(freed), cudaSuccess);
  DeviceBuffer<float> out(count);
  report_under_every_schedule([&] { return read_after(freed, out.data(), count); },
                              {"simt: memcheck: use after cudaFree: read of 4 bytes at " + fault_site("read_in"),
                               "which was freed by cudaFree", "the kernel's argument 0 (float const*)"});
}

TEST_F(SimtChecks, HostPointerInAKernel) {
  const int count = 8;
  std::vector<float> host(count, 1.0f);
  DeviceBuffer<float> out(count);
  report_under_every_schedule([&] { return read_after(host.data(), out.data(), count); },
                              {"simt: memcheck: invalid read of 4 bytes at " + fault_site("read_in"),
                               "not device memory"});
}

TEST_F(SimtChecks, MisalignedVectorLoad) {
  const int threads = 8;
  DeviceBuffer<float> in(random(4 * threads + 4)), out(threads);
  report_under_every_schedule([&] { return misaligned_vector(in.data(), out.data(), threads); },
                              {"simt: memcheck: misaligned ", fault_site("misaligned"),
                               "'const struct float4' needs 16-byte alignment", "4 bytes past a multiple of it",
                               "misaligned_vector_kernel"});
}

TEST_F(SimtChecks, StaticSharedIndexPastTheArray) {
  DeviceBuffer<float> out(17);
  report_under_every_schedule([&] { return static_shared_index(out.data()); },
                              {"simt: memcheck: out-of-bounds index 16 into an array of type 'float [16]' at " +
                                   fault_site("static_shared_index"),
                               "by thread (16,0,0)"});
}

// ---- racecheck --------------------------------------------------------------------------------

TEST_F(SimtChecks, MissingBarrierBetweenThreadZerosWriteAndEveryonesRead) {
  const int threads = 128;
  DeviceBuffer<float> in(random(threads)), out(threads);
  // Forward order: thread 0 writes first, thread 1 then reads (read-after-write); reverse: the
  // others read first, then thread 0 writes (write-after-read). Both lines, every time.
  report_under_every_schedule([&] { return unsynchronised_total(in.data(), out.data(), threads); },
                              {"simt: racecheck: ", "hazard on shared memory at ", fault_site("total_write"),
                               fault_site("total_read"), "of __shared__ 'total' in unsynchronised_total_kernel"});
}

TEST_F(SimtChecks, BlockReductionWithoutItsSecondBarrier) {
  const int blocks = 3, threads = 128;
  DeviceBuffer<float> in(random(blocks * threads)), out(blocks);
  report_under_every_schedule([&] { return two_reductions(in.data(), out.data(), blocks, threads); },
                              {"simt: racecheck: write-after-read hazard on shared memory at " +
                                   fault_site("slot_write"),
                               fault_site("slot_read"), "'slots'"});
}

TEST_F(SimtChecks, TwoThreadsWriteOneElement) {
  DeviceBuffer<float> out(64);
  report_under_every_schedule([&] { return colliding_writes(out.data()); },
                              {"simt: racecheck: write-after-write hazard on shared memory at " +
                               fault_site("colliding_write")});
}

// ---- initcheck --------------------------------------------------------------------------------

TEST_F(SimtChecks, ReadOfStaticSharedMemoryNobodyWrote) {
  DeviceBuffer<float> out(64);
  report_under_every_schedule([&] { return unwritten_shared(out.data()); },
                              {"simt: initcheck: read of uninitialised shared memory at " +
                                   fault_site("unwritten_shared"),
                               "'scratch'", "which no thread of this block had written"});
}

TEST_F(SimtChecks, ReadOfDynamicSharedMemoryNobodyWrote) {
  DeviceBuffer<float> out(32);
  report_under_every_schedule([&] { return unwritten_dynamic(out.data(), 32); },
                              {"simt: initcheck: read of uninitialised shared memory at " +
                                   fault_site("unwritten_dynamic"),
                               "of the block's 128 bytes of dynamic shared memory"});
}

TEST_F(SimtChecks, AtomicIntoDeviceMemoryNobodyZeroed) {
  const int count = 70;
  DeviceBuffer<float> in(random(count));
  float* sum = nullptr;
  report_under_every_schedule(
      [&] {
        cudaFree(sum);  // a fresh accumulator for every schedule
        EXPECT_EQ(cudaMalloc(&sum, sizeof(float)), cudaSuccess);
        return accumulate(in.data(), sum, count);
      },
      {"simt: initcheck: read of uninitialised device memory at " + fault_site("unzeroed_accumulator"),
       "the kernel's argument 1 (float*) points into it"});
  // Zeroed first, the same kernel is clean.
  ASSERT_EQ(cudaMemset(sum, 0, sizeof(float)), cudaSuccess);
  EXPECT_EQ(accumulate(in.data(), sum, count), cudaSuccess) << simt::last_error_message();
  EXPECT_EQ(cudaFree(sum), cudaSuccess);
}

// ---- clean kernels, the switch, host code -----------------------------------------------------

TEST_F(SimtChecks, CleanKernelsReportNothingUnderEverySchedule) {
  const int count = 300;
  std::vector<int> values(count);
  for (int& v : values) v = static_cast<int>(rng_.uniform(0.0f, 1000.0f));
  DeviceBuffer<int> d_values(values);
  DeviceBuffer<float> in(random(64)), out(1);
  for (const simt::Schedule& schedule : kSchedules) {
    SCOPED_TRACE(schedule.to_string());
    simt::ScopedSchedule scoped(schedule);
    DeviceBuffer<unsigned> bins(std::vector<unsigned>(8, 0u));
    EXPECT_EQ(clean_histogram(d_values.data(), count, bins.data()), cudaSuccess) << simt::last_error_message();
    std::vector<unsigned> expected(8, 0u), got(8);
    for (int v : values) expected[v & 7] += 2;  // two blocks each count every value
    bins.download(got);
    EXPECT_EQ(got, expected);
    EXPECT_EQ(clean_warp_tail(in.data(), out.data()), cudaSuccess) << simt::last_error_message();
  }
}

TEST_F(SimtChecks, SwitchedOffTheyStaySilent) {
  const int threads = 128;
  DeviceBuffer<float> in(random(threads)), out(threads);
  {
    simt::ScopedChecks none(simt::Checks::parse("none"));
    EXPECT_EQ(unsynchronised_total(in.data(), out.data(), threads), cudaSuccess);
  }
  {
    simt::ScopedChecks only_memcheck(simt::Checks::parse("memcheck"));
    EXPECT_EQ(unsynchronised_total(in.data(), out.data(), threads), cudaSuccess);
  }
  EXPECT_NE(unsynchronised_total(in.data(), out.data(), threads), cudaSuccess);
  cudaDeviceReset();
}

TEST(SimtCheckSettings, ParseAndPrint) {
  EXPECT_EQ(simt::Checks::parse("all"), simt::Checks{});
  EXPECT_EQ(simt::Checks::parse("none").to_string(), "none");
  EXPECT_EQ(simt::Checks::parse("racecheck,memcheck").to_string(), "memcheck,racecheck");
  EXPECT_FALSE(simt::Checks::parse("initcheck").memcheck);
  EXPECT_THROW(simt::Checks::parse("memchek"), std::invalid_argument);
  EXPECT_THROW(simt::Checks::parse("memcheck,"), std::invalid_argument);
}

}  // namespace
}  // namespace inferlab::sim::simt_tests
