#pragma once
// The device level of the KV slot write (compiled for sim and cuda): device pointers in, the
// kernel queued on the default stream, no wait — what the resident model runner
// (runtime/model/device_runner.cu) calls on its resident cache; kv_write_slots_cuda()
// (cuda_append.h) is the host-tensor wrapper around the same kernel.
#include <cstdint>

#include "kernels/kv/cuda_kv_cache.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

// Token i's K and V — head_dim floats per KV head at k + i·token_stride + g·head_dim (and the
// same in v) — into slot slots[i] (−1: skipped) of layer @p layer of @p cache, fp32 or fp16
// (std::logic_error for another format). The slots are not checked here (the step plan was:
// check_step_plan); the kernel still skips a slot outside the pool. @p num_tokens ≤ 65535.
void kv_write_slots_device(DeviceKvCache& cache, const float* k, const float* v, int64_t token_stride,
                           const int64_t* slots, int64_t num_tokens, int64_t layer);

}  // namespace inferlab::INFERLAB_BACKEND_NS
