#pragma once
/// @file cuda_api.h
/// The CUDA runtime API as the emulator provides it (g++ only; included by simt/simt.h).
///
/// Types come from the CUDA toolkit's own headers when they are on the include path
/// (`cuda_runtime_api.h`, `vector_functions.h`, `cuda_fp16.h`, `cuda_bf16.h`), so values and
/// layouts are exactly CUDA's; without a toolkit, simt/detail/fallback_types.h supplies a small
/// compatible subset. The functions are defined by the emulator under the names `simt_cudaXxx`,
/// and macros map the usual names to them: a sim translation unit never calls the real libcudart,
/// and one program may link both backends.

#include <cstddef>

#if !defined(SIMT_NO_TOOLKIT_HEADERS) && __has_include(<cuda_runtime_api.h>)
/// 1 when the CUDA toolkit's headers provide the types, 0 with the fallback.
#define SIMT_TOOLKIT_HEADERS 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <vector_functions.h>
#include <vector_types.h>
#else
/// 1 when the CUDA toolkit's headers provide the types, 0 with the fallback.
#define SIMT_TOOLKIT_HEADERS 0
#include "simt/detail/fallback_types.h"
#endif

/// @cond SIMT_DETAIL
// The toolkit maps some names to per-thread-stream variants; the emulator has one name each.
#undef cudaMalloc
#undef cudaFree
#undef cudaMallocHost
#undef cudaFreeHost
#undef cudaMemcpy
#undef cudaMemcpyAsync
#undef cudaMemset
#undef cudaMemsetAsync
#undef cudaMemcpyToSymbol
#undef cudaMemcpyFromSymbol
#undef cudaDeviceSynchronize
#undef cudaDeviceReset
#undef cudaGetLastError
#undef cudaPeekAtLastError
#undef cudaGetErrorString
#undef cudaGetErrorName
#undef cudaGetDeviceCount
#undef cudaGetDevice
#undef cudaSetDevice
#undef cudaGetDeviceProperties
#undef cudaDeviceGetAttribute
#undef cudaFuncSetAttribute
#undef cudaMemGetInfo
#undef cudaStreamCreate
#undef cudaStreamCreateWithFlags
#undef cudaStreamDestroy
#undef cudaStreamSynchronize
#undef cudaStreamQuery
#undef cudaStreamWaitEvent
#undef cudaEventCreate
#undef cudaEventCreateWithFlags
#undef cudaEventDestroy
#undef cudaEventRecord
#undef cudaEventSynchronize
#undef cudaEventQuery
#undef cudaEventElapsedTime

#define cudaMalloc simt_cudaMalloc
#define cudaFree simt_cudaFree
#define cudaMallocHost simt_cudaMallocHost
#define cudaFreeHost simt_cudaFreeHost
#define cudaMemcpy simt_cudaMemcpy
#define cudaMemcpyAsync simt_cudaMemcpyAsync
#define cudaMemset simt_cudaMemset
#define cudaMemsetAsync simt_cudaMemsetAsync
#define cudaMemcpyToSymbol simt_cudaMemcpyToSymbol
#define cudaMemcpyFromSymbol simt_cudaMemcpyFromSymbol
#define cudaDeviceSynchronize simt_cudaDeviceSynchronize
#define cudaDeviceReset simt_cudaDeviceReset
#define cudaGetLastError simt_cudaGetLastError
#define cudaPeekAtLastError simt_cudaPeekAtLastError
#define cudaGetErrorString simt_cudaGetErrorString
#define cudaGetErrorName simt_cudaGetErrorName
#define cudaGetDeviceCount simt_cudaGetDeviceCount
#define cudaGetDevice simt_cudaGetDevice
#define cudaSetDevice simt_cudaSetDevice
#define cudaGetDeviceProperties simt_cudaGetDeviceProperties
#define cudaDeviceGetAttribute simt_cudaDeviceGetAttribute
#define cudaFuncSetAttribute simt_cudaFuncSetAttribute
#define cudaMemGetInfo simt_cudaMemGetInfo
#define cudaStreamCreate simt_cudaStreamCreate
#define cudaStreamCreateWithFlags simt_cudaStreamCreateWithFlags
#define cudaStreamDestroy simt_cudaStreamDestroy
#define cudaStreamSynchronize simt_cudaStreamSynchronize
#define cudaStreamQuery simt_cudaStreamQuery
#define cudaStreamWaitEvent simt_cudaStreamWaitEvent
#define cudaEventCreate simt_cudaEventCreate
#define cudaEventCreateWithFlags simt_cudaEventCreateWithFlags
#define cudaEventDestroy simt_cudaEventDestroy
#define cudaEventRecord simt_cudaEventRecord
#define cudaEventSynchronize simt_cudaEventSynchronize
#define cudaEventQuery simt_cudaEventQuery
#define cudaEventElapsedTime simt_cudaEventElapsedTime

// Memory: every device allocation is host memory of exactly the requested size (so ASan sees its
// bounds), 256-byte aligned like cudaMalloc, filled with 0xFF (NaN for floats) so that reading an
// element nobody wrote shows up.
cudaError_t simt_cudaMalloc(void** pointer, size_t bytes);
template <class T>
cudaError_t simt_cudaMalloc(T** pointer, size_t bytes) {
  return simt_cudaMalloc(reinterpret_cast<void**>(pointer), bytes);
}
cudaError_t simt_cudaFree(void* pointer);
cudaError_t simt_cudaMallocHost(void** pointer, size_t bytes);
template <class T>
cudaError_t simt_cudaMallocHost(T** pointer, size_t bytes) {
  return simt_cudaMallocHost(reinterpret_cast<void**>(pointer), bytes);
}
cudaError_t simt_cudaFreeHost(void* pointer);
cudaError_t simt_cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t simt_cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                 cudaStream_t stream = nullptr);
cudaError_t simt_cudaMemset(void* pointer, int value, size_t bytes);
cudaError_t simt_cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t simt_cudaMemcpyToSymbolAddress(void* symbol, const void* src, size_t bytes, size_t offset);
cudaError_t simt_cudaMemcpyFromSymbolAddress(void* dst, const void* symbol, size_t bytes, size_t offset);
template <class T>
cudaError_t simt_cudaMemcpyToSymbol(T& symbol, const void* src, size_t bytes, size_t offset = 0,
                                    cudaMemcpyKind = cudaMemcpyHostToDevice) {
  if (offset + bytes > sizeof(T)) return cudaErrorInvalidValue;
  return simt_cudaMemcpyToSymbolAddress(static_cast<void*>(&symbol), src, bytes, offset);
}
template <class T>
cudaError_t simt_cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t bytes, size_t offset = 0,
                                      cudaMemcpyKind = cudaMemcpyDeviceToHost) {
  if (offset + bytes > sizeof(T)) return cudaErrorInvalidValue;
  return simt_cudaMemcpyFromSymbolAddress(dst, static_cast<const void*>(&symbol), bytes, offset);
}
cudaError_t simt_cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);

// Device and errors. Kernel faults are sticky (every later call returns them) until
// cudaDeviceReset(); other errors are returned once by cudaGetLastError().
cudaError_t simt_cudaDeviceSynchronize();
cudaError_t simt_cudaDeviceReset();
cudaError_t simt_cudaGetLastError();
cudaError_t simt_cudaPeekAtLastError();
const char* simt_cudaGetErrorString(cudaError_t error);
const char* simt_cudaGetErrorName(cudaError_t error);
cudaError_t simt_cudaGetDeviceCount(int* count);
cudaError_t simt_cudaGetDevice(int* device);
cudaError_t simt_cudaSetDevice(int device);
cudaError_t simt_cudaGetDeviceProperties(cudaDeviceProp* properties, int device);
cudaError_t simt_cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device);
cudaError_t simt_cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attribute, int value);
template <class... Params>
cudaError_t simt_cudaFuncSetAttribute(void (*kernel)(Params...), cudaFuncAttribute attribute, int value) {
  return simt_cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attribute, value);
}

// Streams and events: launches and copies run synchronously, so a stream is only a handle and an
// event records host time (cudaEventElapsedTime measures the emulator, not a GPU).
cudaError_t simt_cudaStreamCreate(cudaStream_t* stream);
cudaError_t simt_cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t simt_cudaStreamDestroy(cudaStream_t stream);
cudaError_t simt_cudaStreamSynchronize(cudaStream_t stream);
cudaError_t simt_cudaStreamQuery(cudaStream_t stream);
cudaError_t simt_cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
cudaError_t simt_cudaEventCreate(cudaEvent_t* event);
cudaError_t simt_cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t simt_cudaEventDestroy(cudaEvent_t event);
cudaError_t simt_cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t simt_cudaEventSynchronize(cudaEvent_t event);
cudaError_t simt_cudaEventQuery(cudaEvent_t event);
cudaError_t simt_cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end);
/// @endcond
