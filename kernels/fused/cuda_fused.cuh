#pragma once
// The device level of the chapter-05 CUDA prefill versions (compiled for sim and cuda): inputs
// and output already in device memory, work queued on a stream, no copy, no allocation, no
// wait — and, unlike chapter 02's device level, no score scratch at all: the L×L matrix never
// exists. This is what a model would call and what the benchmark times (cuda_timing.cu); the
// host-tensor wrappers of cuda_fused.h are thin layers over it.
#include "kernels/attention/cuda_prefill.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

// cuda/flash (cuda_flash.cu): fp32. Throws std::invalid_argument naming head_dim outside
// 1..kFlashMaxHeadDim (kernels/fused/fused.h).
void attention_flash_device(const DeviceAttention& problem, cudaStream_t stream);

// cuda/flash_tc (T = __half) and cuda/flash_tc_bf16 (T = __nv_bfloat16) (cuda_flash_tc.cu):
// 16-bit Q, K, V, fp32 O. Throws std::invalid_argument naming head_dim unless it is a multiple
// of 16 in 16..kFlashMaxHeadDim.
template <class T>
void attention_flash_tc_device(const DeviceAttentionOf<T>& problem, cudaStream_t stream);

}  // namespace inferlab::INFERLAB_BACKEND_NS
