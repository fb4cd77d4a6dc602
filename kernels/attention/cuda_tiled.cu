// cuda/tiled — chapter 02, step 2: shared-memory tiling and a warp-shuffle softmax.
// (Version ladder: see cuda_naive.cu.)
//
// Q·Kᵀ and P·V are matrix products. In cuda/naive every thread streams two whole rows from
// global memory; here a 16×16 block first stages a 16×16 tile of each operand in shared memory
// (one global load per element per block), then every thread reuses the tile 16 times. Global
// traffic of a product falls by the tile width, 16×.
//
// Entry points as in cuda_naive.cu: attention_tiled_device() on device-resident data with a
// caller-provided score buffer; attention_cuda_tiled() the host-tensor wrapper over it.
//
// Launch shapes (L = seq_len, d = head_dim, H = num_heads):
//   qk_tiled           grid (⌈L/16⌉, ⌈L/16⌉, H), block (16, 16); thread (x, y) computes
//                      S[h][tile_i·16+y][tile_j·16+x]. Tiles entirely above the diagonal are
//                      skipped under the causal mask.
//   softmax_rows_warp  grid H·L, block 128 (softmax_warp.cuh).
//   pv_tiled           grid (⌈d/16⌉, ⌈L/16⌉, H), block (16, 16); thread (x, y) computes
//                      O[h][tile_i·16+y][tile_c·16+x]; under the mask it stops at the diagonal.
// Edges: tiles past L or d are loaded as zeros and their outputs not written, so any L and d work.
#include <cmath>

#include "kernels/attention/cuda_attention.h"
#include "kernels/attention/cuda_prefill.cuh"
#include "kernels/primitives/softmax_warp.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

constexpr int kTile = 16;

__global__ void qk_tiled(const float* q, const float* k, float* scores, int seq_len, int head_dim, int group_size,
                         float scale, bool causal) {
  // +1 column of padding: the inner loop reads k_tile column-wise; without it the 16 threads of
  // a row would hit the same shared-memory bank.
  __shared__ float q_tile[kTile][kTile + 1];
  __shared__ float k_tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int i0 = blockIdx.y * kTile, j0 = blockIdx.x * kTile;
  const int h = blockIdx.z, g = h / group_size;
  const int i = i0 + ty, j = j0 + tx;
  float* s_out = scores + size_t(h) * seq_len * seq_len;

  if (causal && j0 > i0 + kTile - 1) {  // the whole tile is above the diagonal: masked
    if (i < seq_len && j < seq_len) s_out[size_t(i) * seq_len + j] = -INFINITY;
    return;  // uniform across the block: no thread is left waiting at a barrier
  }
  const float* q_head = q + size_t(h) * seq_len * head_dim;
  const float* k_head = k + size_t(g) * seq_len * head_dim;
  float dot = 0.0f;
  for (int c0 = 0; c0 < head_dim; c0 += kTile) {
    // Thread (tx, ty) loads Q[i0+ty][c0+tx] and K[j0+ty][c0+tx]; out-of-range elements are 0.
    q_tile[ty][tx] = (i0 + ty < seq_len && c0 + tx < head_dim) ? q_head[size_t(i0 + ty) * head_dim + c0 + tx] : 0.0f;
    k_tile[ty][tx] = (j0 + ty < seq_len && c0 + tx < head_dim) ? k_head[size_t(j0 + ty) * head_dim + c0 + tx] : 0.0f;
    __syncthreads();  // both tiles are complete before any thread reads them
    for (int t = 0; t < kTile; ++t) dot += q_tile[ty][t] * k_tile[tx][t];
    __syncthreads();  // everyone is done reading before the next iteration overwrites the tiles
  }
  if (i < seq_len && j < seq_len) s_out[size_t(i) * seq_len + j] = (causal && j > i) ? -INFINITY : dot * scale;
}

__global__ void pv_tiled(const float* probs, const float* v, float* out, int seq_len, int head_dim, int group_size,
                         bool causal) {
  __shared__ float p_tile[kTile][kTile + 1];
  __shared__ float v_tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int i0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
  const int h = blockIdx.z, g = h / group_size;
  const float* p_head = probs + size_t(h) * seq_len * seq_len;
  const float* v_head = v + size_t(g) * seq_len * head_dim;
  // Under the mask, rows i0..i0+15 have zero probability beyond key i0+15: stop there.
  const int key_end = (causal && i0 + kTile < seq_len) ? i0 + kTile : seq_len;
  float acc = 0.0f;
  for (int j0 = 0; j0 < key_end; j0 += kTile) {
    p_tile[ty][tx] = (i0 + ty < seq_len && j0 + tx < seq_len) ? p_head[size_t(i0 + ty) * seq_len + j0 + tx] : 0.0f;
    v_tile[ty][tx] = (j0 + ty < seq_len && c0 + tx < head_dim) ? v_head[size_t(j0 + ty) * head_dim + c0 + tx] : 0.0f;
    __syncthreads();  // both tiles are complete before any thread reads them
    for (int t = 0; t < kTile; ++t) acc += p_tile[ty][t] * v_tile[t][tx];
    __syncthreads();  // everyone is done reading before the tiles are overwritten
  }
  const int i = i0 + ty, c = c0 + tx;
  if (i < seq_len && c < head_dim) out[(size_t(h) * seq_len + i) * head_dim + c] = acc;
}

}  // namespace

void attention_tiled_device(const DeviceAttention& problem, float* scores, cudaStream_t stream) {
  const AttentionShape& s = problem.shape;
  const int L = int(s.seq_len), d = int(s.head_dim), H = int(s.num_heads), group = int(s.group_size());
  const dim3 tile(kTile, kTile);
  check_cuda(simt::launch(qk_tiled, dim3(blocks_for(L, kTile), blocks_for(L, kTile), H), tile, 0, stream, problem.q,
                          problem.k, scores, L, d, group, problem.scale(), s.causal),
             "qk_tiled");
  // In place: each block reads its row completely (two reductions) before writing it.
  check_cuda(simt::launch(softmax_rows_warp<float>, dim3(H * L), dim3(kSoftmaxThreads), 0, stream,
                          static_cast<const float*>(scores), scores, L, L, s.causal),
             "softmax_rows_warp");
  check_cuda(simt::launch(pv_tiled, dim3(blocks_for(d, kTile), blocks_for(L, kTile), H), tile, 0, stream,
                          static_cast<const float*>(scores), problem.v, problem.out, L, d, group, s.causal),
             "pv_tiled");
}

void attention_cuda_tiled(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                          Tensor<float>& out) {
  const DeviceAttentionCopy<float> device(q, k, v, causal, out);
  DeviceBuffer<float> scores(score_elements(device.shape()));
  attention_tiled_device(device.view(), scores.data(), nullptr);
  device.finish(out, "cuda/tiled");
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
