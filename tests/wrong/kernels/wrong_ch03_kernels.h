#pragma once
// Chapter-03 CUDA fixtures for tests/wrong/wrong_ch03_decode.cpp: a small decode kernel (one
// warp per (query head, sequence)), correct or with one deliberate mistake, behind the DecodeFn
// signature (kernels/registry.h). Compiled for sim (and cuda) by inferlab_add_kernels.
#include "kernels/kv/kv_cache.h"
#include "simt/simt.h"

namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch03 {

enum class DecodeFixture {
  correct,
  one_past_end,  // keys 0..lengths[b] (≤ instead of <): reads the first unused, poisoned slot
  gqa_modulo,    // KV head h % num_kv_heads instead of h / group_size: ignores the GQA grouping
};

// One decode step (fp32 or fp16 cache) with @p fixture's mistake.
void decode(DecodeFixture fixture, const Tensor<float>& q, const KvCache& cache, Tensor<float>& out);

}  // namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch03
