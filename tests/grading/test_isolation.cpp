// The sandbox student calls run in (tests/support/isolation.h): what comes back, what an error
// becomes, and what the child cannot do.
#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "common/check.h"
#include "simt/device_buffer.h"
#include "simt/simt.h"
#include "tests/support/isolation.h"

namespace inferlab::sim::isolation_tests {
namespace {

using testing::isolated_result;
using testing::output_bytes;
using testing::run_isolated;
using testing::StudentCodeFailed;

__global__ void add_one(float* data, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) data[i] += 1.0f;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(Isolation, OutputsComeBackAndNothingElseChanges) {
  std::vector<float> out(5, -1.0f);
  int untouched = 7;
  double value = 0.0;
  run_isolated([&] {
    for (size_t i = 0; i < out.size(); ++i) out[i] = float(i) * 0.5f;
    untouched = 99;  // not an output: the parent's copy keeps 7
    value = 2.5;
  }, {output_bytes(std::span<float>(out)), output_bytes(value)});
  EXPECT_EQ(out, (std::vector<float>{0.0f, 0.5f, 1.0f, 1.5f, 2.0f}));
  EXPECT_EQ(value, 2.5);
  EXPECT_EQ(untouched, 7);
}

TEST(Isolation, ResultsOfEveryKindComeBack) {
  EXPECT_EQ(isolated_result([] { return 42; }), 42);
  EXPECT_EQ(isolated_result([] { return std::vector<int64_t>{3, -1, 5}; }), (std::vector<int64_t>{3, -1, 5}));
  EXPECT_EQ(isolated_result([] { return std::string("twelve chars"); }), "twelve chars");
  EXPECT_TRUE(isolated_result([] { return std::vector<float>{}; }).empty());
}

TEST(Isolation, NotImplementedStaysNotImplemented) {
  EXPECT_THROW(run_isolated([] { throw NotImplemented("exercise 9.9"); }), NotImplemented);
  EXPECT_EQ(message_of([] { run_isolated([] { throw NotImplemented("exercise 9.9"); }); }),
            "not implemented yet: exercise 9.9");
}

TEST(Isolation, AnExceptionKeepsItsMessage) {
  const std::string what = message_of([] { run_isolated([] { throw std::invalid_argument("seq_len = -3"); }); });
  EXPECT_NE(what.find("seq_len = -3"), std::string::npos) << what;
  EXPECT_NE(what.find("std::invalid_argument"), std::string::npos) << what;
}

TEST(Isolation, ACrashFailsTheCallNotTheTest) {
  const std::string what = message_of([] { run_isolated([] { std::raise(SIGSEGV); }); });
  EXPECT_NE(what.find("SIGSEGV"), std::string::npos) << what;
  const std::string aborted = message_of([] { run_isolated([] { std::abort(); }); });
  EXPECT_NE(aborted.find("SIGABRT"), std::string::npos) << aborted;
}

TEST(Isolation, AnEarlyExitIsAFailureNotAPass) {
  EXPECT_THROW(run_isolated([] { std::exit(0); }), StudentCodeFailed);
  EXPECT_THROW(run_isolated([] { ::_exit(0); }), StudentCodeFailed);
  EXPECT_THROW(run_isolated([] { std::quick_exit(0); }), StudentCodeFailed);
}

// The cheat that wrote a passing report: the child can open no file at all — not the report,
// not /proc/<parent>/fd, not /proc/self/cmdline.
TEST(Isolation, TheChildCanOpenNoFile) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("inferlab-isolation-" + std::to_string(::getpid()) + ".xml");
  std::filesystem::remove(path);
  const int error = isolated_result([&] {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    return fd < 0 ? errno : 0;
  });
  EXPECT_EQ(error, EPERM);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(isolated_result([] { return std::fopen("/proc/self/cmdline", "r") == nullptr; }), true);
  EXPECT_EQ(isolated_result([] {
              const std::string parent_fd = "/proc/" + std::to_string(::getppid()) + "/fd/1";
              return ::open(parent_fd.c_str(), O_WRONLY) < 0;
            }), true);
}

TEST(Isolation, TheChildCanStartNoProcessAndSignalNoOne) {
  EXPECT_EQ(isolated_result([] { return ::fork() < 0 ? errno : 0; }), EPERM);
  EXPECT_EQ(isolated_result([] { return ::kill(::getppid(), SIGKILL) < 0 ? errno : 0; }), EPERM);
  EXPECT_EQ(isolated_result([] {
              char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
              ::execv("/bin/true", argv);
              return errno;
            }), EPERM);
}

TEST(Isolation, TheChildCanComputeWithThreads) {
  EXPECT_EQ(isolated_result([] {
              int sum = 0;
              std::thread worker([&] { sum = 41 + 1; });
              worker.join();
              return sum;
            }), 42);
}

// A graded kernel test asks whether a kernel ran and how much device memory the call held.
TEST(Isolation, LaunchesAndDeviceMemoryAreCounted) {
  testing::IsolatedRun run;
  const std::vector<float> out = isolated_result([] {
    std::vector<float> host(1000, 1.0f);
    DeviceBuffer<float> data(host);
    check_cuda(simt::launch(add_one, 8, 128, 0, nullptr, data.data(), 1000), "add_one");
    check_cuda(simt::launch(add_one, 8, 128, 0, nullptr, data.data(), 1000), "add_one");
    return data.download();
  }, &run);
  ASSERT_EQ(out.size(), 1000u);
  EXPECT_EQ(out[999], 3.0f);
  EXPECT_EQ(run.launches, 2u);
  // A failure report names the child's kernel even though it did not run in this process.
  EXPECT_FALSE(testing::last_launch().kernel.empty());
  EXPECT_NE(testing::last_launch().launched_at.find("test_isolation.cpp"), std::string::npos);
  EXPECT_EQ(testing::last_launch().grid.x, 8u);
  EXPECT_GE(run.device_bytes_peak, 4000u);
  EXPECT_LT(run.device_bytes_peak, 8192u);
  const auto host_only = [] { return 1; };
  isolated_result(host_only, &run);
  EXPECT_EQ(run.launches, 0u);
  EXPECT_EQ(run.device_bytes_peak, 0u);
}

TEST(Isolation, AnAssertionInsideTheCallIsReported) {
  // Assertions belong in the parent; one that runs in the child would be lost, so the call fails.
  EXPECT_THROW(run_isolated([] { ADD_FAILURE() << "inside the child (expected)"; }), std::logic_error);
}

}  // namespace
}  // namespace inferlab::sim::isolation_tests
