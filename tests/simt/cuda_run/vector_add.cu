// cuda-run sample: a correct vector add in plain CUDA (cuda_runtime.h, triple chevrons, the
// runtime API, error checks). cuda-run must run it with no report.
// expect: exit 0
// expect: output contains ERROR SUMMARY: 0 errors
// expect: output contains vector_add: 1000 elements correct
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#define CUDA_CHECK(call)                                                                   \
  do {                                                                                     \
    cudaError_t error_ = (call);                                                           \
    if (error_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(error_)); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

__global__ void vector_add(const float* a, const float* b, float* c, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) c[i] = a[i] + b[i];
}

int main() {
  const int count = 1000;  // not a multiple of the block: the guard above matters
  std::vector<float> a(count), b(count), c(count);
  for (int i = 0; i < count; ++i) {
    a[i] = 0.5f * i;
    b[i] = 3.0f - i;
  }
  float *d_a, *d_b, *d_c;
  CUDA_CHECK(cudaMalloc(&d_a, count * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_b, count * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_c, count * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_a, a.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_b, b.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  const int threads = 128;
  vector_add<<<(count + threads - 1) / threads, threads>>>(d_a, d_b, d_c, count);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(c.data(), d_c, count * sizeof(float), cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int i = 0; i < count; ++i) wrong += c[i] != a[i] + b[i];
  CUDA_CHECK(cudaFree(d_a));
  CUDA_CHECK(cudaFree(d_b));
  CUDA_CHECK(cudaFree(d_c));
  if (wrong != 0) {
    std::printf("vector_add: %d of %d elements wrong\n", wrong, count);
    return 1;
  }
  std::printf("vector_add: %d elements correct\n", count);
  return 0;
}
