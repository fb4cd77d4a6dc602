#pragma once
// Chapter-05 CUDA fixtures for tests/wrong/wrong_ch05_gpu.cpp: a small fused prefill kernel
// (one thread per query row, K/V tiles of 32 keys in shared memory, online softmax in
// registers), correct or with one deliberate mistake, behind the AttentionFn signature
// (kernels/registry.h). Compiled for sim (and cuda) by inferlab_add_kernels.
#include "common/tensor.h"
#include "simt/simt.h"

namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch05 {

enum class FlashFixture {
  correct,
  no_rescale_sum,      // l += tile_sum without multiplying l by exp(m_old − m_new) first
  no_rescale_acc,      // the output accumulator is not multiplied by exp(m_old − m_new)
  skip_diagonal_tile,  // causal: key tiles j0 < i0 only (< where ≤ belongs): the diagonal tile is skipped
  mask_diagonal_key,   // causal: keys j < i visible (< where ≤ belongs): a query no longer sees itself
};

// Fused prefill attention (fp32, head_dim ≤ 128) with @p fixture's mistake; layouts as in
// kernels/attention/attention.h.
void flash(FlashFixture fixture, const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
           Tensor<float>& out);

}  // namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch05
