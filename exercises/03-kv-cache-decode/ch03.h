#pragma once
/// @file ch03.h
/// Chapter 03 exercises — the contract: the two CUDA kernels of one decode step. A decode step
/// first appends each sequence's new token (its K and V) to the KV cache, then lets the new
/// query attend to every cached token. Each exercise is one .cu file beside this header holding
/// a `__global__` kernel (yours to write) and its host launcher (given: it checks the shapes and
/// the capacity, copies the inputs to the device, launches your kernel with simt::launch and
/// copies the result back). Each .cu file is compiled twice (see common/simt/simt.h): by g++ for
/// the SIMT emulator (namespace inferlab::sim::student — what the grader runs, no GPU needed)
/// and, when nvcc is found, for a real GPU (inferlab::cuda::student).
///
/// The cache (fp32 only here; the lab's cuda/decode also reads an fp16 cache) is two row-major
/// tensors, K and V, each [batch, num_kv_heads, max_seq_len, head_dim], and one length per
/// sequence: sequence b holds lengths[b] tokens in slots 0 … lengths[b]−1 of each of its KV
/// heads. Element c of token t of KV head g of sequence b sits at flat index
///
///     ((b · num_kv_heads + g) · max_seq_len + t) · head_dim + c.
///
/// Memory for max_seq_len tokens is reserved for every sequence; the slots past each length
/// hold NaN (poison), so a kernel that reads one of them produces NaN and fails.
///
/// Graded by tests/03-kv-cache-decode/test_student.cpp on the sim backend: fresh random
/// inputs, odd shapes (ragged batches, lengths 1, 2, 31, 33 …, head_dim 7 … 128, GQA ratios
/// 1/2/4/8), a float64 oracle, outputs poisoned with NaN, every byte of the cache compared after
/// an append, and launches run under several thread schedules (forward, reverse, shuffled). Each
/// call runs in a sandboxed child process and must launch your kernel (an append that is refused
/// launches none). Run them on your code with `./inferlab student test ch03` (it builds only
/// this chapter and prints each failing test's output) or `./inferlab grade` (the default preset
/// builds solutions/ instead). The two exercises are graded separately: the
/// decode tests append with the lab's CPU append, and the append tests decode with the lab's CPU
/// decode.
///
/// Each stub's launcher throws `NotImplemented(...)` after its checks: delete that line once
/// your kernel is written.
///
/// ## Exercise 3.1 — append the new token to the cache (kv_append.cu)
///
/// `k_new` and `v_new` are [batch, num_kv_heads, head_dim]: the new token's key and value for
/// every KV head of every sequence. Write `kv_append_kernel` so that, for every sequence b and
/// KV head g, slot t = lengths[b] of KV head g of sequence b receives k_new[b][g] (in K) and
/// v_new[b][g] (in V). Nothing else of the cache changes: the grader compares every byte,
/// the poisoned slots included. The launcher (given) has already refused a full sequence
/// (lengths[b] = max_seq_len: std::invalid_argument, nothing written) and increments the
/// lengths after your kernel, so every length your kernel sees is valid and the tests cannot
/// pass it another. Guard the slot anyway (write only when 0 ≤ lengths[b] < max_seq_len), as the
/// lab's cuda/append does: a caller with corrupt lengths must lose a token rather than overwrite
/// the next head's cache. The grader does not test that branch.
/// Launch (given): grid (num_kv_heads, batch), block (64); block (g, b) copies one row of K and
/// one of V, its threads striding through the row (c = threadIdx.x, c += blockDim.x) so that
/// consecutive threads touch consecutive addresses. head_dim may be smaller than the block (7)
/// or not a multiple of it (80).
/// Budget per block: one load of lengths[b] per thread, 2·head_dim loads and 2·head_dim stores in
/// all; no other cache element is read. Size hint: roughly 8 lines.
///
/// ## Exercise 3.2 — decode attention, one block per (query head, sequence) (decode_attention.cu)
///
/// `q` and `out` are [batch, num_heads, head_dim]: one new query token per sequence and head.
/// Write `decode_kernel` so that
///
///     out[b][h] = softmax(q[b][h] · K[b][g]ᵀ / √head_dim) · V[b][g],   g = h / group_size,
///
/// where K[b][g] and V[b][g] are the first L = lengths[b] rows of KV head g of sequence b (the
/// new token is already appended, so no causal mask: every cached token is visible) and
/// group_size = num_heads / num_kv_heads (grouped-query attention: consecutive query heads
/// share one KV head). Every sequence has its own L ≥ 1 (a ragged batch): never touch a slot at
/// or past L — it holds NaN — nor scores[L]: for the batch's longest sequence that is one float
/// past the dynamic shared memory, which the emulator's memcheck reports at your line. Logits can be in the hundreds: subtract the max before exp.
/// Launch (given): grid (num_heads, batch), blockDim.x = threads_per_block — any multiple of 32
/// from 32 to 1024 —, dynamic shared memory of head_dim + max_length floats (max_length = the
/// longest L of the batch): `q_scaled` [head_dim] then `scores` [max_length]. Block (h, b):
///   1. q_scaled[c] = q[b][h][c] / √head_dim (the threads stride through c); `__syncthreads()`;
///   2. scores, one warp per key: warp w takes keys j = w, w + warps, …; its 32 lanes split the
///      dot product q_scaled · K[j] (lane takes c = lane, lane + 32, …) and add their partial
///      sums with five `__shfl_xor_sync` steps (as in exercise 2.2); lane 0 writes scores[j];
///      `__syncthreads()`;
///   3. softmax over scores[0 … L−1]: the block's max (a block reduction, as in exercise 2.2),
///      scores[j] = exp(scores[j] − max) in place, the block's sum of them;
///   4. output, one thread per dimension: thread c (striding) computes
///      Σ_j scores[j] · V[j][c] / sum and writes out[b][h][c] — for each j consecutive threads
///      read consecutive elements of the row V[j].
/// Every thread must reach every barrier (the reductions' too): no early return.
/// Budget per block: head_dim loads of q, L·head_dim loads of K and L·head_dim of V (each
/// cached element read exactly once per query head), lengths[b] once per thread, head_dim
/// stores; shared memory as given plus one float per warp for the reductions. No atomics.
/// Device memory per call: the given launcher's q, out, both caches and the lengths, 4·(2·batch·
/// num_heads·head_dim + 2·batch·num_kv_heads·max_seq_len·head_dim + batch) bytes — no more (the
/// scores live in shared memory, never in a global buffer) and no less than the two caches (the
/// kernel reads them on the device); the grader checks that each call launches a kernel and that
/// its device-memory peak lies between the two.
/// Size hint: roughly 45 lines (a warp-sum and a block-reduce helper of about 10 lines each,
/// the kernel about 25).

#include <cstdint>
#include <vector>

#include "common/tensor.h"

/// Declares the chapter-03 exercise launchers in namespace inferlab::NS::student (NS = sim or
/// cuda; see the file's documentation for the tasks).
#define INFERLAB_DECLARE_CH03_EXERCISES(NS)                                                                    \
  namespace inferlab::NS::student {                                                                            \
  /* Exercise 3.1: write k_new[b], v_new[b] at slot lengths[b] of sequence b, then ++lengths[b]. */            \
  void kv_append(Tensor<float>& k_cache, Tensor<float>& v_cache, std::vector<int32_t>& lengths,                \
                 const Tensor<float>& k_new, const Tensor<float>& v_new);                                      \
  /* Exercise 3.2: out[b][h] = attention of q[b][h] over the first lengths[b] cached tokens. */                \
  void decode_attention(const Tensor<float>& q, const Tensor<float>& k_cache, const Tensor<float>& v_cache,    \
                        const std::vector<int32_t>& lengths, Tensor<float>& out, int threads_per_block = 128); \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CH03_EXERCISES(sim)
INFERLAB_DECLARE_CH03_EXERCISES(cuda)
/// @endcond
