// Kernels with the bugs students make most, for the emulator's compute-sanitizer (memcheck,
// racecheck, initcheck): each faulty access carries a "FAULT(name)" marker, and test_checks.cpp
// requires the report to name that very line. The last kernels are clean and must stay silent.
#include "simt_test_kernels.h"

namespace inferlab::INFERLAB_BACKEND_NS::simt_tests {

// ---- memcheck ---------------------------------------------------------------------------------

__global__ void dynamic_shared_overrun_kernel(const float* in, float* out, int count) {
  SIMT_DYNAMIC_SHARED(float, buf);
  const int t = threadIdx.x;
  buf[t] = in[t];
  __syncthreads();
  out[t] = buf[t] + buf[t + 1];  // FAULT(dynamic_shared_overrun): the last thread reads buf[blockDim.x]
  (void)count;
}

cudaError_t dynamic_shared_overrun(const float* in, float* out, int threads) {
  return simt::launch(dynamic_shared_overrun_kernel, 1, threads, threads * sizeof(float), nullptr, in, out, threads);
}

__global__ void global_overrun_kernel(const float* in, float* out, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= count) out[i] = 2.0f * in[i < count ? i : 0];  // FAULT(global_overrun): <= writes out[count]
}

cudaError_t global_overrun(const float* in, float* out, int count) {
  return simt::launch(global_overrun_kernel, (count + 32) / 32, 32, 0, nullptr, in, out, count);
}

__global__ void read_kernel(const float* in, float* out, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = in[i] + 1.0f;  // FAULT(read_in)
}

cudaError_t read_after(const float* in, float* out, int count) {
  return simt::launch(read_kernel, (count + 31) / 32, 32, 0, nullptr, in, out, count);
}

__global__ void misaligned_vector_kernel(const float* in, float* out) {
  const float4 v = *reinterpret_cast<const float4*>(in + 1 + 4 * threadIdx.x);  // FAULT(misaligned)
  out[threadIdx.x] = v.x + v.y + v.z + v.w;
}

cudaError_t misaligned_vector(const float* in, float* out, int threads) {
  return simt::launch(misaligned_vector_kernel, 1, threads, 0, nullptr, in, out);
}

__global__ void static_shared_index_kernel(float* out) {
  __shared__ float tile[16];
  tile[threadIdx.x] = 1.0f;  // FAULT(static_shared_index): 17 threads, 16 elements
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x % 16];
}

cudaError_t static_shared_index(float* out) {
  return simt::launch(static_shared_index_kernel, 1, 17, 0, nullptr, out);
}

// ---- racecheck --------------------------------------------------------------------------------

// Thread 0 writes the block's total to shared memory and everyone reads it: no barrier between.
__global__ void unsynchronised_total_kernel(const float* in, float* out) {
  __shared__ float partial[128];
  __shared__ float total;
  const int t = threadIdx.x;
  partial[t] = in[t];
  __syncthreads();
  if (t == 0) {
    float sum = 0.0f;
    for (int i = 0; i < static_cast<int>(blockDim.x); ++i) sum += partial[i];
    total = sum;  // FAULT(total_write)
  }
  // BUG: a __syncthreads() is missing here.
  out[t] = partial[t] / total;  // FAULT(total_read)
}

cudaError_t unsynchronised_total(const float* in, float* out, int threads) {
  return simt::launch(unsynchronised_total_kernel, 1, threads, 0, nullptr, in, out);
}

// Exercise 2.2's block reduction with its second barrier removed: the next reduction's write of
// a slot races with a slow warp's read of it.
__device__ float block_sum(float value, float* slots) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  if (lane == 0) slots[warp] = value;  // FAULT(slot_write)
  __syncthreads();
  value = lane < warps ? slots[lane] : 0.0f;  // FAULT(slot_read)
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  // BUG: the second __syncthreads() (every thread has read slots) is missing.
  return value;
}

__global__ void two_reductions_kernel(const float* in, float* out) {
  __shared__ float slots[32];
  const float x = in[blockIdx.x * blockDim.x + threadIdx.x];
  const float sum = block_sum(x, slots);
  const float squares = block_sum(x * x, slots);
  if (threadIdx.x == 0) out[blockIdx.x] = squares - sum * sum / blockDim.x;
}

cudaError_t two_reductions(const float* in, float* out, int blocks, int threads) {
  return simt::launch(two_reductions_kernel, blocks, threads, 0, nullptr, in, out);
}

// Two threads write one element in the same interval.
__global__ void colliding_writes_kernel(float* out) {
  __shared__ float cells[32];
  cells[threadIdx.x / 2] = static_cast<float>(threadIdx.x);  // FAULT(colliding_write)
  __syncthreads();
  out[threadIdx.x] = threadIdx.x < 32 ? cells[threadIdx.x % 32] : 0.0f;
}

cudaError_t colliding_writes(float* out) {
  return simt::launch(colliding_writes_kernel, 1, 64, 0, nullptr, out);
}

// ---- initcheck --------------------------------------------------------------------------------

__global__ void unwritten_shared_kernel(float* out) {
  __shared__ float scratch[64];
  if (threadIdx.x < 32) scratch[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = scratch[threadIdx.x];  // FAULT(unwritten_shared): threads 32-63 read what nobody wrote
}

cudaError_t unwritten_shared(float* out) {
  return simt::launch(unwritten_shared_kernel, 1, 64, 0, nullptr, out);
}

__global__ void unwritten_dynamic_kernel(float* out) {
  SIMT_DYNAMIC_SHARED(float, buf);
  __syncthreads();
  out[threadIdx.x] = buf[threadIdx.x];  // FAULT(unwritten_dynamic)
}

cudaError_t unwritten_dynamic(float* out, int threads) {
  return simt::launch(unwritten_dynamic_kernel, 1, threads, threads * sizeof(float), nullptr, out);
}

__global__ void accumulate_kernel(const float* in, float* sum, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) atomicAdd(sum, in[i]);  // FAULT(unzeroed_accumulator): nobody zeroed *sum
}

cudaError_t accumulate(const float* in, float* sum, int count) {
  return simt::launch(accumulate_kernel, (count + 31) / 32, 32, 0, nullptr, in, sum, count);
}

// ---- clean: shared-memory atomics from every thread, a warp-synchronous tail with __syncwarp,
// and a block reduction with both barriers (none may be reported) ------------------------------

__global__ void clean_histogram_kernel(const int* values, int count, unsigned* bins) {
  __shared__ unsigned local[8];
  if (threadIdx.x < 8) local[threadIdx.x] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += blockDim.x) atomicAdd(&local[values[i] & 7], 1u);
  __syncthreads();
  if (threadIdx.x < 8) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}

cudaError_t clean_histogram(const int* values, int count, unsigned* bins) {
  return simt::launch(clean_histogram_kernel, 2, 96, 0, nullptr, values, count, bins);
}

__global__ void clean_warp_tail_kernel(const float* in, float* out) {
  __shared__ float s[64];
  const unsigned t = threadIdx.x;
  s[t] = in[t];
  __syncthreads();
  if (t < 32) {
    s[t] += s[t + 32];
    __syncwarp();
    for (unsigned offset = 16; offset > 0; offset /= 2) {
      const float other = t < offset ? s[t + offset] : 0.0f;
      __syncwarp();
      if (t < offset) s[t] += other;
      __syncwarp();
    }
  }
  if (t == 0) out[0] = s[0];
}

cudaError_t clean_warp_tail(const float* in, float* out) {
  return simt::launch(clean_warp_tail_kernel, 1, 64, 0, nullptr, in, out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::simt_tests
