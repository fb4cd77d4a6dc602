// cuda-run sample: CUDA that the emulator cannot run. cuda-run must refuse it before compiling,
// naming each construct and its line (the lines marked below), and exit with status 2.
// expect: exit 2
// expect: output contains cooperative groups
// expect: output names the line marked COOPERATIVE
// expect: output names the line marked CURAND
// expect: output names the line marked ASM
// expect: output names the line marked DYNAMIC_PARALLELISM
// expect: output names the line marked SYSTEM_FENCE
// expect: output names the line marked TEXTURE
// expect: output names the line marked MANAGED
// expect: output names the line marked NOT_EMULATED
// expect: output contains dynamic parallelism
// expect: output contains inline assembly
// expect: output does not name the line marked INACTIVE
// expect: output does not name the line marked COMMENT
// expect: output does not name the line marked STRING
#include <cooperative_groups.h>  // COOPERATIVE
#include <cuda_runtime.h>
#include <curand_kernel.h>  // CURAND

#include <cstdio>

// Words in comments and strings are not code: asm, cooperative_groups, k<<<1, 1>>>() COMMENT
__global__ void child(int* data) {
  data[threadIdx.x] += 1;
}

__global__ void parent(int* data) {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));                // ASM
  child<<<1, 32>>>(data);                                   // DYNAMIC_PARALLELISM
  __threadfence_system();                                   // SYSTEM_FENCE
  const char* text = "asm cooperative_groups __managed__";  // STRING
  (void)text;
  (void)lane;
}

__global__ void sample(cudaTextureObject_t texture, float* out) {  // TEXTURE
  out[threadIdx.x] = 0.0f;
}

#ifdef __CUDA_ARCH__
__global__ void only_on_a_gpu() {
  asm("trap;");  // INACTIVE
}
#endif

int main() {
  int* data = nullptr;
  cudaMallocManaged(&data, 32 * sizeof(int));  // MANAGED
  size_t pitch = 0;
  cudaMallocPitch(reinterpret_cast<void**>(&data), &pitch, 64, 4);  // NOT_EMULATED
  parent<<<1, 1>>>(data);
  return 0;
}
