// cuda-run sample: a launch that a GPU refuses (2048 threads per block). The program ignores the
// error and returns 0; cuda-run must still count the emulator's report, name the launch's line and
// exit non-zero.
// expect: exit 1
// expect: output contains simt: launch of
// expect: output names the line marked TOO_MANY_THREADS
// expect: output contains ERROR SUMMARY: 1 error
#include <cuda_runtime.h>

#include <cstdio>

__global__ void fill(float* out, float value) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = value;
}

int main() {
  float* out = nullptr;
  cudaMalloc(&out, 2048 * sizeof(float));
  fill<<<1, 2048>>>(out, 1.0f);  // TOO_MANY_THREADS (a block holds at most 1024 threads)
  std::printf("launched (the error is not checked)\n");
  cudaFree(out);
  return 0;
}
