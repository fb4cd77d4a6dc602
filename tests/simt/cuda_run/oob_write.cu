// cuda-run sample: a kernel that writes one element past the end of a cudaMalloc buffer (the
// classic off-by-one guard). The program ignores errors and returns 0; cuda-run must report the
// out-of-bounds write with the kernel's line (the emulator's memcheck; AddressSanitizer under the
// asan preset) and exit non-zero.
// expect: exit nonzero
// expect: output contains simt: memcheck: || ERROR: AddressSanitizer
// expect: output names the line marked OFF_BY_ONE
// expect: output contains ERROR SUMMARY: 1 error
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

__global__ void copy(const float* in, float* out, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= count) out[i] = i < count ? in[i] : 0.0f;  // OFF_BY_ONE (i == count writes past the end)
}

int main() {
  const int count = 100;
  std::vector<float> host(count, 1.0f);
  float *in, *out;
  cudaMalloc(&in, count * sizeof(float));
  cudaMalloc(&out, count * sizeof(float));
  cudaMemcpy(in, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
  copy<<<1, 128>>>(in, out, count);
  cudaDeviceSynchronize();
  cudaMemcpy(host.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost);
  std::printf("copied %d elements (errors not checked)\n", count);
  cudaFree(in);
  cudaFree(out);
  return 0;
}
