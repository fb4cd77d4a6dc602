// cuda-run sample: a kernel that crashes the process (an integer division by zero: SIGFPE on the
// CPU). cuda-run must say that the program crashed, with the signal and the kernel's line (under
// the asan preset, UBSan reports the division first).
// expect: exit nonzero
// expect: output contains The program crashed: SIGFPE || runtime error: division by zero
// expect: output names the line marked DIVIDE
// expect: output contains ERROR SUMMARY: 1 error
#include <cuda_runtime.h>

#include <cstdio>

__global__ void average(const int* sums, const int* counts, int* averages, int groups) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g < groups) averages[g] = sums[g] / counts[g];  // DIVIDE (one count is 0)
}

int main() {
  const int groups = 40;
  int sums[groups], counts[groups];
  for (int g = 0; g < groups; ++g) {
    sums[g] = 10 * g;
    counts[g] = g == 37 ? 0 : g % 5 + 1;
  }
  int *d_sums, *d_counts, *d_averages;
  cudaMalloc(&d_sums, sizeof(sums));
  cudaMalloc(&d_counts, sizeof(counts));
  cudaMalloc(&d_averages, sizeof(sums));
  cudaMemcpy(d_sums, sums, sizeof(sums), cudaMemcpyHostToDevice);
  cudaMemcpy(d_counts, counts, sizeof(counts), cudaMemcpyHostToDevice);
  average<<<2, 32>>>(d_sums, d_counts, d_averages, groups);
  cudaDeviceSynchronize();
  std::printf("not reached\n");
  return 0;
}
