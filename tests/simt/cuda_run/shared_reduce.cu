// cuda-run sample: a block reduction in plain CUDA — template kernels launched with triple
// chevrons (with explicit template arguments, and with arguments that choose them), dynamic
// shared memory (extern __shared__ at block scope and at namespace scope, with __align__), warp
// shuffles, atomics, a stream and printf in a kernel. cuda-run must run it with no report.
// expect: exit 0
// expect: output contains ERROR SUMMARY: 0 errors
// expect: output contains block_sum: 3 blocks correct
// expect: output contains warp_sum: 1001 elements correct
// expect: output contains hello from block 0
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#define CUDA_CHECK(call)                                                                   \
  do {                                                                                     \
    const cudaError_t error_ = (call);                                                     \
    if (error_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(error_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

// Namespace-scope dynamic shared memory, as some CUDA code declares it.
extern __shared__ __align__(16) unsigned char warp_totals_raw[];

/* One partial sum per block: the classic shared-memory tree. BLOCK is a power of two. */
template <typename T, int BLOCK>
__global__ void block_sum(const T* input, T* partial_sums, int count) {
  extern __shared__ T partial[];  // BLOCK elements: the launch passes BLOCK * sizeof(T)
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  partial[threadIdx.x] = i < count ? input[i] : T(0);
  __syncthreads();  // every element is written before the tree reads it
  for (unsigned stride = BLOCK / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();  // this level is finished before the next reads it
  }
  if (threadIdx.x == 0) partial_sums[blockIdx.x] = partial[0];
  if (threadIdx.x == 0 && blockIdx.x == 0) printf("hello from block %d of %d\n", blockIdx.x, gridDim.x);
}

// A template kernel launched without template arguments: the arguments choose T.
template <typename T>
__global__ void scale(const T* input, T* output, T factor, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) output[i] = input[i] * factor;
}

// Warp shuffles, then one atomicAdd per block.
__global__ void warp_sum(const float* input, float* total, int count) {
  float* warp_totals = reinterpret_cast<float*>(warp_totals_raw);
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float value = i < count ? input[i] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_totals[warp] = value;
  __syncthreads();  // the warp totals are written before warp 0 reads them
  if (warp == 0) {
    value = lane < static_cast<int>(blockDim.x / 32) ? warp_totals[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
    if (lane == 0) atomicAdd(total, value);
  }
}

int main() {
  constexpr int kBlock = 128;
  const int count = 300;
  const int blocks = (count + kBlock - 1) / kBlock;
  std::vector<int> values(count);
  long expected = 0;
  for (int i = 0; i < count; ++i) expected += values[i] = (i * 7919) % 101 - 50;
  int *d_values, *d_partial;
  CUDA_CHECK(cudaMalloc(&d_values, count * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&d_partial, blocks * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(d_values, values.data(), count * sizeof(int), cudaMemcpyHostToDevice));
  scale<<<blocks, kBlock>>>(d_values, d_values, -3, count);  // T = int
  block_sum<int, kBlock><<<blocks, kBlock, kBlock * sizeof(int)>>>(d_values, d_partial, count);
  CUDA_CHECK(cudaGetLastError());
  std::vector<int> partial(blocks);
  CUDA_CHECK(cudaMemcpy(partial.data(), d_partial, blocks * sizeof(int), cudaMemcpyDeviceToHost));
  long total = 0;
  for (int p : partial) total += p;
  if (total != -3 * expected) {
    std::printf("block_sum: %ld, expected %ld\n", total, -3 * expected);
    return 1;
  }
  std::printf("block_sum: %d blocks correct\n", blocks);

  // Warp-shuffle sum of 1001 floats on a stream: 4 blocks of 256 threads, 8 warp totals each.
  const int floats = 1001;
  std::vector<float> input(floats);
  for (int i = 0; i < floats; ++i) input[i] = __half2float(__float2half(0.25f * (i % 17)));
  float *d_input, *d_total;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  CUDA_CHECK(cudaMalloc(&d_input, floats * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_total, sizeof(float)));
  CUDA_CHECK(cudaMemcpyAsync(d_input, input.data(), floats * sizeof(float), cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemsetAsync(d_total, 0, sizeof(float), stream));
  // A launch over several lines: the translation keeps every line in place.
  // clang-format off
  warp_sum<<<
      (floats + 255) / 256, 256,
      (256 / 32) * sizeof(float), stream>>>(d_input, d_total, floats);
  // clang-format on
  CUDA_CHECK(cudaGetLastError());
  float device_total = 0;
  CUDA_CHECK(cudaMemcpyAsync(&device_total, d_total, sizeof(float), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  float host_total = 0;
  for (float x : input) host_total += x;
  if (device_total != host_total) {  // quarter-integers: every order of additions is exact
    std::printf("warp_sum: %g, expected %g\n", device_total, host_total);
    return 1;
  }
  std::printf("warp_sum: %d elements correct\n", floats);
  CUDA_CHECK(cudaStreamDestroy(stream));
  for (void* p : {static_cast<void*>(d_values), static_cast<void*>(d_partial), static_cast<void*>(d_input),
                  static_cast<void*>(d_total)})
    CUDA_CHECK(cudaFree(p));
  return 0;
}
