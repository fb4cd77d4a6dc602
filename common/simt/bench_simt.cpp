// The emulator's mechanics, measured: one fiber switch (a thread parking at __syncwarp and being
// resumed is two switches), one 128-thread block with 2 barriers, a launch's fixed cost with N
// live allocations, and one cudaMalloc/cudaFree pair.
//   build/default/common/simt/bench_simt
// Targets: <= 50 ns per switch, <= 30 us per 128-thread block with 2 barriers.

#include <benchmark/benchmark.h>

#include <vector>

#include "simt/simt.h"

namespace {

__global__ void two_barriers(float* out) {
  __shared__ float tile[128];
  tile[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();  // tile is complete before anyone reads a neighbour
  const float mine = tile[(threadIdx.x + 1) % 128];
  __syncthreads();  // everyone has read before anyone overwrites
  tile[threadIdx.x] = mine;
  if (threadIdx.x == 0) out[blockIdx.x] = tile[0];
}

template <int kSyncs>
__global__ void many_syncwarps(int* out) {
  int x = 0;
  for (int i = 0; i < kSyncs; ++i) {
    __syncwarp();
    ++x;
  }
  if (threadIdx.x == 0) *out = x;
}

void BM_block128_two_barriers(benchmark::State& state) {
  simt::set_workers(1);
  float* out = nullptr;
  cudaMalloc(&out, sizeof(float) * 64);
  const int blocks = static_cast<int>(state.range(0));
  for (auto _ : state) {
    if (simt::launch(two_barriers, blocks, 128, 0, nullptr, out) != cudaSuccess) state.SkipWithError("launch failed");
  }
  state.counters["per_block"] = benchmark::Counter(static_cast<double>(state.iterations()) * blocks,
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  cudaFree(out);
}
BENCHMARK(BM_block128_two_barriers)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);

// One warp parks 1000 times per launch: 32 threads x 1000 x 2 switches.
void BM_fiber_switch(benchmark::State& state) {
  simt::set_workers(1);
  int* out = nullptr;
  cudaMalloc(&out, sizeof(int));
  constexpr int kSyncs = 1000;
  for (auto _ : state) {
    if (simt::launch(many_syncwarps<kSyncs>, 1, 32, 0, nullptr, out) != cudaSuccess)
      state.SkipWithError("launch failed");
  }
  // Includes the scheduler's bookkeeping around each switch (resolving the __syncwarp).
  state.counters["per_switch"] = benchmark::Counter(static_cast<double>(state.iterations()) * 32 * kSyncs * 2,
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  cudaFree(out);
}
BENCHMARK(BM_fiber_switch)->Unit(benchmark::kMicrosecond);

__global__ void one_store(float* out) {
  *out = 1.0f;
}

// The fixed cost of a launch with N live allocations: the heap opens (one mprotect per live
// allocation) and closes again around it, unless SIMT_HOST_ACCESS=allow. Compare the two.
void BM_empty_launch_with_live_allocations(benchmark::State& state) {
  simt::set_workers(1);
  std::vector<float*> live(static_cast<size_t>(state.range(0)));
  for (float*& p : live) cudaMalloc(&p, 4096);
  for (auto _ : state) {
    if (simt::launch(one_store, 1, 1, 0, nullptr, live[0]) != cudaSuccess) state.SkipWithError("launch failed");
  }
  for (float* p : live) cudaFree(p);
  state.SetLabel(simt::host_access_checked() ? "heap closed to the host" : "SIMT_HOST_ACCESS=allow");
}
BENCHMARK(BM_empty_launch_with_live_allocations)->Arg(1)->Arg(10)->Arg(100)->Unit(benchmark::kMicrosecond);

// cudaMalloc + cudaFree of 4 KiB (the allocation's call stack is recorded for the host-access report).
void BM_malloc_free(benchmark::State& state) {
  for (auto _ : state) {
    float* p = nullptr;
    cudaMalloc(&p, 4096);
    cudaFree(p);
  }
}
BENCHMARK(BM_malloc_free)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
