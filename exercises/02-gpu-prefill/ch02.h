#pragma once
/// @file ch02.h
/// Chapter 02 exercises — the contract: three warm-up kernels (W1–W3: indexing, a reduction, a
/// tiled transpose), then three CUDA kernels, the building blocks of unfused prefill attention
/// on a GPU. Each exercise is one .cu file beside this header holding a
/// `__global__` kernel (yours to write) and its host launcher (given: it checks the shapes,
/// copies the inputs to the device, launches your kernel with simt::launch and copies the result
/// back). Each .cu file is compiled twice (see common/simt/simt.h): by g++ for the SIMT emulator
/// (namespace inferlab::sim::student — what the grader runs, no GPU needed) and, when nvcc is
/// found, for a real GPU (inferlab::cuda::student). The launchers hold the device memory in
/// DeviceBuffer objects — an output buffer starts poisoned (every byte 0xFF, NaN) —, check
/// every CUDA call with check_cuda and size the grid with blocks_for, all three from
/// common/simt/device_buffer.h. Device memory per call, for every exercise: at most the given
/// launcher's buffers (the inputs and the output), at least the inputs (your kernel reads them on
/// the device); the grader checks that each call launches a kernel and that its device-memory
/// peak lies between the two.
///
/// Graded by tests/02-gpu-prefill/test_student.cpp on the sim backend: fresh random inputs, odd
/// shapes, a float64 oracle, outputs poisoned with NaN (an element you forget to write fails),
/// and every launch run under several thread schedules (forward, reverse, shuffled) — a missing
/// `__syncthreads()` makes the result depend on the order and fails, a barrier that some threads
/// of a block never reach is reported by the emulator with the line. Run them on your code with
/// `./inferlab student test ch02` (it builds only this chapter and prints each failing test's
/// output) or `./inferlab grade --student exercises` (the score table); `./inferlab test` and the default
/// preset build solutions/, the reference, instead.
///
/// Each stub's launcher starts with `throw NotImplemented(...)`: delete that line once your
/// kernel is written.
///
/// ## Warm-ups W1–W3, before the attention kernels
///
/// Three small kernels that teach the moves the exercises below are made of: indexing a 2-D
/// grid (W1), a shared-memory reduction with its barriers (W2) and a tile staged in shared memory
/// (W3). They are numbered W1–W3, not 2.1–2.3, so that the attention exercises keep their
/// numbers (the grader's reports and the lessons name them). Graded like the exercises (same
/// checks, same device-memory rule), by the tests Ch02WarmupScaleAdd, Ch02WarmupVectorSum and
/// Ch02WarmupTranspose: fresh random inputs, odd sizes, a float64 oracle (W3: bit-exact), the
/// outputs poisoned with NaN, every launch under several thread schedules with the emulator's
/// memcheck, racecheck and initcheck on.
///
/// ## Warm-up W1 — indexing: a 2-D grid-stride elementwise kernel (scale_add_2d.cu)
///
/// `x` and `out` are [rows, cols], `row_scale` is [rows], `col_bias` is [cols], row-major. Write
/// `scale_add_2d_kernel` so that
///
///     out[r][c] = row_scale[r] · x[r][c] + col_bias[c].
///
/// Launch (given): block (32, 8) — threadIdx.x walks the columns, so the 32 threads of a warp
/// touch 32 consecutive addresses of one row (one coalesced access), threadIdx.y walks the rows;
/// grid (min(⌈cols/32⌉, 4), min(⌈rows/8⌉, 4)). The grid is capped at 4 × 4 blocks, as a real
/// launch is sized to a few waves of the GPU's SMs (streaming multiprocessors, the cores that run
/// blocks) rather than to the data: a matrix wider than 128 columns or taller than 32 rows has
/// more elements than the grid has threads. So thread (x, y) of block (bx, by) starts at row
/// r = by·8 + y and column c = bx·32 + x and strides by the grid — r += gridDim.y·blockDim.y,
/// c += gridDim.x·blockDim.x — until it passes the end (a grid-stride loop). rows and cols are any
/// sizes ≥ 1 (1, 7, 33, 300 …): the loops' conditions r < rows and c < cols are the bounds check;
/// a thread past the end must touch nothing (memcheck reports any access past an allocation).
/// Budget: one load of x, row_scale and col_bias and one store per element (row_scale[r] once per
/// row is better). Size hint: roughly 6 lines.
///
/// ## Warm-up W2 — a shared-memory block reduction, finished with warp shuffles (vector_sum.cu)
///
/// `x` is [n] (any n ≥ 1), `sum` is [1]. Write `block_sum_kernel(in, out, n)` so that block b
/// writes out[b] = the sum of in[i] over i = b·blockDim.x + threadIdx.x, stepping by
/// gridDim.x·blockDim.x. The launcher (given) runs it twice: over x with grid
/// min(⌈n/threads_per_block⌉, 32) into a buffer of partial sums, then with one block over those
/// partials into sum — the blocks of one launch cannot wait for each other, so the second level
/// of the reduction is a second launch. blockDim.x = threads_per_block, a power of two from 32 to
/// 1024. Three steps:
///   1. each thread adds its grid-strided elements in a register and writes the total to
///      `partial[threadIdx.x]` (a `__shared__ float partial[1024]`); `__syncthreads()` (barrier
///      1: every partial is written before any thread reads another's);
///   2. a tree: for s = blockDim.x/2, blockDim.x/4, … down to 32, threads t < s add partial[t + s]
///      to partial[t]; `__syncthreads()` after every step (barrier 2: step s/2 reads what other
///      threads wrote in step s). Every thread must reach both barriers: put the condition on
///      the addition, never around the barrier;
///   3. warp 0 finishes the 32 values left: v = partial[lane], then five
///      `__shfl_down_sync(0xffffffff, v, offset)` steps, offset 16, 8, 4, 2, 1, adding each —
///      no barrier (a shuffle exchanges registers within the warp) —; lane 0 writes out[blockIdx.x].
/// Budget: each element of x loaded once, one store per block; shared memory one float per thread;
/// no atomics (the order of the additions is fixed, so the result is the same bits under every
/// schedule). Size hint: roughly 15 lines.
///
/// ## Warm-up W3 — a tiled transpose through shared memory (transpose_tiled.cu)
///
/// `in` is [rows, cols], `out` is [cols, rows], row-major; out[c][r] = in[r][c], bit for bit.
/// Launch (given): grid (⌈cols/32⌉, ⌈rows/32⌉), block (32, 8): block (bx, by) moves the 32 × 32
/// tile whose top-left element is in[by·32][bx·32], and each thread moves 4 of its elements:
///   1. read: thread (x, y) loads in[by·32 + i][bx·32 + x] into tile[i][x] for i = y, y + 8,
///      y + 16, y + 24 — a warp reads 32 consecutive addresses of one row of in (coalesced);
///      skip the elements past rows or cols; `__syncthreads()`;
///   2. write: the block indices swap: thread (x, y) writes out[bx·32 + i][by·32 + x] =
///      tile[x][i] for the same four i — a warp writes 32 consecutive addresses of one row of out
///      (coalesced again) and reads a *column* of the tile; skip the elements past cols or rows.
/// A naive transpose (thread (x, y) copies in[y][x] to out[x][y]) makes one of the two accesses
/// strided: 32 different cache lines per warp instead of one. Shared memory makes both
/// coalesced. The tile is `__shared__ float tile[32][33]`: with 32 floats per row, the 32
/// elements of a column would sit in one of the 32 shared-memory banks and their reads would be
/// served one at a time (a 32-way bank conflict); one float of padding per row moves each row's
/// start one bank over, so a column spans all 32 banks. (The emulator cannot see bank conflicts:
/// the padding is not graded, only the result and the barrier.) Budget: one load and one store
/// per element; shared memory 32 × 33 floats. Size hint: roughly 12 lines.
///
/// ## Exercise 2.1 — attention scores, one thread per score (attention_scores.cu)
///
/// `q` is [num_heads, seq_len, head_dim], `k` is [num_kv_heads, seq_len, head_dim], `scores`
/// is [num_heads, seq_len, seq_len], all row-major. Write `scores_kernel` so that
///
///     scores[h][i][j] = (q[h][i] · k[g][j]) / √head_dim,   g = h / group_size,
///
/// where group_size = num_heads / num_kv_heads (grouped-query attention: consecutive query
/// heads share one KV head), and, when `causal`, scores[h][i][j] = −∞ for every key j > i.
/// Launch (given): grid (⌈seq_len/16⌉, ⌈seq_len/16⌉, num_heads), block (16, 16); thread (x, y)
/// of block (bx, by, h) owns query i = by·16 + y and key j = bx·16 + x. seq_len is rarely a
/// multiple of 16: threads past the end write nothing.
/// Budget per thread: 2·head_dim global loads (one row of Q, one row of K) and one store; a
/// masked score needs no load at all. Size hint: roughly 10 lines.
///
/// ## Exercise 2.2 — row softmax with warp shuffles and a block reduction (softmax_rows.cu)
///
/// `scores` and `probs` are [rows, row_len]. Write `softmax_rows_kernel` so that
/// probs[r][j] = exp(s_j − m) / Σ_k exp(s_k − m) with s = scores[r] and m = max_k s_k; entries
/// of −∞ (masked keys) become exactly 0. Every row has at least one finite entry; logits can be
/// in the hundreds, so subtract the max.
/// Launch (given): one block per row, blockDim.x = threads_per_block — any multiple of 32 from
/// 32 to 1024 — and any row_len ≥ 1, shorter or much longer than the block: each thread
/// strides through the row (j = threadIdx.x, j += blockDim.x). Each of the two reductions (max,
/// then sum) has two steps:
///   1. within a warp: five `__shfl_xor_sync(0xffffffff, v, offset)` steps, offset 16, 8, 4, 2,
///      1, after which every lane holds the warp's result (no shared memory, no barrier);
///   2. across warps: lane 0 of each warp writes its result to a `__shared__` slot,
///      `__syncthreads()`, then every warp reduces the slots (lanes past the number of warps
///      contribute −∞ or 0) the same way; a second `__syncthreads()` before the slots are
///      written again.
/// Budget per row: read each score at most 3 times (max, sum, write), write each probability
/// once; shared memory: one float per warp (32 floats). No atomics. Size hint: roughly 35 lines
/// (a warp-reduce and a block-reduce helper of about 10 lines each, the kernel about 15).
///
/// ## Exercise 2.3 — tiled matrix product C = A·B (gemm_tiled.cu)
///
/// `a` is [M, K], `b` is [K, N], `c` is [M, N], row-major; M, N and K are any sizes ≥ 1 (1, 17,
/// 33, 127 …), not multiples of the tile. Write `gemm_tiled_kernel` so that c = a·b, staging
/// 16×16 tiles of A and B in shared memory.
/// Launch (given): grid (⌈N/16⌉, ⌈M/16⌉), block (16, 16); thread (x, y) of block (bx, by)
/// computes c[by·16 + y][bx·16 + x]. For each 16-wide step k0 of K: each thread loads one
/// element of the A tile (a[row][k0 + x]) and one of the B tile (b[k0 + y][col]) into
/// `__shared__` arrays — 0 where the element lies outside A or B —, `__syncthreads()`, 16
/// multiply-adds from the tiles, `__syncthreads()` before the next step overwrites them. Every
/// thread of the block must reach every barrier: never `return` early for a thread outside C;
/// guard its loads and its final store instead.
/// Budget: 2 global loads per thread per K step and 1 store per thread: in all
/// M·K·⌈N/16⌉ + K·N·⌈M/16⌉ loads, 16× fewer than one thread per element reading whole rows
/// and columns. Size hint: roughly 20 lines.

#include "common/tensor.h"

/// Declares the chapter-02 exercise launchers in namespace inferlab::NS::student (NS = sim or
/// cuda; see the file's documentation for the tasks).
#define INFERLAB_DECLARE_CH02_EXERCISES(NS)                                                                  \
  namespace inferlab::NS::student {                                                                          \
  /* Warm-up W1: out[r][c] = row_scale[r] * x[r][c] + col_bias[c], a 2-D grid-stride loop. */                \
  void scale_add_2d(const Tensor<float>& x, const Tensor<float>& row_scale, const Tensor<float>& col_bias,   \
                    Tensor<float>& out);                                                                     \
  /* Warm-up W2: sum[0] = the sum of x, a shared-memory tree and a warp-shuffle finish, two launches. */     \
  void vector_sum(const Tensor<float>& x, Tensor<float>& sum, int threads_per_block = 256);                  \
  /* Warm-up W3: out = the transpose of in, through a padded 32x32 shared-memory tile. */                    \
  void transpose_tiled(const Tensor<float>& in, Tensor<float>& out);                                         \
  /* Exercise 2.1: scores = Q.K^T / sqrt(head_dim), -inf above the diagonal when causal. */                  \
  void attention_scores(const Tensor<float>& q, const Tensor<float>& k, bool causal, Tensor<float>& scores); \
  /* Exercise 2.2: probs = the softmax of each row of scores, one block of threads_per_block. */             \
  void softmax_rows(const Tensor<float>& scores, Tensor<float>& probs, int threads_per_block = 128);         \
  /* Exercise 2.3: c = a.b with 16x16 shared-memory tiles. */                                                \
  void gemm_tiled(const Tensor<float>& a, const Tensor<float>& b, Tensor<float>& c);                         \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CH02_EXERCISES(sim)
INFERLAB_DECLARE_CH02_EXERCISES(cuda)
/// @endcond
