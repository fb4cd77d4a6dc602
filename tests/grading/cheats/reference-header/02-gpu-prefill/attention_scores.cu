// Exercise 2.1 — attention scores, one thread per score. See ch02.h for the task.
#include <cmath>

#include "02-gpu-prefill/ch02.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

constexpr int kTile = 16;  // the block is kTile × kTile threads

// scores[h][i][j] = (q[h][i] · k[g][j]) * scale with g = h / group_size, or −∞ when causal and
// j > i. Thread (x, y) of block (bx, by, h): query i = by·16 + y, key j = bx·16 + x.
__global__ void scores_kernel(const float* q, const float* k, float* scores, int seq_len, int head_dim, int group_size,
                              float scale, bool causal) {
  // TODO(student): compute i, j and h from blockIdx/threadIdx; leave if i or j is past seq_len;
  // write -INFINITY for a masked score, otherwise the dot product of row i of head h of q with
  // row j of head g of k, times scale. (roughly 10 lines)
}

}  // namespace

void attention_scores(const Tensor<float>& q, const Tensor<float>& k, bool causal, Tensor<float>& scores) {
  require(q.rank() == 3, "q.shape", to_string(q.shape()), "must be [num_heads, seq_len, head_dim]");
  require(k.rank() == 3, "k.shape", to_string(k.shape()), "must be [num_kv_heads, seq_len, head_dim]");
  const int64_t num_heads = q.dim(0), seq_len = q.dim(1), head_dim = q.dim(2), num_kv_heads = k.dim(0);
  require(k.dim(1) == seq_len && k.dim(2) == head_dim, "k.shape", to_string(k.shape()),
          "must be [num_kv_heads, seq_len, head_dim] with q's seq_len and head_dim");
  require(num_kv_heads > 0 && num_heads % num_kv_heads == 0, "num_kv_heads", num_kv_heads, "must divide num_heads");
  require(scores.shape() == Shape{num_heads, seq_len, seq_len}, "scores.shape", to_string(scores.shape()),
          "must be [num_heads, seq_len, seq_len]");

  throw NotImplemented("attention_scores");  // TODO(student): delete this line once scores_kernel is written

  const DeviceBuffer<float> d_q(q), d_k(k);
  auto d_scores = DeviceBuffer<float>::poisoned(scores.size());
  const int group_size = int(num_heads / num_kv_heads);
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const dim3 grid(blocks_for(seq_len, kTile), blocks_for(seq_len, kTile), unsigned(num_heads));
  check_cuda(simt::launch(scores_kernel, grid, dim3(kTile, kTile), 0, nullptr, d_q.data(), d_k.data(), d_scores.data(),
                          int(seq_len), int(head_dim), group_size, scale, causal),
             "scores_kernel");
  check_cuda(cudaDeviceSynchronize(), "scores_kernel");
  d_scores.download(scores);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
