#pragma once
// Chapter-08 CUDA fixtures for tests/wrong/wrong_ch08_quant_gpu.cpp: a small quantized matmul
// over Q8_0 / Q4_0 / Q4_1 blocks (the activations quantized by the real device quantizer,
// kernels/quant/cuda_quant_matmul.cuh), correct or with one deliberate mistake, behind
// quant_matmul_cpu()'s signature. Compiled for sim (and cuda) by inferlab_add_kernels.
#include "common/tensor.h"
#include "kernels/quant/quant_matmul.h"
#include "simt/simt.h"

namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch08 {

enum class QuantFixture {
  correct,            // one thread per (row, output), the blocks in order: the contract, another kernel
  lanes_over_blocks,  // a warp per (row, output): lane l chains the blocks b ≡ l (mod 32), then a
                      // shuffle tree adds the 32 partial sums — the usual GPU GEMV, another order
  no_min_term,        // Q4_1: acc = fma(d_w·d_x, Σ, acc) only — the m_w·s_x term dropped
  adjacent_nibbles,   // Q4: byte j holds values 2j (low nibble) and 2j + 1 (high) — ggml's order is j, j + 16
};

// y = x · Wᵀ as quant_matmul_cpu() with @p fixture's mistake (shapes assumed valid: fixtures check
// nothing).
void quant_matmul(QuantFixture fixture, const Tensor<float>& x, const quant::BlockMatrix& w, Tensor<float>& y);

}  // namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch08
