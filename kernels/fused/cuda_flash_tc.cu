// cuda/flash_tc (fp16) and cuda/flash_tc_bf16 — chapter 05, step 2: the FlashAttention loop of
// cuda_flash.cu with both matrix products on tensor cores.
//
// Tensor cores multiply small tiles in one warp-wide instruction. This kernel reaches them
// through WMMA (CUDA's <mma.h>, via simt/wmma.h): 16×16×16 fragments, 16-bit inputs, fp32
// accumulators, loaded from and stored to shared memory. It compiles for sm_80 (A100) and sm_90
// (H100/H200) — WMMA exists from sm_70 — and nvcc turns it into mma.sync instructions on both.
// Why WMMA and not the lower levels: WMMA's load/mma/store calls show the structure of the
// algorithm and nothing else, which is what a lesson needs. Fast kernels go lower:
// FlashAttention-2 issues mma.sync (PTX) directly and keeps the scores and the output in
// registers, relying on the documented fragment layout of those instructions (WMMA's layout is
// unspecified, so this kernel must round-trip through shared memory); FlashAttention-3 on H100
// uses wgmma (asynchronous warpgroup MMA reading operands straight from shared memory), TMA
// copies and warp specialisation, which is how it reaches 650–740 TFLOP/s where FA-2 reaches
// ~335. Those do not exist before sm_90 and are far from teaching size.
//
// The algorithm is cuda_flash.cu's (running max m, running sum l, output rescaled by
// exp(m_old − m_new)); what changes is who computes what:
//   block      Br = 64 query rows of one head, 4 warps; key tiles of Bc = 64;
//   warp w     rows w·16 … w·16+15: S_w = Q_w·K_tileᵀ (4 × d/16 fragment products) into shared
//              memory (fp32), then, after the softmax, O_w += P_w·V_tile (d/16 × 4 products)
//              with O_w itself kept in shared memory (fp32) and loaded into the accumulator;
//   softmax    two lanes per row (lane r and r+16 take half the tile's keys each, one shuffle
//              joins them): mask, tile max, α, P = exp(S − m_new) stored as 16-bit for the second
//              product, l updated, the row of O_w multiplied by α.
// Everything the lanes exchange goes through shared memory, with a __syncwarp() between a
// fragment store and the reads of other lanes (a store is not a barrier after the fact).
// Layout: 16-bit tiles with rows padded by 8 elements, fp32 tiles by 4 (bank spread; WMMA wants
// 32-byte aligned tile pointers and leading dimensions that are multiples of 16 bytes).
// Dynamic shared memory at d = 128: 110 KiB (raised with cudaFuncSetAttribute).
// head_dim must be a multiple of 16 (the fragments' K), up to kFlashMaxHeadDim; any seq_len
// (rows and keys past L are zero-padded in shared memory, padded keys masked, padded rows not
// written); causal key tiles above the diagonal skipped; GQA as in cuda/flash.
//
// On the sim backend simt/wmma.h provides the fragment operations in software (each lane holds
// the whole tile; mma in fp32 from the 16-bit inputs), so this very source is the SIMT twin that
// the emulator tests: tiling, masking, online softmax and barriers are checked; only the
// instruction is modelled.
//
// FLOPs 4·L²·d per head; DRAM bytes (fp16 inputs, fp32 output) 2·3·L·d + 4·L·d per head.
#include <cmath>
#include <cstdint>
#include <string>

#include "common/ceil_div.h"
#include "kernels/primitives/softmax_warp.cuh"
#include "kernels/fused/cuda_fused.cuh"
#include "kernels/fused/cuda_fused.h"
#include "kernels/fused/fused.h"
#include "simt/wmma.h"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

namespace wmma = simt::wmma;

constexpr int kBr = 64;  // query rows per block
constexpr int kBc = 64;  // keys per tile
constexpr int kWarps = kBr / 16;
constexpr int kThreads = kWarps * 32;
constexpr int kPad16 = 8;   // padding of 16-bit rows (16 bytes keeps WMMA's alignment rules)
constexpr int kPad32 = 4;   // padding of fp32 rows (16 bytes)
constexpr int kAlign = 32;  // WMMA tile pointers are 256-bit aligned

// Offsets (bytes) of the shared-memory regions for head_dim d, each a multiple of 32.
struct TcLayout {
  int ld16, lds, ldp, ldo;  // leading dimensions (elements): Q/K/V, S, P, O
  size_t q, k, v, s, p, o, bytes;
  template <class T>
  static TcLayout of(int d) {
    TcLayout t{};
    t.ld16 = d + kPad16;
    t.lds = kBc + kPad32;
    t.ldp = kBc + kPad16;
    t.ldo = d + kPad32;
    t.q = 0;
    t.k = t.q + sizeof(T) * kBr * t.ld16;
    t.v = t.k + sizeof(T) * kBc * t.ld16;
    t.s = t.v + sizeof(T) * kBc * t.ld16;
    t.p = t.s + sizeof(float) * kBr * t.lds;
    t.o = t.p + sizeof(T) * kBr * t.ldp;
    t.bytes = t.o + sizeof(float) * kBr * t.ldo;
    return t;
  }
};

template <class T>
__global__ void flash_tc_forward(const T* q, const T* k, const T* v, float* out, int seq_len, int head_dim,
                                 int group_size, float scale, bool causal, TcLayout layout) {
  SIMT_DYNAMIC_SHARED(unsigned char, raw);
  // The dynamic shared window is only promised 16-byte alignment: round up (the launch asks for
  // kAlign extra bytes).
  unsigned char* base = raw + (kAlign - reinterpret_cast<uintptr_t>(raw) % kAlign) % kAlign;
  const int d = head_dim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int i0 = blockIdx.x * kBr, h = blockIdx.y, g = h / group_size;
  T* q_tile = reinterpret_cast<T*>(base + layout.q);                                   // [kBr][ld16]
  T* k_tile = reinterpret_cast<T*>(base + layout.k);                                   // [kBc][ld16]
  T* v_tile = reinterpret_cast<T*>(base + layout.v);                                   // [kBc][ld16]
  float* s_warp = reinterpret_cast<float*>(base + layout.s) + warp * 16 * layout.lds;  // [16][lds]
  T* p_warp = reinterpret_cast<T*>(base + layout.p) + warp * 16 * layout.ldp;          // [16][ldp]
  float* o_warp = reinterpret_cast<float*>(base + layout.o) + warp * 16 * layout.ldo;  // [16][ldo]
  const T* q_head = q + size_t(h) * seq_len * d;
  const T* k_head = k + size_t(g) * seq_len * d;
  const T* v_head = v + size_t(g) * seq_len * d;
  const T zero(0.0f);

  for (int e = threadIdx.x; e < kBr * d; e += kThreads) {
    const int r = e / d, c = e % d;
    q_tile[r * layout.ld16 + c] = i0 + r < seq_len ? q_head[size_t(i0 + r) * d + c] : zero;
  }
  for (int e = lane; e < 16 * d; e += 32) o_warp[(e / d) * layout.ldo + e % d] = 0.0f;

  // The softmax step: lane handles row `row` of the warp's 16 and half `half` of the tile's keys.
  const int row = lane % 16, half = lane / 16;
  const int i = i0 + warp * 16 + row;
  float m = -INFINITY, l = 0.0f;

  const int key_end = causal ? min(seq_len, i0 + kBr) : seq_len;  // tiles above the diagonal skipped
  for (int j0 = 0; j0 < key_end; j0 += kBc) {
    __syncthreads();  // every warp is done with the previous K/V tile before it is overwritten
    for (int e = threadIdx.x; e < kBc * d; e += kThreads) {
      const int r = e / d, c = e % d;
      const bool inside = j0 + r < seq_len;
      k_tile[r * layout.ld16 + c] = inside ? k_head[size_t(j0 + r) * d + c] : zero;
      v_tile[r * layout.ld16 + c] = inside ? v_head[size_t(j0 + r) * d + c] : zero;
    }
    __syncthreads();  // Q, K, V (and the zeroed O) are complete before any warp reads them

    // S_w = Q_w · K_tileᵀ: K stored row-major [key][c] is Kᵀ in column-major order.
    for (int n = 0; n < kBc / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> scores;
      wmma::fill_fragment(scores, 0.0f);
      for (int c = 0; c < d / 16; ++c) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> q_frag;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> k_frag;
        wmma::load_matrix_sync(q_frag, q_tile + warp * 16 * layout.ld16 + c * 16, layout.ld16);
        wmma::load_matrix_sync(k_frag, k_tile + n * 16 * layout.ld16 + c * 16, layout.ld16);
        wmma::mma_sync(scores, q_frag, k_frag, scores);
      }
      wmma::store_matrix_sync(s_warp + n * 16, scores, layout.lds, wmma::mem_row_major);
    }
    __syncwarp();  // S_w is complete before each lane reads its row

    // Online softmax of row `row` over keys j0 + half·32 … j0 + half·32 + 31.
    const float* s_row = s_warp + row * layout.lds + half * (kBc / 2);
    T* p_row = p_warp + row * layout.ldp + half * (kBc / 2);
    float tile_max = -INFINITY;
    for (int jj = 0; jj < kBc / 2; ++jj) {
      const int j = j0 + half * (kBc / 2) + jj;
      if (j < seq_len && !(causal && j > i)) tile_max = fmaxf(tile_max, s_row[jj] * scale);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));  // join the two halves
    // Key j0 is visible to every row (j0 ≤ i0 ≤ i under the mask): m_new is finite.
    const float m_new = fmaxf(m, tile_max);
    const float alpha = __expf(m - m_new);  // 0 on the first tile (m = −∞)
    float tile_sum = 0.0f;
    for (int jj = 0; jj < kBc / 2; ++jj) {
      const int j = j0 + half * (kBc / 2) + jj;
      const float p = (j < seq_len && !(causal && j > i)) ? __expf(s_row[jj] * scale - m_new) : 0.0f;
      store_probability(p_row + jj, p);
      tile_sum += p;
    }
    l = alpha * l + tile_sum + __shfl_xor_sync(0xffffffffu, tile_sum, 16);
    m = m_new;
    float* o_row = o_warp + row * layout.ldo;
    for (int c = half; c < d; c += 2) o_row[c] *= alpha;
    __syncwarp();  // P_w and the rescaled O_w are complete before the fragments load them

    // O_w += P_w · V_tile.
    for (int n = 0; n < d / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> o_frag;
      wmma::load_matrix_sync(o_frag, o_warp + n * 16, layout.ldo, wmma::mem_row_major);
      for (int kk = 0; kk < kBc / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> p_frag;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> v_frag;
        wmma::load_matrix_sync(p_frag, p_warp + kk * 16, layout.ldp);
        wmma::load_matrix_sync(v_frag, v_tile + kk * 16 * layout.ld16 + n * 16, layout.ld16);
        wmma::mma_sync(o_frag, p_frag, v_frag, o_frag);
      }
      wmma::store_matrix_sync(o_warp + n * 16, o_frag, layout.ldo, wmma::mem_row_major);
    }
  }
  __syncwarp();  // the last O_w tiles are stored before the lanes read their rows

  if (i < seq_len) {
    const float inv_l = 1.0f / l;
    const float* o_row = o_warp + row * layout.ldo;
    for (int c = half; c < d; c += 2) out[(size_t(h) * seq_len + i) * d + c] = o_row[c] * inv_l;
  }
}

}  // namespace

template <class T>
void attention_flash_tc_device(const DeviceAttentionOf<T>& problem, cudaStream_t stream) {
  const AttentionShape& s = problem.shape;
  require_flash_tc_head_dim(s.head_dim);
  const TcLayout layout = TcLayout::of<T>(int(s.head_dim));
  const size_t shared_bytes = layout.bytes + kAlign;
  auto kernel = flash_tc_forward<T>;
  if (shared_bytes > 48 * 1024)
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes)),
               "cudaFuncSetAttribute (flash_tc_forward)");
  const dim3 grid(unsigned(ceil_div(s.seq_len, kBr)), unsigned(s.num_heads));
  check_cuda(
      simt::launch(kernel, grid, dim3(kThreads), shared_bytes, stream, problem.q, problem.k, problem.v, problem.out,
                   int(s.seq_len), int(s.head_dim), int(s.group_size()), problem.scale(), s.causal, layout),
      "flash_tc_forward");
}

template void attention_flash_tc_device<__half>(const DeviceAttentionOf<__half>&, cudaStream_t);
template void attention_flash_tc_device<__nv_bfloat16>(const DeviceAttentionOf<__nv_bfloat16>&, cudaStream_t);

namespace {

template <class T>
void run_flash_tc(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                  Tensor<float>& out, const char* version) {
  const DeviceAttentionCopy<T> device(q, k, v, causal, out);
  attention_flash_tc_device<T>(device.view(), nullptr);
  device.finish(out, version);
}

}  // namespace

void attention_cuda_flash_tc(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                             Tensor<float>& out) {
  run_flash_tc<__half>(q, k, v, causal, out, "cuda/flash_tc");
}

void attention_cuda_flash_tc_bf16(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                                  Tensor<float>& out) {
  run_flash_tc<__nv_bfloat16>(q, k, v, causal, out, "cuda/flash_tc_bf16");
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
