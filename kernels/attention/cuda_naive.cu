// cuda/naive — chapter 02, step 1: one CUDA thread per output element, three kernels.
//
// Version ladder (prefill attention on the GPU; speed-ups measured by chapters/02-gpu-prefill/bench.cpp):
//   cuda/naive   this file: S = Q·Kᵀ (a thread per score), row softmax (a thread per row), O = P·V
//                (a thread per output element). Every operand comes from global memory.
//   cuda/tiled   cuda_tiled.cu: Q·Kᵀ and P·V from shared-memory tiles; softmax with warp shuffles.
//   cuda/cublas  cuda_cublas.cu: the two products as cuBLAS strided-batched GEMMs (fp32, fp16, bf16).
//   cuda/flash   chapter 05: fused, the L×L matrix never reaches memory.
//
// Two entry points: attention_naive_device() queues the three kernels on device-resident data
// with a caller-provided score buffer (what the benchmark times); attention_cuda_naive() is the
// host-tensor wrapper that tests and the CLI call (copy in, run, copy out; cuda_prefill.cuh).
//
// Launch shapes (L = seq_len, d = head_dim, H = num_heads):
//   scores_naive  grid (⌈L/16⌉, ⌈L/16⌉, H), block (16, 16): thread (x, y) of block (bx, by, h)
//                 computes S[h][by·16+y][bx·16+x].
//   softmax_naive grid ⌈H·L/128⌉, block 128: one thread per score row.
//   pv_naive      grid (⌈d/16⌉, ⌈L/16⌉, H), block (16, 16): one thread per O[h][i][c].
// Cost per head: 4·L²·d FLOPs. Traffic: each score is computed from 2·d loads (no reuse across
// threads except through caches); the L×L matrix is written, read + written by softmax, and read
// by P·V: the "unfused" model of common/cost.h.
#include <cmath>

#include "kernels/attention/cuda_attention.h"
#include "kernels/attention/cuda_prefill.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

constexpr int kTile = 16;

// S[h][i][j] = (q_i · k_j) / √d, or -inf where the causal mask hides key j from query i.
__global__ void scores_naive(const float* q, const float* k, float* scores, int seq_len, int head_dim,
                             int group_size, float scale, bool causal) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;  // key
  const int i = blockIdx.y * blockDim.y + threadIdx.y;  // query
  const int h = blockIdx.z;
  if (i >= seq_len || j >= seq_len) return;
  const int g = h / group_size;  // the KV head shared by this query head's group (GQA)
  const float* q_row = q + (size_t(h) * seq_len + i) * head_dim;
  const float* k_row = k + (size_t(g) * seq_len + j) * head_dim;
  float dot = 0.0f;
  for (int c = 0; c < head_dim; ++c) dot += q_row[c] * k_row[c];
  scores[(size_t(h) * seq_len + i) * seq_len + j] = (causal && j > i) ? -INFINITY : dot * scale;
}

// One thread normalises one row: max, then exp and sum, then divide (three passes).
__global__ void softmax_naive(float* scores, int rows, int seq_len) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  float* s = scores + size_t(row) * seq_len;
  float max_score = -INFINITY;
  for (int j = 0; j < seq_len; ++j) max_score = fmaxf(max_score, s[j]);
  float sum = 0.0f;
  for (int j = 0; j < seq_len; ++j) {
    s[j] = expf(s[j] - max_score);
    sum += s[j];
  }
  const float inv_sum = 1.0f / sum;
  for (int j = 0; j < seq_len; ++j) s[j] *= inv_sum;
}

// O[h][i][c] = Σ_j P[h][i][j] · V[g][j][c].
__global__ void pv_naive(const float* probs, const float* v, float* out, int seq_len, int head_dim,
                         int group_size) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  const int h = blockIdx.z;
  if (i >= seq_len || c >= head_dim) return;
  const int g = h / group_size;
  const float* p_row = probs + (size_t(h) * seq_len + i) * seq_len;
  const float* v_head = v + size_t(g) * seq_len * head_dim;
  float acc = 0.0f;
  for (int j = 0; j < seq_len; ++j) acc += p_row[j] * v_head[size_t(j) * head_dim + c];
  out[(size_t(h) * seq_len + i) * head_dim + c] = acc;
}

}  // namespace

void attention_naive_device(const DeviceAttention& problem, float* scores, cudaStream_t stream) {
  const AttentionShape& s = problem.shape;
  const int L = int(s.seq_len), d = int(s.head_dim), H = int(s.num_heads), group = int(s.group_size());
  const dim3 tile(kTile, kTile);
  check_cuda(simt::launch(scores_naive, dim3(blocks_for(L, kTile), blocks_for(L, kTile), H), tile, 0, stream, problem.q,
                          problem.k, scores, L, d, group, problem.scale(), s.causal),
             "scores_naive");
  check_cuda(simt::launch(softmax_naive, dim3(blocks_for(int64_t(H) * L, 128)), dim3(128), 0, stream, scores, H * L, L),
             "softmax_naive");
  check_cuda(simt::launch(pv_naive, dim3(blocks_for(d, kTile), blocks_for(L, kTile), H), tile, 0, stream,
                          static_cast<const float*>(scores), problem.v, problem.out, L, d, group),
             "pv_naive");
}

void attention_cuda_naive(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                          Tensor<float>& out) {
  const DeviceAttentionCopy<float> device(q, k, v, causal, out);
  DeviceBuffer<float> scores(score_elements(device.shape()));
  attention_naive_device(device.view(), scores.data(), nullptr);
  device.finish(out, "cuda/naive");
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
