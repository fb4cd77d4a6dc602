// The runtime shims, launch validation, errors and schedules.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "simt/device_buffer.h"
#include "simt/simt.h"

namespace inferlab::sim::simt_runtime_tests {
namespace {

using ::testing::HasSubstr;

__constant__ float scale_table[4];

__global__ void scale_by_table(float* data, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) data[i] *= scale_table[i % 4];
}

__global__ void noop(int*) {}

__global__ void throws_inside(int*) {
  if (threadIdx.x == 3) throw std::runtime_error("boom");
  __syncthreads();
}

TEST(SimtRuntime, ScheduleParsesAndPrints) {
  EXPECT_EQ(simt::Schedule::parse("forward"), (simt::Schedule{simt::Order::forward, 0}));
  EXPECT_EQ(simt::Schedule::parse("reverse"), (simt::Schedule{simt::Order::reverse, 0}));
  EXPECT_EQ(simt::Schedule::parse("random:42"), (simt::Schedule{simt::Order::random, 42}));
  EXPECT_EQ(simt::Schedule::parse("random:7").to_string(), "random:7");
  EXPECT_THROW(simt::Schedule::parse("random:"), std::invalid_argument);
  EXPECT_THROW(simt::Schedule::parse("backwards"), std::invalid_argument);
  {
    simt::ScopedSchedule scoped(simt::Schedule{simt::Order::reverse, 0});
    EXPECT_EQ(simt::schedule().order, simt::Order::reverse);
  }
  EXPECT_THROW(simt::set_workers(0), std::invalid_argument);
}

TEST(SimtRuntime, LaunchValidationLikeAGpu) {
  int* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, sizeof(int)), cudaSuccess);
  EXPECT_EQ(simt::launch(noop, 1, 1025, 0, nullptr, out), cudaErrorInvalidConfiguration);
  EXPECT_THAT(simt::last_error_message(), HasSubstr("1025 threads; a block holds at most 1024"));
  EXPECT_THAT(simt::last_error_message(), HasSubstr("noop"));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(simt::launch(noop, 1, dim3(32, 32, 2), 0, nullptr, out), cudaErrorInvalidConfiguration);
  EXPECT_EQ(simt::launch(noop, 1, dim3(1, 1, 65), 0, nullptr, out), cudaErrorInvalidConfiguration);
  EXPECT_EQ(simt::launch(noop, dim3(1, 65536), 32, 0, nullptr, out), cudaErrorInvalidConfiguration);
  EXPECT_EQ(simt::launch(noop, 0, 32, 0, nullptr, out), cudaErrorInvalidConfiguration);
  EXPECT_EQ(simt::launch(noop, 1, 32, 48 * 1024 + 1, nullptr, out), cudaErrorInvalidValue);
  EXPECT_EQ(simt::launch(noop, 1, 1024, 48 * 1024, nullptr, out), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);  // the last failure, once
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(simt::last_launch().block.x, 1024u);
  cudaFree(out);
}

TEST(SimtRuntime, KernelExceptionIsAStickyLaunchFailure) {
  int* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, sizeof(int)), cudaSuccess);
  EXPECT_EQ(simt::launch(throws_inside, 2, 8, 0, nullptr, out), cudaErrorLaunchFailure);
  EXPECT_THAT(simt::last_error_message(), HasSubstr("thread (3,0,0): the kernel threw an exception: boom"));
  int host = 0;
  EXPECT_EQ(cudaMemcpy(&host, out, sizeof(int), cudaMemcpyDeviceToHost), cudaErrorLaunchFailure);
  EXPECT_EQ(simt::launch(noop, 1, 1, 0, nullptr, out), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
  EXPECT_EQ(simt::launch(noop, 1, 1, 0, nullptr, out), cudaSuccess);
  EXPECT_EQ(cudaFree(out), cudaSuccess);
}

TEST(SimtRuntime, MemoryIsPoisonedAndBoundsChecked) {
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 10 * sizeof(float)), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(device) % 256, 0u);
  std::vector<float> host(10, 1.0f);
  ASSERT_EQ(cudaMemcpy(host.data(), device, host.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (float v : host) EXPECT_TRUE(std::isnan(v)) << "fresh device memory is poisoned";
  EXPECT_EQ(cudaMemcpy(device, host.data(), 11 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_THAT(simt::last_error_message(), HasSubstr("of the 40-byte allocation"));
  EXPECT_THAT(simt::last_error_message(), HasSubstr("its last 4 of 44 bytes are past its end"));
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 1, sizeof(float), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_THAT(simt::last_error_message(), HasSubstr("not device memory"));
  EXPECT_EQ(cudaMemset(device + 2, 0, 8 * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMemset(device + 2, 0, 9 * sizeof(float)), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), device, 10 * sizeof(float), cudaMemcpyDeviceToHost, nullptr), cudaSuccess);
  EXPECT_EQ(host[2], 0.0f);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaErrorInvalidValue) << "double free";
  cudaGetLastError();
}

TEST(SimtRuntime, ConstantMemory) {
  const float table[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  ASSERT_EQ(cudaMemcpyToSymbol(scale_table, table, sizeof(table)), cudaSuccess);
  DeviceBuffer<float> data(std::vector<float>(10, 1.5f));
  ASSERT_EQ(simt::launch(scale_by_table, 1, 16, 0, nullptr, data.data(), 10), cudaSuccess);
  const std::vector<float> got = data.download();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(got[i], 1.5f * table[i % 4]);
  float back[4] = {};
  ASSERT_EQ(cudaMemcpyFromSymbol(back, scale_table, sizeof(back)), cudaSuccess);
  EXPECT_EQ(back[3], 4.0f);
}

TEST(SimtRuntime, DevicePropertiesStreamsAndEvents) {
  int count = 0, device = -1;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0);
  EXPECT_EQ(cudaSetDevice(1), cudaErrorInvalidDevice);
  cudaGetLastError();
  cudaDeviceProp properties;
  ASSERT_EQ(cudaGetDeviceProperties(&properties, 0), cudaSuccess);
  EXPECT_THAT(std::string(properties.name), HasSubstr("SIMT emulator"));
  EXPECT_EQ(properties.maxThreadsPerBlock, 1024);
  EXPECT_EQ(properties.warpSize, 32);
  EXPECT_EQ(properties.sharedMemPerBlock, 48u * 1024);
  EXPECT_EQ(properties.sharedMemPerBlockOptin, 227u * 1024);
  EXPECT_EQ(properties.major, 8);
  EXPECT_EQ(properties.multiProcessorCount, simt::workers());
  int value = 0;
  EXPECT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
  EXPECT_EQ(value, 227 * 1024);

  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  int* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, sizeof(int)), cudaSuccess);
  float ms = -1.0f;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaErrorInvalidResourceHandle) << "not recorded yet";
  cudaGetLastError();
  ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
  ASSERT_EQ(simt::launch(noop, 4, 64, 0, stream, out), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(stop, stream), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(start), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(stop), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(out), cudaSuccess);
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorLaunchFailure), "cudaErrorLaunchFailure");
}

}  // namespace
}  // namespace inferlab::sim::simt_runtime_tests
