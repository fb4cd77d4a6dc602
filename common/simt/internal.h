#pragma once
/// @file internal.h
/// Shared state of the emulator's own sources (not for kernels or tests).

#include <cstddef>
#include <cstdint>
#include <string>

#include "simt/simt.h"

/// @cond SIMT_DETAIL
namespace simt::detail {

// Errors. A sticky error (a kernel fault) is returned by every later call until
// cudaDeviceReset(); a non-sticky one by the next cudaGetLastError() only.
cudaError_t sticky_error();
cudaError_t set_error(cudaError_t error, const std::string& message, bool sticky);
void reset_errors();

// Whether [address, address + bytes) lies in memory from cudaMallocHost (which kernels may read).
bool in_pinned_host_memory(uintptr_t address, size_t bytes);

// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes).
int max_dynamic_shared_bytes(const void* kernel);
void set_max_dynamic_shared_bytes(const void* kernel, int bytes);

// Limits of the fake device (an sm_80-like GPU; see cudaGetDeviceProperties).
inline constexpr int kMaxThreadsPerBlock = 1024;
inline constexpr int kDefaultSharedBytes = 48 * 1024;
inline constexpr int kMaxSharedBytesOptin = 227 * 1024;

}  // namespace simt::detail
/// @endcond
