#pragma once
// Chapter-02 warm-up fixtures for tests/wrong/wrong_ch02_warmup.cpp: the three warm-up kernels
// (W1 scale-and-add, W2 vector sum, W3 tiled transpose), each correct or with one deliberate
// mistake, behind the exercises' host-tensor signatures. Compiled for sim (and cuda) by
// inferlab_add_kernels.
#include "common/tensor.h"
#include "simt/simt.h"

namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch02_warmup {

enum class ScaleAddFixture {
  correct,
  no_bounds_check,  // one thread per element on a ⌈⌉ grid with no `if (r < rows && c < cols)`
  no_grid_stride,   // one element per thread on the capped 4 × 4 grid: the rest stays unwritten
};
void scale_add(ScaleAddFixture fixture, const Tensor<float>& x, const Tensor<float>& row_scale,
               const Tensor<float>& col_bias, Tensor<float>& out);

enum class SumFixture {
  correct,
  missing_tree_barrier,   // no __syncthreads() between the tree's steps (barrier 2)
  missing_store_barrier,  // no __syncthreads() between writing the partials and the tree (barrier 1)
  tree_stops_at_64,       // the tree stops at s = 64: partial[32 … 63] is never added
};
void vector_sum(SumFixture fixture, const Tensor<float>& x, Tensor<float>& sum, int threads_per_block);

enum class TransposeFixture {
  correct,
  missing_barrier,   // no __syncthreads() between filling the tile and reading its columns
  unchecked_read,    // the tile is loaded with no bounds check: reads past the end of in
  blocks_unswapped,  // writes the tile at (by·32 + i, bx·32 + x): the block indices not swapped
};
void transpose(TransposeFixture fixture, const Tensor<float>& in, Tensor<float>& out);

}  // namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch02_warmup
