#pragma once
// Chapter-08 CUDA fixtures for tests/wrong/wrong_ch08_gemv.cpp: exercise 8.4's GEMV (y = W·x, Q8_0
// weights and activations, one warp per output row, __dp4a block sums), correct or with one
// deliberate mistake, behind the GemvFn signature of tests/08-real-model/student_check.h.
// Compiled for sim (and cuda) by inferlab_add_kernels.
#include <cstdint>
#include <span>

#include "common/tensor.h"
#include "kernels/quant/block_quant.h"
#include "simt/simt.h"

namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch08 {

enum class GemvFixture {
  correct,
  grid_rounds_down,     // ⌊out / rows_per_block⌋ grid blocks: the rows of the last, partial block are never written
  lanes_skip_tail,      // lanes stop at the last multiple of 32 blocks: a row's tail blocks are left out
  no_activation_scale,  // d_w · Σ without d_x
  unsynchronized_atomics,  // lane 0 zeroes y[row] while the other lanes atomicAdd into it: a race
};

// y [out_features] = W [out_features, 32·x.size()] · x, with @p fixture's mistake.
void gemv(GemvFixture fixture, std::span<const quant::BlockQ8_0> w, int64_t out_features,
          std::span<const quant::BlockQ8_0> x, Tensor<float>& y, int rows_per_block);

}  // namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch08
