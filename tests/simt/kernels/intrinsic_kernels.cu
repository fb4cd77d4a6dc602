// Kernels for the emulator's intrinsics that no lesson kernel uses yet: warp reductions and
// __activemask, bit intrinsics, reinterpretation, __float2int_rn, rsqrtf, __logf, __ldg, the
// atomics' other overloads, __threadfence, and the 16-bit math. test_intrinsics.cpp checks each
// against CUDA's documented semantics; nvcc compiles the same file.
#include "simt_test_kernels.h"

namespace inferlab::INFERLAB_BACKEND_NS::simt_tests {

// 11 results per thread. The block has 40 threads: warp 1 holds lanes 0-7 only, so every
// collective names the lanes that exist (not __activemask(), which does not make a warp converge).
__global__ void warp_reductions_kernel(const int* in, int* out) {
  const int t = threadIdx.x;
  const int lane = t % 32;
  const unsigned lanes = blockDim.x - t / 32 * 32;
  const unsigned existing = lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1;
  const int v = in[t];
  const unsigned u = static_cast<unsigned>(v);
  int* o = out + 11 * t;
  o[0] = static_cast<int>(__activemask());  // nobody has exited yet
  o[1] = static_cast<int>(__reduce_add_sync(existing, u));
  o[2] = __reduce_add_sync(existing, v);
  o[3] = __reduce_min_sync(existing, v);
  o[4] = static_cast<int>(__reduce_min_sync(existing, u));  // negative values are large unsigned
  o[5] = __reduce_max_sync(existing, v);
  o[6] = static_cast<int>(__reduce_max_sync(existing, u));
  o[7] = static_cast<int>(__reduce_and_sync(existing, u));
  o[8] = static_cast<int>(__reduce_or_sync(existing, u));
  o[9] = static_cast<int>(__reduce_xor_sync(existing, u));
  // Every fourth lane leaves, before a __syncwarp of the others. Exited lanes are never active
  // and the caller always is; which other lanes are converged with it is the scheduler's choice
  // (the emulator: a lane that ran ahead to the end has exited), so only that is checked.
  if (lane % 4 == 3) {
    o[10] = -1;
    return;
  }
  __syncwarp(existing & 0x77777777u);
  const unsigned later = __activemask();
  o[10] = (later & ~0x77777777u) == 0 && ((later >> lane) & 1u) != 0;
}

cudaError_t warp_reductions(const int* in, int* out, int threads) {
  return simt::launch(warp_reductions_kernel, 1, threads, 0, nullptr, in, out);
}

__global__ void scalar_intrinsics_kernel(const unsigned* bits, const unsigned long long* wide, const float* values,
                                         int* ints, float* floats, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const unsigned u = __ldg(&bits[i]);
  const unsigned next = __ldg(&bits[(i + 1) % count]);
  const unsigned long long w = __ldg(&wide[i]);
  const float f = __ldg(&values[i]);
  int* o = ints + 13 * i;
  o[0] = __popc(u);
  o[1] = __popcll(w);
  o[2] = __clz(static_cast<int>(u));
  o[3] = __clzll(static_cast<long long>(w));
  o[4] = __ffs(static_cast<int>(u));
  o[5] = __ffsll(static_cast<long long>(w));
  o[6] = __dp4a(static_cast<int>(u), static_cast<int>(next), -7);  // signed bytes
  o[7] = static_cast<int>(__dp4a(u, next, 7u));                    // unsigned bytes
  o[8] = __float_as_int(f);
  o[9] = static_cast<int>(__float_as_uint(f));
  o[10] = __float_as_int(__int_as_float(static_cast<int>(u)));
  o[11] = static_cast<int>(__float_as_uint(__uint_as_float(u)));
  o[12] = fabsf(f) < 1e9f ? __float2int_rn(f) : 0;  // out of int's range: undocumented
  float* r = floats + 3 * i;
  r[0] = rsqrtf(f);
  r[1] = __logf(f);
  r[2] = __int_as_float(static_cast<int>(u));
}

cudaError_t scalar_intrinsics(const unsigned* bits, const unsigned long long* wide, const float* values, int* ints,
                              float* floats, int count) {
  return simt::launch(scalar_intrinsics_kernel, (count + 63) / 64, 64, 0, nullptr, bits, wide, values, ints, floats,
                      count);
}

__global__ void atomic_overloads_kernel(AtomicTargets* a, unsigned* exch_old) {
  const unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned scrambled = g * 2654435761u;  // wraps: large and small values in no order
  const long long centred = (static_cast<long long>(g) - 100) * 10000000000ll;  // beyond 32 bits, signed
  atomicAdd(&a->add_u, g % 7);
  atomicAdd(&a->add_ull, (1ull << 40) + g);
  atomicAdd(&a->add_d, 0.5);
  atomicSub(&a->sub_u, 1u);  // from 0: wraps below zero
  exch_old[g] = atomicExch(&a->exch_u, g + 1);
  atomicExch(&a->exch_ull, static_cast<unsigned long long>(g + 1) << 33);
  atomicExch(&a->exch_f, static_cast<float>(g));
  atomicMax(&a->max_u, scrambled);
  atomicMin(&a->min_u, scrambled);
  atomicMax(&a->max_ll, centred);
  atomicMin(&a->min_ll, centred);
  atomicMax(&a->max_ull, static_cast<unsigned long long>(scrambled) << 20);
  atomicMin(&a->min_ull, static_cast<unsigned long long>(scrambled) << 20);
  atomicDec(&a->dec, 4u);
  atomicAnd(&a->and_i, ~(1 << (g % 31)));
  atomicOr(&a->or_i, 1 << (g % 31));
  atomicXor(&a->xor_i, 1 << (g % 31));
  atomicXor(&a->xor_u, scrambled);
  if (atomicCAS(&a->cas_u, 0u, g + 1) == 0u) atomicAdd(&a->cas_u_winners, 1u);  // exactly one winner
  if (atomicCAS(&a->cas_ull, 0ull, static_cast<unsigned long long>(g + 1) << 32) == 0ull)
    atomicAdd(&a->cas_ull_winners, 1u);
}

cudaError_t atomic_overloads(AtomicTargets* targets, unsigned* exch_old, int blocks, int threads) {
  return simt::launch(atomic_overloads_kernel, blocks, threads, 0, nullptr, targets, exch_old);
}

constexpr int kFenceThreads = 64;

__global__ void threadfence_sum_kernel(const float* values, int count, float* partial, unsigned* ticket, float* total) {
  __shared__ float sums[kFenceThreads];
  __shared__ bool is_last;
  float mine = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) mine += values[i];
  sums[threadIdx.x] = mine;
  __syncthreads();  // every thread's sum is in shared memory before thread 0 adds them
  if (threadIdx.x == 0) {
    float block_sum = 0.0f;
    for (int t = 0; t < kFenceThreads; ++t) block_sum += sums[t];
    partial[blockIdx.x] = block_sum;
    __threadfence();  // the partial is visible to every block before the ticket says it is there
    is_last = atomicInc(ticket, gridDim.x - 1) == gridDim.x - 1;
  }
  __syncthreads();  // is_last is written before anyone reads it
  if (is_last && threadIdx.x == 0) {
    const volatile float* partials = partial;  // written by other blocks during this launch
    float sum = 0.0f;
    for (unsigned b = 0; b < gridDim.x; ++b) sum += partials[b];
    *total = sum;
  }
}

cudaError_t threadfence_sum(const float* values, int count, float* partial, unsigned* ticket, float* total,
                            int blocks) {
  return simt::launch(threadfence_sum_kernel, blocks, kFenceThreads, 0, nullptr, values, count, partial, ticket, total);
}

// T is __half, __nv_bfloat16 (the scalar functions) or __half2, __nv_bfloat162 (the pair ones).
template <class T>
__device__ void half_unary_at(const T x, T* y) {
  if constexpr (sizeof(T) == 2) {
    y[0] = hexp(x);
    y[1] = hexp2(x);
    y[2] = hlog(x);
    y[3] = hsqrt(x);
    y[4] = hrsqrt(x);
    y[5] = hrcp(x);
    y[6] = __hfma(x, x, x);
  } else {
    y[0] = h2exp(x);
    y[1] = h2exp2(x);
    y[2] = h2log(x);
    y[3] = h2sqrt(x);
    y[4] = h2rsqrt(x);
    y[5] = h2rcp(x);
    y[6] = __hfma2(x, x, x);
  }
}

template <class T>
__global__ void half_unary_kernel(const T* x, T* y, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) half_unary_at(x[i], y + 7 * i);
}

template <class T>
cudaError_t launch_half_unary(const T* x, T* y, int count) {
  return simt::launch(half_unary_kernel<T>, (count + 63) / 64, 64, 0, nullptr, x, y, count);
}

cudaError_t half_unary(const __half* x, __half* y, int count) {
  return launch_half_unary(x, y, count);
}
cudaError_t half_unary(const __nv_bfloat16* x, __nv_bfloat16* y, int count) {
  return launch_half_unary(x, y, count);
}
cudaError_t half_unary(const __half2* x, __half2* y, int count) {
  return launch_half_unary(x, y, count);
}
cudaError_t half_unary(const __nv_bfloat162* x, __nv_bfloat162* y, int count) {
  return launch_half_unary(x, y, count);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::simt_tests
