#pragma once
// Chapter-02 CUDA fixtures for tests/wrong/wrong_ch02_gpu.cpp: the three exercise kernels
// (scores, row softmax, tiled GEMM), each correct or with one deliberate mistake, behind the
// exercises' host-tensor signatures. Compiled for sim (and cuda) by inferlab_add_kernels.
#include "common/tensor.h"
#include "simt/simt.h"

namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch02 {

enum class ScoresFixture {
  correct,
  gqa_modulo,     // KV head h % num_kv_heads instead of h / group_size
  mask_diagonal,  // masks j >= i: the diagonal (a query's own key) is hidden too
};
void scores(ScoresFixture fixture, const Tensor<float>& q, const Tensor<float>& k, bool causal, Tensor<float>& scores);

enum class SoftmaxFixture {
  correct,
  offsets_from_8,  // the warp butterfly starts at offset 8: lanes 0-15 and 16-31 never meet
  no_cross_warp,   // each warp uses its own max and sum: no step through shared memory
};
void softmax(SoftmaxFixture fixture, const Tensor<float>& scores, Tensor<float>& probs, int threads_per_block);

enum class GemmFixture {
  correct,
  missing_load_barrier,   // no __syncthreads() between loading the tiles and using them
  missing_reuse_barrier,  // no __syncthreads() before the next step overwrites the tiles
  k_tiles_floor,          // K / 16 steps instead of ⌈K / 16⌉: the last partial K tile is dropped
  grid_floor,             // grid (N / 16, M / 16) (at least 1) instead of ⌈…⌉: C's edge tiles stay unwritten
  barrier_in_branch,      // the tile loop (with its barriers) inside `if (row < m && col < n)`
};
void gemm(GemmFixture fixture, const Tensor<float>& a, const Tensor<float>& b, Tensor<float>& c);

}  // namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch02
