// cuda/flash — chapter 05, step 1: FlashAttention-style fused prefill on CUDA cores (fp32).
//
// Version ladder (prefill on a GPU):
//   cuda/naive, cuda/tiled, cuda/cublas (chapter 02)  S = Q·Kᵀ written to memory (H·L² floats),
//                                                      a softmax pass, then P·V: ~4·L² elements
//                                                      of traffic per head besides Q, K, V, O.
//   cuda/flash (this file)                             one kernel; S lives one Br×Bc tile at a
//                                                      time in registers and shared memory: only
//                                                      Q, K, V and O touch DRAM, AI = L/2 (fp16).
//   cuda/flash_tc (cuda_flash_tc.cu)                   the same loop with both products on
//                                                      tensor cores (WMMA), fp16/bf16 inputs.
//
// The algorithm (names from the FlashAttention papers). A block owns Br = 32 query rows of one
// head and walks the keys in tiles of Bc = 32. For each row it keeps, in registers:
//   m  the largest scaled score seen so far,
//   l  the sum of exp(score − m) over the keys seen so far,
//   acc  the unnormalised output Σ exp(score − m)·V[key]  (head_dim values).
// When a tile raises the max from m_old to m_new, everything summed so far was relative to the
// old max: multiply l and acc by α = exp(m_old − m_new), then add the tile. After the last tile
// O = acc / l — the exact softmax, never holding more than one tile of scores.
//
// Launch: grid (⌈L/Br⌉, num_heads), block 128 = 4 warps; warp w owns rows w·8 … w·8+7 of the
// block's tile; in the score step lane j owns key j of the K tile (Bc = 32 = one key per lane),
// so a row's max and sum over the tile are warp shuffles (no shared memory, no block barrier).
// In P·V lane j owns output columns j, j+32, j+64, j+96.
// Dynamic shared memory (fp32): the Q tile Br×d, the K tile Bc×(d|1) (an odd row stride: the 32
// lanes read 32 different rows of one column without bank conflicts), the V tile Bc×d, the P
// tile Br×Bc: 53 KiB at d = 128 (raised with cudaFuncSetAttribute above 48 KiB).
// Causal: key tiles wholly above the diagonal are skipped (the loop stops at the block's last
// row); in the diagonal tile, keys after the query are masked (score −∞, weight 0).
// GQA: query head h reads KV head h / group_size. Rows past L and keys past L are zero-padded in
// shared memory; padded keys are masked, padded rows are not written. Any L, head_dim ≤ 128.
//
// FLOPs 4·L²·d per head (dense); DRAM bytes (fp32) 4·(2·L·d per query head + 2·L·d per KV
// head) — plus K and V re-read once per query tile, served mostly from L2.
#include <cmath>
#include <string>

#include "common/ceil_div.h"
#include "kernels/fused/cuda_fused.cuh"
#include "kernels/fused/cuda_fused.h"
#include "kernels/fused/fused.h"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

constexpr int kBr = 32;                     // query rows per block
constexpr int kBc = 32;                     // keys per tile: one per lane of a warp
constexpr int kWarps = 4;                   // warps per block
constexpr int kRowsPerWarp = kBr / kWarps;  // query rows each warp owns
constexpr int kThreads = kWarps * 32;
constexpr int kMaxChunks = int(kFlashMaxHeadDim) / 32;  // output columns per lane at the largest head_dim

// The max (kMax) or sum of @p value over the 32 lanes of the warp; every lane gets the result.
template <bool kMax>
__device__ inline float warp_allreduce(float value) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = kMax ? fmaxf(value, other) : value + other;
  }
  return value;
}

__host__ __device__ inline int k_row_stride(int head_dim) {
  return head_dim | 1;
}

size_t flash_shared_bytes(int head_dim) {
  return sizeof(float) * size_t(kBr * head_dim + kBc * k_row_stride(head_dim) + kBc * head_dim + kBr * kBc);
}

// kChunks = ⌈head_dim / 32⌉ output columns per lane, a compile-time count so that acc stays in
// registers.
template <int kChunks>
__global__ void flash_forward(const float* q, const float* k, const float* v, float* out, int seq_len, int head_dim,
                              int group_size, float scale, bool causal) {
  SIMT_DYNAMIC_SHARED(float, shared);
  const int d = head_dim, ks = k_row_stride(head_dim);
  float* q_tile = shared;             // [kBr][d]
  float* k_tile = q_tile + kBr * d;   // [kBc][ks]
  float* v_tile = k_tile + kBc * ks;  // [kBc][d]
  float* p_tile = v_tile + kBc * d;   // [kBr][kBc]: this tile's softmax weights exp(s − m)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int i0 = blockIdx.x * kBr, h = blockIdx.y, g = h / group_size;
  const int row0 = warp * kRowsPerWarp;  // the warp's first row within the tile
  const float* q_head = q + size_t(h) * seq_len * d;
  const float* k_head = k + size_t(g) * seq_len * d;
  const float* v_head = v + size_t(g) * seq_len * d;

  for (int e = threadIdx.x; e < kBr * d; e += kThreads) {
    const int r = e / d, c = e % d;
    q_tile[e] = i0 + r < seq_len ? q_head[size_t(i0 + r) * d + c] : 0.0f;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kChunks];
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
    for (int t = 0; t < kChunks; ++t) acc[r][t] = 0.0f;
  }

  // Causal: the block's last row is i0 + Br − 1, so no key from i0 + Br on is visible to it.
  const int key_end = causal ? min(seq_len, i0 + kBr) : seq_len;
  for (int j0 = 0; j0 < key_end; j0 += kBc) {
    __syncthreads();  // every thread is done with the previous K/V tile before it is overwritten
    for (int e = threadIdx.x; e < kBc * d; e += kThreads) {
      const int r = e / d, c = e % d;
      const bool inside = j0 + r < seq_len;
      k_tile[r * ks + c] = inside ? k_head[size_t(j0 + r) * d + c] : 0.0f;
      v_tile[e] = inside ? v_head[size_t(j0 + r) * d + c] : 0.0f;
    }
    __syncthreads();  // the Q, K and V tiles are complete before anyone reads them

    // Scores of the warp's rows against key j = j0 + lane.
    float s[kRowsPerWarp] = {};
    for (int c = 0; c < d; ++c) {
      const float key = k_tile[lane * ks + c];
      for (int r = 0; r < kRowsPerWarp; ++r) s[r] += q_tile[(row0 + r) * d + c] * key;
    }
    const int j = j0 + lane;
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int i = i0 + row0 + r;
      const bool visible = j < seq_len && !(causal && j > i);
      const float score = visible ? s[r] * scale : -INFINITY;
      // Key j0 is visible to every row of the block (j0 ≤ i0 ≤ i under the mask), so m_new is
      // finite and no exp(−∞ − (−∞)) arises.
      const float m_new = fmaxf(m[r], warp_allreduce<true>(score));
      const float alpha = __expf(m[r] - m_new);  // 0 on the first tile (m = −∞)
      const float p = __expf(score - m_new);     // 0 for a masked key
      l[r] = alpha * l[r] + warp_allreduce<false>(p);
      for (int t = 0; t < kChunks; ++t) acc[r][t] *= alpha;
      m[r] = m_new;
      p_tile[(row0 + r) * kBc + lane] = p;
    }
    __syncwarp();  // the warp's P rows are written before its lanes read each other's weights

    // acc += P·V for the warp's rows; lane owns columns lane + 32·t.
    for (int jj = 0; jj < kBc; ++jj) {
      float value[kChunks];
      for (int t = 0; t < kChunks; ++t) {
        const int c = lane + 32 * t;
        value[t] = c < d ? v_tile[jj * d + c] : 0.0f;
      }
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float p = p_tile[(row0 + r) * kBc + jj];
        for (int t = 0; t < kChunks; ++t) acc[r][t] += p * value[t];
      }
    }
  }

  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int i = i0 + row0 + r;
    if (i >= seq_len) continue;
    const float inv_l = 1.0f / l[r];
    for (int t = 0; t < kChunks; ++t) {
      const int c = lane + 32 * t;
      if (c < d) out[(size_t(h) * seq_len + i) * d + c] = acc[r][t] * inv_l;
    }
  }
}

template <int kChunks>
void launch_flash(const DeviceAttention& problem, cudaStream_t stream) {
  const AttentionShape& s = problem.shape;
  const int d = int(s.head_dim);
  const size_t shared_bytes = flash_shared_bytes(d);
  auto kernel = flash_forward<kChunks>;
  if (shared_bytes > 48 * 1024)
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)),
               "cudaFuncSetAttribute (flash_forward)");
  const dim3 grid(unsigned(ceil_div(s.seq_len, kBr)), unsigned(s.num_heads));
  check_cuda(simt::launch(kernel, grid, dim3(kThreads), shared_bytes, stream, problem.q, problem.k, problem.v,
                          problem.out, int(s.seq_len), d, int(s.group_size()), problem.scale(), s.causal),
             "flash_forward");
}

}  // namespace

void attention_flash_device(const DeviceAttention& problem, cudaStream_t stream) {
  require_flash_head_dim(problem.shape.head_dim);
  static_assert(kMaxChunks == 4, "launch_flash covers 1..4 chunks of 32 columns");
  switch ((problem.shape.head_dim + 31) / 32) {
    case 1:
      return launch_flash<1>(problem, stream);
    case 2:
      return launch_flash<2>(problem, stream);
    case 3:
      return launch_flash<3>(problem, stream);
    default:
      return launch_flash<4>(problem, stream);
  }
}

void attention_cuda_flash(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                          Tensor<float>& out) {
  const DeviceAttentionCopy<float> device(q, k, v, causal, out);
  attention_flash_device(device.view(), nullptr);
  device.finish(out, "cuda/flash");
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
