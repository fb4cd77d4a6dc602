// Compiled by nvcc only: how many GPUs this process can use (backend selection, common/backend.cpp).
#include <cuda_runtime.h>

namespace inferlab::cuda {

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver / no GPU: not an error for the caller
    return 0;
  }
  return count;
}

}  // namespace inferlab::cuda
