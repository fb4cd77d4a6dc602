#pragma once
// Launchers for the SIMT emulator's own tests. The .cu files are compiled by
// inferlab_add_kernels() for sim (and, with nvcc, cuda); a test includes this header after
// simt/simt.h, so the declarations land in the namespace of its compiler.
#include "simt/simt.h"

namespace inferlab::INFERLAB_BACKEND_NS::simt_tests {

// ---- correct kernels (same bytes under every schedule) ----------------------------------------
// Per-block sums of `values` (shared-memory tree down to 32, then warp shuffles): partial[b].
cudaError_t block_sums(const float* values, int count, float* partial, int blocks, int threads);
// Same, but the last 32 steps use the legacy shared-memory tail WITH __syncwarp between steps.
cudaError_t block_sums_syncwarp_tail(const float* values, int count, float* partial, int blocks);
// C[M x N] = A[M x K] * B[K x N], row-major, 16x16 tiles in shared memory.
cudaError_t tiled_matmul(const float* a, const float* b, float* c, int m, int n, int k);
// Row-wise softmax, one warp per row, max and sum by __shfl_xor_sync.
cudaError_t warp_softmax(const float* x, float* y, int rows, int cols);
// out[row] = sum_i a[row][i] * b[i] over int8 values packed 4 per int, with __dp4a.
cudaError_t int8_dot(const int* a_packed, const int* b_packed, int* out, int rows, int packed_cols);
// Reverses each block-sized chunk of `in` through dynamic shared memory of `shared_bytes`.
cudaError_t reverse_chunks(const float* in, float* out, int count, int threads, size_t shared_bytes);
// The same kernel's address, for cudaFuncSetAttribute.
const void* reverse_chunks_kernel();
// Warp collectives: for each thread t writes 12 ints to out[12*t ...] (see the .cu).
cudaError_t warp_collectives(const int* in, int* out, int threads);
// Block collectives and atomics: see the .cu.
cudaError_t block_collectives(const int* in, int* out, int threads);
cudaError_t atomics(int* counters, float* float_sum, unsigned* bits, int blocks, int threads);
// fp16 / bf16: y = exp(x) * 2 + x  computed in __half2 and in __nv_bfloat16.
cudaError_t half_math(const __half2* x, __half2* y, const __nv_bfloat16* xb, __nv_bfloat16* yb, int pairs);
// Writes the 3-D thread and block indices of every thread: out[4*global] = {x,y,z,block linear}.
cudaError_t indices_3d(int* out, dim3 grid, dim3 block);

// ---- intrinsics that no lesson kernel uses yet (intrinsic_kernels.cu) --------------------------
// Warp reductions and __activemask in a 40-thread block (a full warp and an 8-lane one): for each
// thread t writes 11 ints to out[11*t ...] (see the .cu).
cudaError_t warp_reductions(const int* in, int* out, int threads);
// One thread per element: bit counts, __dp4a, float/int reinterpretation, __float2int_rn,
// rsqrtf, __logf and __ldg. ints[13*i ...] and floats[3*i ...] (see the .cu).
cudaError_t scalar_intrinsics(const unsigned* bits, const unsigned long long* wide, const float* values, int* ints,
                              float* floats, int count);
// The targets of atomic_overloads(): one of each type that CUDA's atomics take.
struct AtomicTargets {
  unsigned add_u;
  unsigned long long add_ull;
  double add_d;
  unsigned sub_u;
  unsigned exch_u;
  unsigned long long exch_ull;
  float exch_f;
  unsigned max_u, min_u;
  long long max_ll, min_ll;
  unsigned long long max_ull, min_ull;
  unsigned dec;
  int and_i, or_i, xor_i;
  unsigned xor_u;
  unsigned cas_u;
  unsigned long long cas_ull;
  unsigned cas_u_winners, cas_ull_winners;
};
// Every thread applies each atomic once to *targets; exch_old[g] = what atomicExch(&exch_u)
// returned to global thread g.
cudaError_t atomic_overloads(AtomicTargets* targets, unsigned* exch_old, int blocks, int threads);
// CUDA's "last block" reduction: each 64-thread block writes its partial sum, __threadfence(),
// takes a ticket with atomicInc(ticket, blocks - 1); the block with the last ticket adds the
// partials into *total (the ticket wraps back to 0).
cudaError_t threadfence_sum(const float* values, int count, float* partial, unsigned* ticket, float* total, int blocks);
// 16-bit math per element: y[7*i ...] = hexp, hexp2, hlog, hsqrt, hrsqrt, hrcp of x[i] and
// __hfma(x, x, x); the pair forms (h2exp, …, __hfma2) for the __half2 / __nv_bfloat162 overloads.
cudaError_t half_unary(const __half* x, __half* y, int count);
cudaError_t half_unary(const __nv_bfloat16* x, __nv_bfloat16* y, int count);
cudaError_t half_unary(const __half2* x, __half2* y, int count);
cudaError_t half_unary(const __nv_bfloat162* x, __nv_bfloat162* y, int count);

// ---- wrong kernels (each must be caught) ------------------------------------------------------
// No __syncthreads between filling the shared tile and reading a neighbour's element.
cudaError_t missing_barrier_after_load(const float* in, float* out, int count);
// Tiled matmul without the barrier at the end of the k-loop (the next tile overwrites in use).
cudaError_t matmul_missing_second_barrier(const float* a, const float* b, float* c, int m, int n, int k);
// The legacy warp-synchronous reduction tail, without __syncwarp.
cudaError_t block_sums_unsynced_tail(const float* values, int count, float* partial, int blocks);
// __syncthreads() inside `if (threadIdx.x < 16)`, another one in the else branch.
cudaError_t barrier_in_branch(float* out);
// Thread 0 returns early; the others wait at __syncthreads().
cudaError_t barrier_after_early_exit(float* out);
// Lanes 16..31 exit; lanes 0..15 shuffle with the full mask.
cudaError_t shuffle_exited_lane(float* out);
// Writes out[count] (one past the end).
cudaError_t out_of_bounds_write(float* out, int count);
// Indexes a 32-element static __shared__ array with threadIdx.x for 33 threads.
cudaError_t static_shared_overflow(float* out);
// 33 threads with the full mask: lane 32 is in a second, 1-thread warp that asks for 32 lanes.
cudaError_t shuffle_missing_lanes(float* out);

// ---- kernels with the bugs students make most (checked_kernels.cu; test_checks.cpp) -------------

cudaError_t dynamic_shared_overrun(const float* in, float* out, int threads);
cudaError_t global_overrun(const float* in, float* out, int count);
cudaError_t read_after(const float* in, float* out, int count);
cudaError_t misaligned_vector(const float* in, float* out, int threads);
cudaError_t static_shared_index(float* out);
cudaError_t unsynchronised_total(const float* in, float* out, int threads);
cudaError_t two_reductions(const float* in, float* out, int blocks, int threads);
cudaError_t colliding_writes(float* out);
cudaError_t unwritten_shared(float* out);
cudaError_t unwritten_dynamic(float* out, int threads);
cudaError_t accumulate(const float* in, float* sum, int count);
cudaError_t clean_histogram(const int* values, int count, unsigned* bins);
cudaError_t clean_warp_tail(const float* in, float* out);

}  // namespace inferlab::INFERLAB_BACKEND_NS::simt_tests
