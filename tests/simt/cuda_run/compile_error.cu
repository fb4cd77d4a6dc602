// cuda-run sample: a file with a type error after a multi-line launch and an extern __shared__
// declaration (both rewritten by the translation). The compiler's error must name the user's
// line, and cuda-run must exit with status 2 without running anything.
// expect: exit 2
// expect: output names the line marked TYPE_ERROR
// expect: output contains does not compile for the emulator
// expect: output does not contain ERROR SUMMARY
#include <cuda_runtime.h>

__global__ void scale(float* data, float factor, int count) {
  // Spread over lines on purpose: the translation must keep every line in place.
  // clang-format off
  extern __shared__ float
      staged[];
  // clang-format on
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  staged[threadIdx.x] = i < count ? data[i] : 0.0f;
  __syncthreads();
  if (i < count) data[i] = staged[threadIdx.x] * factor;
}

int main() {
  float* data = nullptr;
  cudaMalloc(&data, 100 * sizeof(float));
  // clang-format off
  scale<<<1,
          128,
          128 * sizeof(float)>>>(data,
                                 2.0f, 100);
  // clang-format on
  int* wrong = data;  // TYPE_ERROR (a float* is not an int*)
  return wrong != nullptr ? 0 : 1;
}
