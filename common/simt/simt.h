#pragma once
/// @file simt.h
/// One header, two compilers: CUDA kernels that run on a GPU (nvcc) and on the CPU (g++, the
/// SIMT emulator).
///
/// ## The convention for a kernel file
///
/// Every `.cu` file of `kernels/`, `exercises/` and `solutions/` includes this header instead of
/// `<cuda_runtime.h>` and is compiled twice by `inferlab_add_kernels()` (cmake/InferlabCuda.cmake):
///
/// | compiler | `INFERLAB_BACKEND_NS` | what the CUDA names mean |
/// | --- | --- | --- |
/// | g++ (always) | `sim` | the SIMT emulator: threads are fibers, blocks run on a worker pool |
/// | nvcc (when found) | `cuda` | the real CUDA runtime and cuBLAS |
///
/// so a kernel file puts everything it defines in `namespace inferlab::INFERLAB_BACKEND_NS`:
///
/// @code
/// #include "simt/simt.h"
/// namespace inferlab::INFERLAB_BACKEND_NS {
/// __global__ void scale(float* data, float factor, int count) {
///   const int i = blockIdx.x * blockDim.x + threadIdx.x;
///   if (i < count) data[i] *= factor;
/// }
/// cudaError_t scale_on_device(float* data, float factor, int count, cudaStream_t stream) {
///   return simt::launch(scale, (count + 127) / 128, 128, 0, stream, data, factor, count);
/// }
/// }  // namespace inferlab::INFERLAB_BACKEND_NS
/// @endcode
///
/// Rules that keep one source valid for both compilers:
/// - launch only with simt::launch() (it is `<<<…>>>` under nvcc), never with raw `<<<>>>`;
/// - declare dynamic shared memory with SIMT_DYNAMIC_SHARED(T, name), never `extern __shared__`;
/// - static `__shared__` arrays are fine (one copy per running block in the emulator);
/// - host code calls the CUDA runtime by its usual names (cudaMalloc, cudaMemcpy, …): in the
///   emulator they are renamed to `simt_cudaMalloc`, … so that one program can hold both backends;
/// - cuBLAS: include "simt/cublas.h".
///
/// Emulator-only controls (environment): `SIMT_WORKERS=N` (OS threads running blocks, default =
/// cores), `SIMT_SCHEDULE=forward|reverse|random:SEED` (the order in which the threads of a block
/// run between synchronisation points). See docs/pages/cuda-without-a-gpu.md.

#if defined(__CUDACC__)
// ---------------------------------------------------------------------------------------------
// nvcc: plain CUDA.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>
#include <utility>

#define INFERLAB_BACKEND_NS cuda
#define INFERLAB_BACKEND_IS_SIM 0
#define SIMT_DYNAMIC_SHARED(T, name)                                    \
  extern __shared__ __align__(16) unsigned char simt_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(simt_dynamic_shared_)

namespace simt {
inline namespace cuda_abi {
/// Launches @p kernel as `kernel<<<grid, block, shared_bytes, stream>>>(args...)` and returns
/// cudaGetLastError() (launch-configuration errors; kernel faults surface at the next sync).
template <class... Params, class... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "simt::launch: wrong number of kernel arguments");
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  return cudaGetLastError();
}
/// The message of the most recent error (on a GPU: cudaGetErrorString of cudaPeekAtLastError()).
inline std::string last_error_message() {
  return cudaGetErrorString(cudaPeekAtLastError());
}
}  // namespace cuda_abi
}  // namespace simt

#else
// ---------------------------------------------------------------------------------------------
// g++: the SIMT emulator.
/// The namespace that the current compiler's kernels live in: `sim` (g++) or `cuda` (nvcc).
#define INFERLAB_BACKEND_NS sim
/// 1 when this translation unit is compiled for the emulator, 0 under nvcc.
#define INFERLAB_BACKEND_IS_SIM 1

#include "simt/detail/cuda_api.h"  // types (toolkit headers or fallback) + renamed runtime API
#include "simt/detail/device.h"    // keywords, built-in indices, barriers, warp ops, atomics, math
#include "simt/detail/launch.h"    // simt::launch, schedules, error messages

#endif
