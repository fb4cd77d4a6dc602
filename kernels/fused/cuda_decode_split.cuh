#pragma once
// The device level of cuda/decode_split (chapter 05; split_kv.h explains the algorithm): the
// cache, queries, output and the partials' scratch already in device memory, two kernels queued
// on a stream, no copy, no allocation, no wait — what a model calls every step and what a
// device-level benchmark times. The host-tensor wrapper is decode_split_cuda (cuda_decode_split.h).
#include <cstdint>

#include "kernels/decode/cuda_decode.cuh"
#include "kernels/fused/split_kv.h"

namespace inferlab::INFERLAB_BACKEND_NS {

// The partials of one step in device memory, for problem.shape and num_splits splits:
// acc [batch][num_heads][num_splits][head_dim], max and sum [batch][num_heads][num_splits].
struct DeviceSplitPartials {
  float* acc = nullptr;
  float* max = nullptr;
  float* sum = nullptr;
  int num_splits = 1;
};

// The longest split the partial kernel holds: its scores live in shared memory (32 KiB).
constexpr int64_t kMaxSplitTokens = 8192;

// cuda/decode_split's policy on the current device: 4 blocks per SM, splits of at least 256
// tokens, at most kMaxSplitTokens.
SplitPolicy cuda_split_policy();

// Queues the partial kernel (grid num_heads × batch × S, one block per (head, sequence, split))
// and the reduce kernel (grid num_heads × batch) on @p stream. Throws std::invalid_argument when
// head_dim > 512, num_splits < 1 or a split of ⌈max_length / S⌉ keys exceeds kMaxSplitTokens.
template <class T, class Layout = ContiguousLayout>
void decode_split_device(const DeviceDecode<T, float, Layout>& problem, const DeviceSplitPartials& partials,
                         cudaStream_t stream);

}  // namespace inferlab::INFERLAB_BACKEND_NS
