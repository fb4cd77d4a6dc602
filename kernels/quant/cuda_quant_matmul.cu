// cuda/quant_matmul — chapter 08: the quantized linear layer y = x · Wᵀ on CUDA cores with __dp4a,
// over weights in ggml's Q8_0, Q4_0 or Q4_1 blocks (block_formats.h), bit-identical to
// quant_matmul_cpu() (quant_matmul.h) and so batch-invariant: a row's result depends only on that
// row and W, never on the other rows of the call (chapter 07's lesson, kept on the GPU).
//
// Computes what quant_matmul.h's contract fixes, for each (row r, output o):
//     acc = 0; for b = 0 … in/32 − 1 in order:
//       Σ   = Σ_j q_w[b][j] · q_x[b][j]                  exact int32 (|Σ| < 2^20)
//       acc = fma(d_w[b]·d_x[b], float(Σ), acc)           d_w·d_x: fp16 × fp16, exact in fp32
//       acc = fma(m_w[b], s_x[b], acc)                    Q4_1 only (Q8_1 activations carry s)
//     y[r][o] = acc
// The integer sums are exact whatever computes them (__dp4a here, maddubs/dpbusd on the CPU), and
// the float operations are the same correctly rounded fma chain in the same order, so the bits are
// the CPU's. The one thing a GPU kernel must not do is what GPUs usually do: split the blocks of
// one output among the lanes of a warp and add the lanes' partial sums with a shuffle tree — that
// is another order of the float additions, other bits, and bits that depend on the split
// (tests/wrong/kernels/wrong_ch08_quant_kernels.cu shows the suite rejecting it).
//
// Structure:
//   1. quantize_rows_kernel: grid (rows), block 128 = 4 warps; warp w takes the 32-value blocks
//      b ≡ w (mod 4) of row blockIdx.x, lane j value j: amax = max|x| by one warp max-reduce (the
//      bits of a non-negative float order like unsigned ints), d = amax/127, id = 1/d (0 when
//      d = 0), q_j = round(x_j·id) (half away from zero, as std::round), Σq by a warp add-reduce;
//      lane j stores code j, lane 0 the fp16 d (and for Q8_1 s = fp16(Σq·d), the fp32 d as ggml).
//      The same operations as quantize_row_q8_0/_q8_1 in the same precision: the same bytes.
//   2. quant_matmul_kernel<W, X, R>: grid (⌈out/128⌉, ⌈rows/R⌉ capped at 65535, then a loop),
//      block 128 = 4 warps; warp w owns 32 consecutive outputs, lane l output o = (4·blockIdx.x +
//      w)·32 + l — one thread per (row, output), R rows at a time (R = 1 for decode, 4 otherwise:
//      each weight block is decoded once and used for R rows, R accumulators in registers).
//      Over the in/32 blocks in chunks of kChunk = 8:
//        a. stage: the warp copies its 32 weight rows' chunk (32 × 8 blocks, 272 bytes a row for
//           Q8_0) into its shared-memory tile, 2- or 4-byte units, consecutive lanes consecutive
//           units of one row: coalesced loads. Rows are padded to an odd number of words, so in
//           step b the 32 lanes, each reading its own row, hit 32 different banks;
//        b. compute: each lane decodes its row's next block from the tile (the Q4 nibbles
//           unpacked to int8 bytes in value order: low nibbles = values 0–15, high = 16–31),
//           then for each of the R rows reads that row's activation block from global memory
//           (the same address in every lane: one broadcast load), Σ = 8 × __dp4a, and the fma
//           chain above;
//      __syncwarp() between staging and computing and before the next chunk overwrites the tile
//      (the tile is the warp's own: no block barrier).
//   3. the host: check as quant_matmul_cpu does, quantize the rows (1), then the matmul (2);
//      the host-tensor entry points upload W, x and a poisoned y, and download y.
//
// The trade-off of one thread per output. Keeping an output's blocks in one thread is what makes
// the chain the CPU's; its cost is that the 32 lanes of a warp read 32 different weight rows,
// in/32·34 bytes apart (Q8_0). Read straight from global memory, every load instruction of the
// warp would touch 32 sectors (32 transactions where a coalesced load has 2–4), so the kernel
// would be bound by L1 transactions, not by DRAM — a batch-1 decode is nothing but weight bytes.
// Step a pays for that with a copy: the loads from global memory are coalesced, the scattered
// per-lane reads go to shared memory, where the padding makes them conflict-free. The other way,
// lanes over the blocks of one output, coalesces for free but changes the order (above). A kernel
// that wants that layout can keep bit-identity only by fixing the split for every shape and
// every backend — a different contract, written down and tested against a bound instead.
//
// Cost per call: 2·rows·out·in FLOPs (as int8 MACs); W's real bytes read ⌈rows/R⌉ times (once for
// decode; the re-reads of a batch come mostly from L2), x read twice (fp32 into the quantizer,
// then its blocks, 1.06 or 1.13 bytes a value), y written once. Shared memory 4 warps × 32 rows ×
// 276 bytes = 34.5 KiB for Q8_0 (18.5 and 20.5 KiB for Q4_0 and Q4_1), static.
//
// Version ladder (quantized matmul):
//   cpu scalar / avx2 / vnni (cpu_quant_matmul.cpp)   the contract; the SIMD kernels vectorize
//                                                      over (row, output) pairs, never over blocks
//   cuda/quant_matmul (this file)                      the same pairs one per thread, __dp4a, for
//                                                      decode and small batches
//   cuda/quant_gemm_tiled (this file, chapter 11)     M > 1: a thread block takes 64 outputs × 16
//                                                      rows; each weight chunk is staged in shared
//                                                      memory ONCE for the 16 rows (the per-row
//                                                      kernel stages it once per warp, for 4 rows,
//                                                      and 4 warps read 4 different output sets),
//                                                      and the rows' activation chunk beside it; each
//                                                      thread keeps 4 rows × 2 outputs of the same
//                                                      per-output chain: bit-identical again
//   not here: tensor-core int8 mma (mma.sync s8) — more reuse still, and a SIMT twin to write.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "common/ceil_div.h"
#include "common/check.h"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/cuda_quant_matmul.cuh"
#include "kernels/quant/cuda_quant_matmul.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS {

using quant::GgmlType;

namespace {

constexpr int kWarps = 4;                       // warps a block (both kernels)
constexpr int kThreads = kWarps * 32;           // threads a block
constexpr int kOutputsPerBlock = kThreads;      // matmul: one output a lane
constexpr int kChunk = 8;                       // matmul: weight blocks staged per step
constexpr int kRowTile = 4;                     // matmul: rows a thread carries when rows > 1
constexpr unsigned kMaxGridY = 65535;           // CUDA's limit on gridDim.y
constexpr int kTileOutputs = 64;                // tiled: outputs a thread block (2 a lane)
constexpr int kTileRows = 16;                   // tiled: rows a thread block (4 a warp)
constexpr int kTiledChunk = 4;                  // tiled: weight blocks staged per step
constexpr unsigned kFullMask = 0xffffffffu;

__device__ inline float half_bits(unsigned bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xffffu)));
}

__device__ inline unsigned short half_of(float value) {
  return __half_as_ushort(__float2half_rn(value));
}

// Q4 codes 0–15 in each byte → the int8 values code − 8, bytewise: code + 0x78 ≤ 0x87 never carries
// into the next byte, and flipping the top bit of code + 120 gives code − 8 as a two's-complement
// byte (0 → 0xF8 = −8, 8 → 0x00, 15 → 0x07).
__device__ inline int centre_nibbles(unsigned codes) {
  return static_cast<int>((codes + 0x78787878u) ^ 0x80808080u);
}

// How the matmul reads one block of each weight format from its shared-memory tile: the block is
// kUnits units of type Unit (2 bytes when the block size is not a multiple of 4: the 34- and 18-byte
// blocks sit at 2-byte alignment; 4 bytes for Q4_1's 20), decoded into 8 words of 4 int8 codes in
// value order (word k = values 4k … 4k + 3), the scale d and the minimum m.
struct WeightQ8_0 {
  using Unit = uint16_t;
  static constexpr int kBytes = 34;
  static constexpr bool kMin = false;
  __device__ static void decode(const Unit* b, int (&q)[8], float& d, float& m) {
    d = half_bits(b[0]);
    m = 0.0f;
    for (int k = 0; k < 8; ++k) q[k] = static_cast<int>(unsigned(b[1 + 2 * k]) | unsigned(b[2 + 2 * k]) << 16);
  }
};

struct WeightQ4_0 {
  using Unit = uint16_t;
  static constexpr int kBytes = 18;
  static constexpr bool kMin = false;
  __device__ static void decode(const Unit* b, int (&q)[8], float& d, float& m) {
    d = half_bits(b[0]);
    m = 0.0f;
    for (int k = 0; k < 4; ++k) {
      const unsigned bytes = unsigned(b[1 + 2 * k]) | unsigned(b[2 + 2 * k]) << 16;  // qs[4k … 4k+3]
      q[k] = centre_nibbles(bytes & 0x0f0f0f0fu);             // low nibbles: values 4k …
      q[k + 4] = centre_nibbles((bytes >> 4) & 0x0f0f0f0fu);  // high nibbles: values 16 + 4k …
    }
  }
};

struct WeightQ4_1 {
  using Unit = uint32_t;
  static constexpr int kBytes = 20;
  static constexpr bool kMin = true;
  __device__ static void decode(const Unit* b, int (&q)[8], float& d, float& m) {
    d = half_bits(b[0]);  // little-endian: d in the low half of the first word, m in the high
    m = half_bits(b[0] >> 16);
    for (int k = 0; k < 4; ++k) {
      q[k] = static_cast<int>(b[1 + k] & 0x0f0f0f0fu);  // codes 0–15 stay unsigned: q·d + m
      q[k + 4] = static_cast<int>((b[1 + k] >> 4) & 0x0f0f0f0fu);
    }
  }
};

// How both kernels address one activation block: Q8_0 (34 bytes: d, 32 codes) or Q8_1 (36 bytes:
// d, s, 32 codes). The matmul reads it from global memory in units of Unit; word k of the codes is
// values 4k … 4k + 3.
struct ActQ8_0 {
  using Unit = uint16_t;
  static constexpr int kBytes = 34, kCodes = 2;  // byte offset of the codes
  static constexpr bool kSum = false;
  __device__ static float d(const Unit* b) { return half_bits(b[0]); }
  __device__ static int word(const Unit* b, int k) {
    return static_cast<int>(unsigned(b[1 + 2 * k]) | unsigned(b[2 + 2 * k]) << 16);
  }
};

struct ActQ8_1 {
  using Unit = uint32_t;
  static constexpr int kBytes = 36, kCodes = 4;
  static constexpr bool kSum = true;
  __device__ static float d(const Unit* b) { return half_bits(b[0]); }
  __device__ static float s(const Unit* b) { return half_bits(b[0] >> 16); }
  __device__ static int word(const Unit* b, int k) { return static_cast<int>(b[1 + k]); }
};

// ---- 1. the activation quantizer ----

template <class X>
__global__ void quantize_rows_kernel(const float* x, int64_t in, int blocks, uint8_t* out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = blockIdx.x;
  for (int b = warp; b < blocks; b += kWarps) {  // b is the same in every lane: the warp stays whole
    const float v = x[row * in + int64_t(b) * 32 + lane];
    // max|x| over the block: non-negative floats compare as their bit patterns do.
    const float amax = __uint_as_float(__reduce_max_sync(kFullMask, __float_as_uint(fabsf(v))));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const int q = static_cast<int>(roundf(v * id));  // |v·id| ≤ 127: fits int8
    const int sum = __reduce_add_sync(kFullMask, q);
    uint8_t* block = out + (row * blocks + b) * X::kBytes;
    block[X::kCodes + lane] = static_cast<uint8_t>(static_cast<int8_t>(q));
    if (lane == 0) {
      reinterpret_cast<unsigned short*>(block)[0] = half_of(d);
      if constexpr (X::kSum) reinterpret_cast<unsigned short*>(block)[1] = half_of(float(sum) * d);
    }
  }
}

// ---- 2. the matmul ----

// Words of one lane's row in the tile: kChunk blocks rounded up to whole words, then to an odd
// count — lane l's row starts at word l·stride, and an odd stride puts the 32 rows' same word in
// 32 different banks.
template <class W>
constexpr int tile_stride_words() {
  return ((kChunk * W::kBytes + 3) / 4) | 1;
}

template <class W, class X, int R>
__global__ void quant_matmul_kernel(const uint8_t* w, const uint8_t* x, int64_t rows, int out, int blocks, float* y) {
  using Unit = typename W::Unit;
  constexpr int kStride = tile_stride_words<W>() * 4 / int(sizeof(Unit));  // the tile's row stride in units
  constexpr int kBlockUnits = W::kBytes / int(sizeof(Unit));
  __shared__ Unit tiles[kWarps][32 * kStride];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int o_base = (blockIdx.x * kWarps + warp) * 32;  // the warp's first output
  if (o_base >= out) return;                              // the whole warp: nothing to compute
  const int o = o_base + lane;
  const int warp_rows = min(32, out - o_base);
  Unit* tile = tiles[warp];
  const int64_t row_bytes = int64_t(blocks) * W::kBytes;

  for (int64_t r0 = int64_t(blockIdx.y) * R; r0 < rows; r0 += int64_t(gridDim.y) * R) {
    float acc[R];
    for (int i = 0; i < R; ++i) acc[i] = 0.0f;
    for (int b0 = 0; b0 < blocks; b0 += kChunk) {
      const int n = min(kChunk, blocks - b0);
      const int units = n * kBlockUnits;  // of each row's chunk
      __syncwarp();  // every lane is done with the previous chunk before the tile is overwritten
      // a. stage: row rr's chunk, consecutive lanes consecutive units (coalesced).
      for (int rr = 0; rr < warp_rows; ++rr) {
        const Unit* src = reinterpret_cast<const Unit*>(w + int64_t(o_base + rr) * row_bytes + int64_t(b0) * W::kBytes);
        for (int u = lane; u < units; u += 32) tile[rr * kStride + u] = src[u];
      }
      __syncwarp();  // the tile is complete before any lane reads another lane's copy
      // b. compute: lane o's row, block by block in order, each block for the R rows.
      if (o < out) {
        for (int c = 0; c < n; ++c) {
          int q[8];
          float dw, mw;
          W::decode(tile + lane * kStride + c * kBlockUnits, q, dw, mw);
          for (int i = 0; i < R; ++i) {
            if (r0 + i >= rows) break;  // the same in every lane
            const auto* xb = reinterpret_cast<const typename X::Unit*>(x + ((r0 + i) * blocks + b0 + c) * X::kBytes);
            int sum = 0;
            for (int k = 0; k < 8; ++k) sum = __dp4a(q[k], X::word(xb, k), sum);
            acc[i] = fmaf(dw * X::d(xb), float(sum), acc[i]);  // d_w·d_x exact: fp16 × fp16
            if constexpr (W::kMin) acc[i] = fmaf(mw, X::s(xb), acc[i]);
          }
        }
      }
    }
    if (o < out)
      for (int i = 0; i < R && r0 + i < rows; ++i) y[(r0 + i) * out + o] = acc[i];
  }
}

template <class W, class X, int R>
void launch_matmul(const DeviceBlockMatrix& w, const uint8_t* x, int64_t rows, float* y) {
  const dim3 grid(unsigned(ceil_div(w.out, kOutputsPerBlock)),
                  unsigned(std::min<int64_t>(ceil_div(rows, R), kMaxGridY)));
  check_cuda(simt::launch(quant_matmul_kernel<W, X, R>, grid, dim3(kThreads), 0, nullptr, w.bytes, x, rows,
                          int(w.out), int(w.in / 32), y),
             "quant_matmul_kernel");
}

template <class W, class X>
void launch_matmul(const DeviceBlockMatrix& w, const uint8_t* x, int64_t rows, float* y) {
  if (rows == 1) return launch_matmul<W, X, 1>(w, x, rows, y);
  launch_matmul<W, X, kRowTile>(w, x, rows, y);
}

// ---- 2b. the tiled matmul (chapter 11): 64 outputs × 16 rows a thread block ----
//
// grid (⌈out/64⌉, ⌈rows/16⌉ capped at 65535, then a loop), block 128 = 4 warps. Per chunk of
// kTiledChunk blocks: the block's 128 threads stage the chunk of its 64 weight rows (odd word
// stride: conflict-free column reads, as above) and of its 16 activation rows in shared memory,
// __syncthreads, then lane l of warp w computes outputs o_base + l and o_base + 32 + l for rows
// r_base + 4w … r_base + 4w + 3: 8 accumulators, each the contract's chain in block order. Every
// weight byte staged serves 16 rows (the per-row kernel's serve 4), every activation byte 64
// outputs. Shared memory: 64 rows × 140 bytes + 16 × 4 × 36 bytes ≈ 11 KiB (Q8_0).
template <class W, class X>
__global__ void quant_gemm_tiled_kernel(const uint8_t* w, const uint8_t* x, int64_t rows, int out, int blocks,
                                        float* y) {
  using Unit = typename W::Unit;
  using XUnit = typename X::Unit;
  constexpr int kStride = ((kTiledChunk * W::kBytes + 3) / 4 | 1) * 4 / int(sizeof(Unit));  // in units
  constexpr int kBlockUnits = W::kBytes / int(sizeof(Unit));
  constexpr int kXBlockUnits = X::kBytes / int(sizeof(XUnit));
  constexpr int kXStride = kTiledChunk * kXBlockUnits;  // one activation row's chunk, in units
  __shared__ Unit w_tile[kTileOutputs * kStride];
  __shared__ XUnit x_tile[kTileRows * kXStride];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int o_base = blockIdx.x * kTileOutputs;
  const int n_out = min(kTileOutputs, out - o_base);
  const int64_t row_bytes = int64_t(blocks) * W::kBytes, x_row_bytes = int64_t(blocks) * X::kBytes;

  for (int64_t r_base = int64_t(blockIdx.y) * kTileRows; r_base < rows; r_base += int64_t(gridDim.y) * kTileRows) {
    const int n_rows = rows - r_base < kTileRows ? int(rows - r_base) : kTileRows;
    float acc[4][2];
    for (int i = 0; i < 4; ++i) acc[i][0] = acc[i][1] = 0.0f;
    for (int b0 = 0; b0 < blocks; b0 += kTiledChunk) {
      const int n = min(kTiledChunk, blocks - b0);
      const int w_units = n * kBlockUnits, x_units = n * kXBlockUnits;
      __syncthreads();  // every thread is done with the previous chunk before the tiles are overwritten
      for (int i = threadIdx.x; i < n_out * w_units; i += kThreads) {
        const int rr = i / w_units, u = i % w_units;  // consecutive threads, consecutive units of a row
        w_tile[rr * kStride + u] =
            reinterpret_cast<const Unit*>(w + int64_t(o_base + rr) * row_bytes + int64_t(b0) * W::kBytes)[u];
      }
      for (int i = threadIdx.x; i < n_rows * x_units; i += kThreads) {
        const int rr = i / x_units, u = i % x_units;
        x_tile[rr * kXStride + u] =
            reinterpret_cast<const XUnit*>(x + (r_base + rr) * x_row_bytes + int64_t(b0) * X::kBytes)[u];
      }
      __syncthreads();  // both tiles are complete before any thread reads another thread's copy
      for (int c = 0; c < n; ++c)
        for (int j = 0; j < 2; ++j) {
          const int ol = lane + 32 * j;  // the output within the tile
          if (ol >= n_out) break;
          int q[8];
          float dw, mw;
          W::decode(w_tile + ol * kStride + c * kBlockUnits, q, dw, mw);
          for (int i = 0; i < 4; ++i) {
            const int rr = 4 * warp + i;
            if (rr >= n_rows) break;  // the same in every lane of the warp
            const XUnit* xb = x_tile + rr * kXStride + c * kXBlockUnits;  // one address a warp: a broadcast
            int sum = 0;
            for (int k = 0; k < 8; ++k) sum = __dp4a(q[k], X::word(xb, k), sum);
            acc[i][j] = fmaf(dw * X::d(xb), float(sum), acc[i][j]);  // d_w·d_x exact: fp16 × fp16
            if constexpr (W::kMin) acc[i][j] = fmaf(mw, X::s(xb), acc[i][j]);
          }
        }
    }
    for (int j = 0; j < 2; ++j) {
      const int ol = lane + 32 * j;
      if (ol >= n_out) continue;
      for (int i = 0; i < 4 && 4 * warp + i < n_rows; ++i) y[(r_base + 4 * warp + i) * out + o_base + ol] = acc[i][j];
    }
  }
}

template <class W, class X>
void launch_tiled(const DeviceBlockMatrix& w, const uint8_t* x, int64_t rows, float* y) {
  const dim3 grid(unsigned(ceil_div(w.out, kTileOutputs)), unsigned(std::min<int64_t>(ceil_div(rows, kTileRows), kMaxGridY)));
  check_cuda(simt::launch(quant_gemm_tiled_kernel<W, X>, grid, dim3(kThreads), 0, nullptr, w.bytes, x, rows,
                          int(w.out), int(w.in / 32), y),
             "quant_gemm_tiled_kernel");
}

template <class W, class X>
void launch(const DeviceBlockMatrix& w, const uint8_t* x, int64_t rows, float* y, QuantMatmulKernel kernel) {
  if (kernel == QuantMatmulKernel::tiled || (kernel == QuantMatmulKernel::automatic && rows > 1))
    return launch_tiled<W, X>(w, x, rows, y);
  launch_matmul<W, X>(w, x, rows, y);
}

// ---- 3. the host: checks (as quant_matmul_cpu's), the device level, the host tensors ----

bool is_weight_type(GgmlType type) {
  return type == GgmlType::q8_0 || type == GgmlType::q4_0 || type == GgmlType::q4_1;
}

void require_aligned(const void* pointer, const char* name) {
  require(reinterpret_cast<uintptr_t>(pointer) % 4 == 0, name, pointer,
          "must be 4-byte aligned (the kernels read blocks in 2- and 4-byte units; cudaMalloc's pointers are)");
}

// The checks of quant_matmul_cpu() on the matrix, with its messages.
void check_matrix(GgmlType type, int64_t out, int64_t in) {
  require(is_weight_type(type), "w.type", to_string(type),
          "must be Q8_0, Q4_0 or Q4_1 (the weight formats with a quantized matmul)");
  require(in > 0 && in % quant::kBlockValues == 0, "w.in", in, "must be a positive multiple of 32 (whole blocks)");
  require(out >= 0, "w.out", out, "must be >= 0");
  require(out <= INT_MAX, "w.out", out, "must fit in an int (the kernel's output index)");
  require(in / quant::kBlockValues <= INT_MAX, "w.in", in, "must be at most 32 · INT_MAX");
}

// @p in_name: how the caller names the row length (x.shape[1] for a tensor, in for a pointer).
void check_quantize(GgmlType type, int64_t rows, int64_t in, const char* in_name) {
  require(type == GgmlType::q8_0 || type == GgmlType::q8_1, "type", to_string(type),
          "must be Q8_0 or Q8_1 (the activation formats)");
  require(in > 0 && in % quant::kBlockValues == 0, in_name, in, "must be a positive multiple of 32 (whole blocks)");
  require(in / quant::kBlockValues <= INT_MAX, in_name, in, "must be at most 32 · INT_MAX");
  require(rows >= 0 && rows <= INT_MAX, "rows", rows, "must be in [0, INT_MAX] (one block a row)");
}

}  // namespace

int64_t quant_activation_bytes(GgmlType weight_type, int64_t rows, int64_t in) {
  require(rows >= 0, "rows", rows, "must be >= 0");
  return rows * quant::row_bytes(quant::activation_type(weight_type), in);
}

void quantize_rows_device(GgmlType type, const float* x, int64_t rows, int64_t in, uint8_t* blocks) {
  check_quantize(type, rows, in, "in");
  if (rows == 0) return;
  require_aligned(blocks, "blocks");
  const int count = int(in / quant::kBlockValues);
  if (type == GgmlType::q8_0)
    check_cuda(simt::launch(quantize_rows_kernel<ActQ8_0>, dim3(unsigned(rows)), dim3(kThreads), 0, nullptr, x, in,
                            count, blocks),
               "quantize_rows_kernel (Q8_0)");
  else
    check_cuda(simt::launch(quantize_rows_kernel<ActQ8_1>, dim3(unsigned(rows)), dim3(kThreads), 0, nullptr, x, in,
                            count, blocks),
               "quantize_rows_kernel (Q8_1)");
}

void quant_matmul_blocks_device(const DeviceBlockMatrix& w, const uint8_t* x_blocks, int64_t rows, float* y,
                                QuantMatmulKernel kernel) {
  check_matrix(w.type, w.out, w.in);
  require(rows >= 0, "rows", rows, "must be >= 0");
  if (rows == 0 || w.out == 0) return;
  require_aligned(w.bytes, "w.bytes");
  require_aligned(x_blocks, "x_blocks");
  switch (w.type) {
    case GgmlType::q8_0:
      return launch<WeightQ8_0, ActQ8_0>(w, x_blocks, rows, y, kernel);
    case GgmlType::q4_0:
      return launch<WeightQ4_0, ActQ8_0>(w, x_blocks, rows, y, kernel);
    default:
      return launch<WeightQ4_1, ActQ8_1>(w, x_blocks, rows, y, kernel);
  }
}

void quant_matmul_device(const float* x, int64_t rows, const DeviceBlockMatrix& w, uint8_t* scratch, float* y,
                         QuantMatmulKernel kernel) {
  check_matrix(w.type, w.out, w.in);
  quantize_rows_device(quant::activation_type(w.type), x, rows, w.in, scratch);
  quant_matmul_blocks_device(w, scratch, rows, y, kernel);
}

void quantize_rows_cuda(GgmlType type, const Tensor<float>& x, std::span<uint8_t> blocks) {
  check_rank(x, 2, "x");
  const int64_t rows = x.dim(0), in = x.dim(1);
  check_quantize(type, rows, in, "x.shape[1]");
  const int64_t want = rows * quant::row_bytes(type, in);
  require(int64_t(blocks.size()) == want, "blocks.size()", blocks.size(),
          "must be rows · row_bytes(" + std::string(to_string(type)) + ", in) = " + std::to_string(want));
  if (rows == 0) return;
  const DeviceBuffer<float> d_x(x);
  auto d_blocks = DeviceBuffer<uint8_t>::poisoned(blocks.size());
  quantize_rows_device(type, d_x.data(), rows, in, d_blocks.data());
  check_cuda(cudaDeviceSynchronize(), "quantize_rows_cuda");
  d_blocks.download(blocks);
}

void quant_matmul_cuda(const Tensor<float>& x, const quant::BlockMatrix& w, Tensor<float>& y, QuantMatmulKernel kernel) {
  check_matrix(w.type, w.out, w.in);
  const int64_t want = w.out * quant::row_bytes(w.type, w.in);
  require(int64_t(w.bytes.size()) == want, "w.bytes.size()", w.bytes.size(),
          "must be out · row_bytes(" + std::string(to_string(w.type)) + ", in) = " + std::to_string(want));
  check_rank(x, 2, "x");
  require(x.dim(1) == w.in, "x.shape[1]", x.dim(1), "must equal the weights' input size w.in = " + std::to_string(w.in));
  check_shape(y, {x.dim(0), w.out}, "y");
  const int64_t rows = x.dim(0);
  if (rows == 0 || w.out == 0) return;
  const DeviceBuffer<uint8_t> d_w(w.bytes);
  const DeviceBuffer<float> d_x(x);
  DeviceBuffer<uint8_t> scratch(size_t(quant_activation_bytes(w.type, rows, w.in)));
  auto d_y = DeviceBuffer<float>::poisoned(size_t(y.size()));
  quant_matmul_device(d_x.data(), rows, {w.type, w.out, w.in, d_w.data()}, scratch.data(), d_y.data(), kernel);
  check_cuda(cudaDeviceSynchronize(), "quant_matmul_cuda");
  d_y.download(y);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
