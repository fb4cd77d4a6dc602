// Chapter-05 wrong fixtures (see wrong_ch05_kernels.h). One thread per query row, 32 rows per
// block; the block stages 32 keys and values at a time in shared memory; each thread keeps its
// row's running max m, running sum l and output accumulator in registers. Simple on purpose:
// the mistakes are the point.
#include "tests/wrong/kernels/wrong_ch05_kernels.h"

#include <cmath>

#include "kernels/attention/cuda_prefill.cuh"

namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch05 {

namespace {

constexpr int kTile = 32;
constexpr int kMaxHeadDim = 128;

template <FlashFixture kFixture>
__global__ void flash_rows(const float* q, const float* k, const float* v, float* out, int seq_len, int head_dim,
                           int group_size, float scale, bool causal) {
  __shared__ float k_tile[kTile][kMaxHeadDim];
  __shared__ float v_tile[kTile][kMaxHeadDim];
  const int i0 = blockIdx.x * kTile, i = i0 + threadIdx.x, h = blockIdx.y, g = h / group_size;
  const float* q_row = q + (size_t(h) * seq_len + min(i, seq_len - 1)) * head_dim;
  float acc[kMaxHeadDim];
  for (int c = 0; c < head_dim; ++c) acc[c] = 0.0f;
  float m = -INFINITY, l = 0.0f;

  const int last_row = min(seq_len - 1, i0 + kTile - 1);
  for (int j0 = 0; causal ? (kFixture == FlashFixture::skip_diagonal_tile ? j0 < i0 : j0 <= last_row) : j0 < seq_len;
       j0 += kTile) {
    __syncthreads();  // everyone is done with the previous tile
    const int j_load = j0 + threadIdx.x;
    for (int c = 0; c < head_dim; ++c) {
      k_tile[threadIdx.x][c] = j_load < seq_len ? k[(size_t(g) * seq_len + j_load) * head_dim + c] : 0.0f;
      v_tile[threadIdx.x][c] = j_load < seq_len ? v[(size_t(g) * seq_len + j_load) * head_dim + c] : 0.0f;
    }
    __syncthreads();  // the tile is complete

    float s[kTile];
    float tile_max = -INFINITY;
    for (int jj = 0; jj < kTile; ++jj) {
      const int j = j0 + jj;
      const bool visible = j < seq_len && !(causal && (kFixture == FlashFixture::mask_diagonal_key ? j >= i : j > i));
      float dot = 0.0f;
      for (int c = 0; c < head_dim; ++c) dot += q_row[c] * k_tile[jj][c];
      s[jj] = visible ? dot * scale : -INFINITY;
      tile_max = fmaxf(tile_max, s[jj]);
    }
    const float m_new = fmaxf(m, tile_max);
    if (m_new == -INFINITY) continue;  // nothing visible yet
    const float alpha = __expf(m - m_new);
    float tile_sum = 0.0f;
    if (kFixture != FlashFixture::no_rescale_acc)
      for (int c = 0; c < head_dim; ++c) acc[c] *= alpha;
    for (int jj = 0; jj < kTile; ++jj) {
      const float p = __expf(s[jj] - m_new);
      tile_sum += p;
      for (int c = 0; c < head_dim; ++c) acc[c] += p * v_tile[jj][c];
    }
    l = (kFixture == FlashFixture::no_rescale_sum ? l : alpha * l) + tile_sum;
    m = m_new;
  }
  if (i < seq_len)
    for (int c = 0; c < head_dim; ++c) out[(size_t(h) * seq_len + i) * head_dim + c] = acc[c] / l;
}

template <FlashFixture kFixture>
void run(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal, Tensor<float>& out) {
  const DeviceAttentionCopy<float> device(q, k, v, causal, out);
  const AttentionShape& s = device.shape();
  if (s.head_dim > kMaxHeadDim) throw std::invalid_argument("wrong_ch05 fixtures: head_dim > 128");
  const DeviceAttention p = device.view();
  check_cuda(simt::launch(flash_rows<kFixture>, dim3(unsigned((s.seq_len + kTile - 1) / kTile), unsigned(s.num_heads)),
                          dim3(kTile), 0, nullptr, p.q, p.k, p.v, p.out, int(s.seq_len), int(s.head_dim),
                          int(s.group_size()), p.scale(), s.causal),
             "flash_rows");
  device.finish(out, "wrong_ch05::flash");
}

}  // namespace

void flash(FlashFixture fixture, const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
           Tensor<float>& out) {
  switch (fixture) {
    case FlashFixture::correct:
      return run<FlashFixture::correct>(q, k, v, causal, out);
    case FlashFixture::no_rescale_sum:
      return run<FlashFixture::no_rescale_sum>(q, k, v, causal, out);
    case FlashFixture::no_rescale_acc:
      return run<FlashFixture::no_rescale_acc>(q, k, v, causal, out);
    case FlashFixture::skip_diagonal_tile:
      return run<FlashFixture::skip_diagonal_tile>(q, k, v, causal, out);
    case FlashFixture::mask_diagonal_key:
      return run<FlashFixture::mask_diagonal_key>(q, k, v, causal, out);
  }
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::wrong_ch05
