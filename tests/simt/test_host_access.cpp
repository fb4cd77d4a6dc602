// Host code that dereferences a device pointer crashes on a GPU; on the emulator it faults too,
// outside launches and the runtime's calls, and the report names the host line, the access and
// where the memory was allocated. Launches, copies, memset, cuBLAS, pinned memory and copies on
// several threads at once still work, and the heap is closed again after each of them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "simt/cublas.h"
#include "simt/device_buffer.h"
#include "simt/simt.h"
#include "tests/support/seeded.h"

namespace inferlab::sim::simt_host_access_tests {
namespace {

__global__ void add_one(const float* in, float* out, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = in[i] + 1.0f;
}

// "test_host_access.cpp:LINE (in", as a regular expression: how a report names @p line of this file.
std::string here(int line) {
  return "test_host_access\\.cpp:" + std::to_string(line) + " \\(in ";
}

// The bugs: host code dereferencing device pointers (out of line, so that each has its own line).
constexpr int kReadLine = __LINE__ + 2;
[[gnu::noinline]] float read_on_host(const float* device, int i) {
  return *static_cast<const volatile float*>(device + i);
}
constexpr int kWriteLine = __LINE__ + 2;
[[gnu::noinline]] void write_on_host(float* device, int i) {
  *static_cast<volatile float*>(device + i) = 1.0f;
}
constexpr int kMemcpyLine = __LINE__ + 2;
[[gnu::noinline]] void memcpy_on_host(float* host, const float* device, size_t count) {
  std::memcpy(host, device, count * sizeof(float));  // a library call: its caller is the line to name
  asm volatile("" ::: "memory");                     // (not a tail call: this frame stays on the stack)
}

class SimtHostAccess : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!simt::host_access_checked()) GTEST_SKIP() << "SIMT_HOST_ACCESS=allow: device memory is open to host code";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
  std::vector<float> random(size_t count) {
    std::vector<float> values(count);
    for (float& v : values) v = rng_.uniform(-2.0f, 2.0f);
    return values;
  }
  testing::SeededRng rng_;
};

// ---- reported -----------------------------------------------------------------------------------

TEST_F(SimtHostAccess, HostReadOfADevicePointerIsReportedWithItsLineAndTheAllocation) {
  const std::vector<float> values = random(64);
  const int allocated = __LINE__ + 1;
  DeviceBuffer<float> device(values);
  EXPECT_DEATH(read_on_host(device.data(), 5),
               "simt: memcheck: host code read device memory allocated at " + here(allocated) +
                   "(.|\n)*the read is at " + here(kReadLine) +
                   "read_on_host\\): address 0x[0-9a-f]+ is at byte offset 20 of the 256-byte allocation #[0-9]+"
                   "(.|\n)*copy the data to the host with cudaMemcpy");
}

TEST_F(SimtHostAccess, HostWriteOfADevicePointerIsReported) {
  float* device = nullptr;
  const int allocated = __LINE__ + 1;
  ASSERT_EQ(cudaMalloc(&device, 10 * sizeof(float)), cudaSuccess);
#if defined(__x86_64__)
  const std::string verb = "wrote", noun = "write";
#else
  const std::string verb = "touched", noun = "access";
#endif
  EXPECT_DEATH(write_on_host(device, 9), "simt: memcheck: host code " + verb + " device memory allocated at " +
                                             here(allocated) + "(.|\n)*the " + noun + " is at " + here(kWriteLine) +
                                             "(.|\n)*at byte offset 36 of the 40-byte allocation");
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

// A library call (memcpy instead of cudaMemcpy) is named by its caller's line, not memcpy's.
TEST_F(SimtHostAccess, AMemcpyFromDeviceMemoryNamesTheCallersLine) {
  const std::vector<float> values = random(300);
  const int allocated = __LINE__ + 1;
  DeviceBuffer<float> device(values);
  std::vector<float> host(values.size());
  EXPECT_DEATH(memcpy_on_host(host.data(), device.data(), host.size()), "host code read device memory allocated at " +
                                                                            here(allocated) + "(.|\n)*the read is at " +
                                                                            here(kMemcpyLine) + "memcpy_on_host");
}

// After a launch, a copy and a memset the heap is closed again: they do not hide the bug.
TEST_F(SimtHostAccess, TheHeapClosesAgainAfterLaunchesAndCopies) {
  const std::vector<float> values = random(100);
  DeviceBuffer<float> in(values);
  const int allocated = __LINE__ + 1;
  DeviceBuffer<float> out = DeviceBuffer<float>::poisoned(values.size());
  ASSERT_EQ(simt::launch(add_one, 1, 128, 0, nullptr, static_cast<const float*>(in.data()), out.data(), 100),
            cudaSuccess);
  ASSERT_EQ(cudaMemset(in.data(), 0, in.bytes()), cudaSuccess);
  EXPECT_EQ(out.download()[7], values[7] + 1.0f);
  EXPECT_DEATH(read_on_host(out.data(), 1), "host code read device memory allocated at " + here(allocated) +
                                                "(.|\n)*the read is at " + here(kReadLine));
}

TEST_F(SimtHostAccess, HostReadOfFreedDeviceMemoryIsReported) {
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 4096), cudaSuccess);
  ASSERT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_DEATH(read_on_host(device, 1),
               "host code read device memory\n  the read is at " + here(kReadLine) +
                   "(.|\n)*at byte offset 4 of the 4096-byte allocation #[0-9]+ \\(cudaMalloc'd at 0x[0-9a-f]+\\), "
                   "which was freed by cudaFree");
}

// ---- still working --------------------------------------------------------------------------------

TEST_F(SimtHostAccess, CopiesLaunchesMemsetAndCublasStillWork) {
  const int count = 1000;
  const std::vector<float> values = random(count);
  DeviceBuffer<float> in(values);
  DeviceBuffer<float> out = DeviceBuffer<float>::poisoned(count);
  ASSERT_EQ(simt::launch(add_one, 8, 128, 0, nullptr, static_cast<const float*>(in.data()), out.data(), count),
            cudaSuccess)
      << simt::last_error_message();
  std::vector<float> got = out.download();
  for (int i = 0; i < count; ++i) ASSERT_EQ(got[size_t(i)], values[size_t(i)] + 1.0f) << i;
  // Device to device, then a memset of part of it.
  DeviceBuffer<float> copy(count);
  ASSERT_EQ(cudaMemcpy(copy.data(), out.data(), out.bytes(), cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(copy.data(), 0, 10 * sizeof(float)), cudaSuccess);
  got = copy.download();
  for (int i = 0; i < count; ++i) ASSERT_EQ(got[size_t(i)], i < 10 ? 0.0f : values[size_t(i)] + 1.0f) << i;
  // cuBLAS reads and writes device memory from the host side of the emulator: C = A·B, 2×2.
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  DeviceBuffer<float> a(std::vector<float>{1, 2, 3, 4}), b(std::vector<float>{5, 6, 7, 8}), c(4);
  const float one = 1.0f, zero = 0.0f;
  ASSERT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a.data(), 2, b.data(), 2, &zero, c.data(), 2),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(c.download(), (std::vector<float>{23, 34, 31, 46}));  // column-major
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

// cudaMallocHost memory is host memory: the host reads and writes it, kernels too.
TEST_F(SimtHostAccess, PinnedHostMemoryStaysOpenToTheHost) {
  const int count = 64;
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, count * sizeof(float)), cudaSuccess);
  for (int i = 0; i < count; ++i) pinned[i] = float(i);
  DeviceBuffer<float> out(count);
  ASSERT_EQ(simt::launch(add_one, 1, count, 0, nullptr, static_cast<const float*>(pinned), out.data(), count),
            cudaSuccess)
      << simt::last_error_message();
  ASSERT_EQ(cudaMemcpy(pinned, out.data(), out.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < count; ++i) EXPECT_EQ(pinned[i], float(i) + 1.0f);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

// Copies and launches on four threads and streams at once: each holds the heap open while it runs,
// and one finishing does not close it under another (a kernel or copy would fault). Afterwards it
// is closed.
TEST_F(SimtHostAccess, ConcurrentStreamsOnSeveralThreadsStillWork) {
  const int count = 4096, rounds = 40, threads = 4;
  std::vector<std::vector<float>> inputs;
  for (int t = 0; t < threads; ++t) inputs.push_back(random(count));
  std::vector<int> wrong(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      cudaStream_t stream = nullptr;
      cudaStreamCreate(&stream);
      DeviceBuffer<float> in(count), out(count);
      std::vector<float> got(count);
      for (int r = 0; r < rounds; ++r) {
        cudaMemcpyAsync(in.data(), inputs[size_t(t)].data(), in.bytes(), cudaMemcpyHostToDevice, stream);
        if (simt::launch(add_one, count / 128, 128, 0, stream, static_cast<const float*>(in.data()), out.data(),
                         count) != cudaSuccess)
          ++wrong[size_t(t)];
        cudaMemcpyAsync(got.data(), out.data(), out.bytes(), cudaMemcpyDeviceToHost, stream);
        cudaStreamSynchronize(stream);
        for (int i = 0; i < count; ++i) wrong[size_t(t)] += got[size_t(i)] != inputs[size_t(t)][size_t(i)] + 1.0f;
      }
      cudaStreamDestroy(stream);
    });
  for (std::thread& t : pool) t.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(wrong[size_t(t)], 0) << "thread " << t;
  const int allocated = __LINE__ + 1;
  DeviceBuffer<float> device(inputs[0]);
  EXPECT_DEATH(read_on_host(device.data(), 0), "host code read device memory allocated at " + here(allocated));
}

}  // namespace
}  // namespace inferlab::sim::simt_host_access_tests
