// Correct kernels for the SIMT emulator's tests: each must give the same bytes under every
// schedule (forward, reverse, random) and the right answer.
#include "simt_test_kernels.h"

namespace inferlab::INFERLAB_BACKEND_NS::simt_tests {

namespace {
constexpr int kReduceThreads = 128;

__device__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  return value;
}

__device__ float warp_max(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}
}  // namespace

// Grid-stride load, tree in shared memory down to one warp, then shuffles.
__global__ void block_sums_kernel(const float* values, int count, float* partial) {
  SIMT_DYNAMIC_SHARED(float, sums);
  float mine = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) mine += values[i];
  sums[threadIdx.x] = mine;
  __syncthreads();  // every partial is in shared memory before the tree reads it
  for (unsigned stride = blockDim.x / 2; stride >= 32; stride /= 2) {
    if (threadIdx.x < stride) sums[threadIdx.x] += sums[threadIdx.x + stride];
    __syncthreads();  // this level is complete before the next one reads it
  }
  if (threadIdx.x < 32) {
    const float total = warp_sum(sums[threadIdx.x]);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
  }
}

cudaError_t block_sums(const float* values, int count, float* partial, int blocks, int threads) {
  return simt::launch(block_sums_kernel, blocks, threads, threads * sizeof(float), nullptr, values, count, partial);
}

__global__ void block_sums_syncwarp_tail_kernel(const float* values, int count, float* partial) {
  __shared__ float sums[kReduceThreads];
  float mine = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) mine += values[i];
  sums[threadIdx.x] = mine;
  __syncthreads();  // partials complete
  if (threadIdx.x < 64) sums[threadIdx.x] += sums[threadIdx.x + 64];
  __syncthreads();  // 64 partials complete
  if (threadIdx.x < 32) {
    // Each step reads what other lanes wrote in the previous step: __syncwarp orders them.
    for (int stride = 32; stride > 0; stride /= 2) {
      const float other = sums[threadIdx.x + stride < 64 ? threadIdx.x + stride : threadIdx.x];
      __syncwarp();  // everyone has read before anyone writes
      if (threadIdx.x < static_cast<unsigned>(stride)) sums[threadIdx.x] += other;
      __syncwarp();  // everyone has written before the next read
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = sums[0];
  }
}

cudaError_t block_sums_syncwarp_tail(const float* values, int count, float* partial, int blocks) {
  return simt::launch(block_sums_syncwarp_tail_kernel, blocks, kReduceThreads, 0, nullptr, values, count, partial);
}

constexpr int kTile = 16;

__global__ void tiled_matmul_kernel(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float a_tile[kTile][kTile];
  __shared__ float b_tile[kTile][kTile + 1];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    a_tile[threadIdx.y][threadIdx.x] =
        row < m && k0 + static_cast<int>(threadIdx.x) < k ? a[row * k + k0 + threadIdx.x] : 0.0f;
    b_tile[threadIdx.y][threadIdx.x] =
        col < n && k0 + static_cast<int>(threadIdx.y) < k ? b[(k0 + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();  // both tiles are loaded before anyone multiplies
    for (int i = 0; i < kTile; ++i) acc += a_tile[threadIdx.y][i] * b_tile[i][threadIdx.x];
    __syncthreads();  // everyone is done with the tiles before the next iteration overwrites them
  }
  if (row < m && col < n) c[row * n + col] = acc;
}

cudaError_t tiled_matmul(const float* a, const float* b, float* c, int m, int n, int k) {
  const dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  return simt::launch(tiled_matmul_kernel, grid, dim3(kTile, kTile), 0, nullptr, a, b, c, m, n, k);
}

// One warp per row; 4 warps per block.
__global__ void warp_softmax_kernel(const float* x, float* y, int rows, int cols) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps leave together
  float row_max = -INFINITY;
  for (int j = lane; j < cols; j += 32) row_max = fmaxf(row_max, x[row * cols + j]);
  row_max = warp_max(row_max);
  float sum = 0.0f;
  for (int j = lane; j < cols; j += 32) sum += __expf(x[row * cols + j] - row_max);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const float inverse = __fdividef(1.0f, sum);
  for (int j = lane; j < cols; j += 32) y[row * cols + j] = __expf(x[row * cols + j] - row_max) * inverse;
}

cudaError_t warp_softmax(const float* x, float* y, int rows, int cols) {
  return simt::launch(warp_softmax_kernel, (rows + 3) / 4, 128, 0, nullptr, x, y, rows, cols);
}

// One warp per row: each lane accumulates __dp4a over its packed columns, then a shuffle sum.
__global__ void int8_dot_kernel(const int* a, const int* b, int* out, int rows, int packed_cols) {
  const int row = blockIdx.x;
  int acc = 0;
  for (int j = threadIdx.x; j < packed_cols; j += 32) acc = __dp4a(a[row * packed_cols + j], b[j], acc);
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  if (threadIdx.x == 0 && row < rows) out[row] = acc;
}

cudaError_t int8_dot(const int* a_packed, const int* b_packed, int* out, int rows, int packed_cols) {
  return simt::launch(int8_dot_kernel, rows, 32, 0, nullptr, a_packed, b_packed, out, rows, packed_cols);
}

__global__ void reverse_chunks_kernel_(const float* in, float* out, int count) {
  SIMT_DYNAMIC_SHARED(float, chunk);
  const int base = blockIdx.x * blockDim.x;
  const int i = base + threadIdx.x;
  if (i < count) chunk[threadIdx.x] = in[i];
  __syncthreads();  // the chunk is complete before threads read each other's elements
  const int valid = min(static_cast<int>(blockDim.x), count - base);
  if (static_cast<int>(threadIdx.x) < valid) out[base + threadIdx.x] = chunk[valid - 1 - threadIdx.x];
}

cudaError_t reverse_chunks(const float* in, float* out, int count, int threads, size_t shared_bytes) {
  return simt::launch(reverse_chunks_kernel_, (count + threads - 1) / threads, threads, shared_bytes, nullptr, in, out,
                      count);
}

const void* reverse_chunks_kernel() {
  return reinterpret_cast<const void*>(&reverse_chunks_kernel_);
}

// 12 results per thread, checked against a CPU model in the test.
__global__ void warp_collectives_kernel(const int* in, int* out) {
  const int t = threadIdx.x;
  const int lane = t % 32;
  const int v = in[t];
  int* o = out + 12 * t;
  o[0] = __shfl_sync(0xffffffffu, v, 5);             // lane 5's value
  o[1] = __shfl_sync(0xffffffffu, v, lane + 3, 16);  // within 16-lane segments, wraps
  o[2] = __shfl_up_sync(0xffffffffu, v, 3, 16);      // keeps own value in the first 3 of a segment
  o[3] = __shfl_down_sync(0xffffffffu, v, 5);        // keeps own value in the last 5
  o[4] = __shfl_xor_sync(0xffffffffu, v, 9);
  o[5] = static_cast<int>(__ballot_sync(0xffffffffu, v % 3 == 0));
  o[6] = __any_sync(0xffffffffu, v == 7);
  o[7] = __all_sync(0xffffffffu, v >= 0);
  o[8] = __reduce_add_sync(0xffffffffu, v);
  o[9] = __reduce_max_sync(0xffffffffu, v);
  o[10] = static_cast<int>(__match_any_sync(0xffffffffu, v % 4));
  // A partial mask: only even lanes take part.
  if (lane % 2 == 0)
    o[11] = __shfl_xor_sync(0x55555555u, v, 2);
  else
    o[11] = -1;
}

cudaError_t warp_collectives(const int* in, int* out, int threads) {
  return simt::launch(warp_collectives_kernel, 1, threads, 0, nullptr, in, out);
}

// out[0] = count of odd, out[1] = all positive, out[2] = any == 42 (per block, block 0 only).
__global__ void block_collectives_kernel(const int* in, int* out) {
  const int v = in[threadIdx.x];
  const int odd = __syncthreads_count(v % 2 != 0);
  const int positive = __syncthreads_and(v > 0);
  const int has42 = __syncthreads_or(v == 42);
  if (threadIdx.x == 0) {
    out[0] = odd;
    out[1] = positive;
    out[2] = has42;
  }
}

cudaError_t block_collectives(const int* in, int* out, int threads) {
  return simt::launch(block_collectives_kernel, 1, threads, 0, nullptr, in, out);
}

// counters: [0] add, [1] sub, [2] max, [3] min, [4] CAS-claimed slot, [5] exch, [6] inc
__global__ void atomics_kernel(int* counters, float* float_sum, unsigned* bits) {
  const int global = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&counters[0], 1);
  atomicSub(&counters[1], 2);
  atomicMax(&counters[2], global);
  atomicMin(&counters[3], -global);
  if (atomicCAS(&counters[4], 0, global + 1) == 0) atomicAdd(&counters[5], 1);  // exactly one winner
  atomicExch(&counters[6], 7);
  atomicAdd(float_sum, 0.1f * static_cast<float>(global % 10));
  atomicOr(&bits[0], 1u << (global % 32));
  atomicAnd(&bits[1], ~(1u << (global % 16)));
  atomicInc(&bits[2], 1000000u);
}

cudaError_t atomics(int* counters, float* float_sum, unsigned* bits, int blocks, int threads) {
  return simt::launch(atomics_kernel, blocks, threads, 0, nullptr, counters, float_sum, bits);
}

__global__ void half_math_kernel(const __half2* x, __half2* y, const __nv_bfloat16* xb, __nv_bfloat16* yb, int pairs) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= pairs) return;
  const __half2 two = __float2half2_rn(2.0f);
  y[i] = __hfma2(h2exp(x[i]), two, x[i]);
  const __nv_bfloat16 v = xb[i];
  yb[i] = __hfma(hexp(v), __float2bfloat16(2.0f), v);
}

cudaError_t half_math(const __half2* x, __half2* y, const __nv_bfloat16* xb, __nv_bfloat16* yb, int pairs) {
  return simt::launch(half_math_kernel, (pairs + 63) / 64, 64, 0, nullptr, x, y, xb, yb, pairs);
}

__global__ void indices_3d_kernel(int* out) {
  const int block_linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int thread_linear = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int global = block_linear * blockDim.x * blockDim.y * blockDim.z + thread_linear;
  out[4 * global + 0] = threadIdx.x;
  out[4 * global + 1] = threadIdx.y;
  out[4 * global + 2] = threadIdx.z;
  out[4 * global + 3] = block_linear;
}

cudaError_t indices_3d(int* out, dim3 grid, dim3 block) {
  return simt::launch(indices_3d_kernel, grid, block, 0, nullptr, out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::simt_tests
