#pragma once
/// @file ch05.h
/// Chapter 05 exercises — the contract: fused attention, in three pieces. Fusion keeps the
/// L×L score matrix out of memory by processing the keys in blocks and carrying, for every
/// query row, a running softmax state that is corrected as larger scores turn up (the "online
/// softmax"). Exercise 5.1 writes that update for one row, on the CPU; exercise 5.2 puts it in
/// the inner loop of a FlashAttention-style CUDA kernel over shared-memory K/V tiles; exercise
/// 5.3 writes the reduce of split-KV decode (flash-decoding), which merges the states of
/// several slices of a long context into the exact output.
///
/// Exercise 5.1 is plain C++ (online_softmax_update.cpp, namespace inferlab::student). The
/// other two are .cu files holding a `__global__` kernel (yours to write) and its host launcher
/// (given: it checks the shapes, copies the inputs to the device in DeviceBuffer objects — see
/// common/simt/device_buffer.h —, launches your kernel with simt::launch and copies the result
/// back). Each .cu file is compiled twice (see common/simt/simt.h): by g++ for the SIMT emulator
/// (namespace inferlab::sim::student — what the grader runs, no GPU needed) and, when nvcc is
/// found, for a real GPU (inferlab::cuda::student). The three exercises are graded separately:
/// nothing of 5.1 is used by 5.2 or 5.3 (the kernel of 5.2 holds its own copy of the update).
///
/// Graded by tests/05-fused-attention/test_student.cpp against the float64 oracles of chapters
/// 02 and 03 (kernels/attention/attention.h attention_reference, kernels/decode/decode.h
/// decode_reference): fresh random inputs, odd shapes, logits in the hundreds, outputs
/// poisoned with NaN (an element you forget to write fails), and the kernels run on the sim
/// backend under several thread schedules (forward, reverse, shuffled) — a missing
/// `__syncthreads()` makes the result depend on the order and fails. Run them on your code with
/// `./inferlab student test ch05` (it builds only this chapter and prints each failing test's
/// output) or `./inferlab grade --student exercises` (the score table); `./inferlab test` and the default
/// preset build solutions/, the reference, instead.
///
/// Each stub throws `NotImplemented(...)` after its checks: delete that line once your code is
/// written.
///
/// ## The online softmax (the lesson's notation)
///
/// For one query row with scaled scores s_j (−∞ for a masked key) and value rows V[j], the
/// output is softmax(s)·V = Σ_j exp(s_j − m)·V[j] / Σ_j exp(s_j − m) for any m; taking m =
/// max_j s_j keeps every exponential ≤ 1. Processing the keys in blocks, the row carries a state
///
///     m    the largest score seen so far (−∞ before any finite score),
///     l    Σ exp(s_j − m) over the scores seen,
///     acc  Σ exp(s_j − m)·V[j] over the scores seen (head_dim floats),
///
/// and the output is acc / l once every key has been seen. A new block of scores s_j with
/// value rows V[j] updates it:
///
///     m'   = max(m, max_j s_j)
///     α    = exp(m − m')               (rescales the old terms; 0 while m = −∞)
///     p_j  = exp(s_j − m')
///     l'   = α·l   + Σ_j p_j
///     acc' = α·acc + Σ_j p_j·V[j]
///
/// The blocks may come in any order and any sizes: the result is the same softmax·V. One
/// trap: while nothing finite has been seen (m = −∞), a block that is empty or entirely masked
/// has m' = −∞ too, and α = exp(−∞ − (−∞)) = exp(NaN): such a block must leave the state
/// unchanged.
///
/// ## Exercise 5.1 — the online-softmax update (online_softmax_update.cpp)
///
/// See online_softmax_update(): the update above, for one row, in fp32. Graded by splitting the
/// keys of every query row of a (causal or not) attention problem into blocks — one block,
/// blocks of one key, random sizes including empty blocks, and the same blocks in reverse and
/// shuffled order (so that entirely masked blocks come first) — and comparing acc / l with the
/// float64 prefill oracle. Budget: read each score twice (its max, its weight) and each value
/// row once. Size hint: roughly 15 lines.
///
/// ## Exercise 5.2 — the fused inner loop: a flash-attention kernel (flash_attention.cu)
///
/// Layouts as in chapter 02 (row-major): `q` and `out` are [num_heads, seq_len, head_dim], `k`
/// and `v` are [num_kv_heads, seq_len, head_dim]; query head h reads KV head g = h / group_size
/// (group_size = num_heads / num_kv_heads). Write `flash_attention_kernel` so that
///
///     out[h][i] = softmax_j(q[h][i] · k[g][j] / √head_dim) · v[g][j],
///
/// over the keys j ≤ i when `causal`, over all keys otherwise — without ever writing a score to
/// global memory. head_dim is 1 … 128; seq_len is any size ≥ 1 (1, 2, 31, 33, 127, 257 …), not a
/// multiple of either tile.
/// Launch (given): grid (⌈seq_len/64⌉, num_heads), block (64). Thread t of block (bx, h) owns
/// query row i = bx·64 + t of head h; a thread with i ≥ seq_len owns no row but still helps load
/// the tiles and reaches every barrier (no early return). Each thread keeps its row's q·(1/√d)
/// (`q_row`), m, l and acc[head_dim] in registers (local arrays of 128 floats). The keys are
/// visited in tiles of 32: kv_start = 0, 32, 64, … < kv_end, where kv_end = seq_len, or, when
/// causal, min(seq_len, bx·64 + 64) — a tile that starts past the block's last query row is
/// masked for every row of the block and is skipped (causal block skipping: about half the
/// work). For each tile, with tile_len = min(32, kv_end − kv_start):
///   1. the 64 threads copy rows kv_start … kv_start + tile_len − 1 of K[g] and V[g] into the
///      `__shared__` tiles k_tile[32][128] and v_tile[32][128], consecutive threads taking
///      consecutive elements (element e = t, t + 64, … < tile_len·head_dim is row e / head_dim,
///      column e % head_dim); `__syncthreads()`;
///   2. a thread that owns a row computes its tile_len scores s_j = q_row · k_tile[j] (−∞ for
///      key kv_start + j > i when causal) into a local array, then applies the update of
///      exercise 5.1 to its (m, l, acc) — a row whose scores in this tile are all masked skips
///      the update;
///   3. `__syncthreads()` before the next tile overwrites the shared tiles.
/// Finally a thread that owns a row writes out[h][i][c] = acc[c] / l.
/// Budget per block: head_dim loads of q and head_dim stores of out per row; each element of
/// the K and V tiles visited loaded from global memory once per block (not once per thread:
/// that is what the tiles buy); no global scratch at all (the scores live in registers) and
/// 32 KiB of shared memory. Device memory per call: the given launcher's q, k, v and out, no more
/// (no L×L scores) and no less (the kernel reads its inputs on the device); the grader checks
/// that each call launches a kernel and that its device-memory peak is this sum. Size hint:
/// roughly 40 lines.
///
/// ## Exercise 5.3 — the split-KV reduce (split_kv_reduce.cu)
///
/// Split-KV decode cuts each sequence's context into num_splits slices, attends the query to
/// every slice in parallel, and stores, per slice s, the normalized partial output
/// o_s = acc_s / l_s with its m_s (the slice's max score) and l_s (Σ exp(s_j − m_s) over the
/// slice). A slice that holds no token (a short sequence of a ragged batch has empty trailing
/// slices) has l_s = 0 and m_s = −∞, and its partial output is undefined: it may be NaN and must
/// not be read. Layouts (row-major): `partial_out` is [batch, num_heads, num_splits, head_dim],
/// `partial_max` and `partial_sum` are [batch, num_heads, num_splits], `out` is
/// [batch, num_heads, head_dim]. Write `split_kv_reduce_kernel` so that, for every sequence b
/// and head h (at least one of whose slices is not empty),
///
///     M   = max_s m_s
///     w_s = exp(m_s − M)·l_s           (0 for an empty slice)
///     out[b][h] = Σ_s w_s·o_s / Σ_s w_s,
///
/// the same combine as the online softmax with each slice as one block. Logits can be in the
/// hundreds: exp(m_s) alone overflows, exp(m_s − M) does not.
/// Launch (given): grid (num_heads, batch), block (64); num_splits is 1 … 256. Block (h, b):
///   1. every thread computes M (a loop over the num_splits maxima);
///   2. the threads stride through the slices (s = t, t + 64, …) and write w_s into the
///      `__shared__` array weights[256]; `__syncthreads()`;
///   3. every thread adds up Σ_s w_s, then the threads stride through the dimensions
///      (c = t, t + 64, …) and write out[b][h][c] = Σ_s w_s·o_s[c] / Σ_s w_s, skipping every
///      slice whose weight is 0 (0·NaN is NaN).
/// Budget per block: num_splits loads of partial_max per thread, each partial_sum once, each
/// element of a non-empty slice's partial output once, head_dim stores. Device memory per call:
/// the given launcher's four buffers (partial_out, partial_max, partial_sum, out) and no scratch;
/// the grader checks that each call launches a kernel and that its device-memory peak is this
/// sum. Size hint: roughly 15 lines.

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "common/tensor.h"

namespace inferlab::student {

/// The running state of one query row's online softmax (the lesson's m, l, acc).
struct OnlineSoftmaxState {
  /// The initial state of a row with @p head_dim value columns: nothing seen yet.
  explicit OnlineSoftmaxState(int64_t head_dim) : acc(static_cast<size_t>(head_dim), 0.0f) {}

  float max = -std::numeric_limits<float>::infinity();  ///< m: the largest score seen (−∞: none yet)
  float sum = 0.0f;                                     ///< l: Σ exp(s_j − m) over the scores seen
  std::vector<float> acc;                               ///< [head_dim]: Σ exp(s_j − m)·V[j] over the scores seen
};

/// Exercise 5.1 — one step of the online softmax, in place.
///
/// Folds one block of @p scores (scaled scores s_j, −∞ for a masked key; the block may be empty
/// or entirely masked) and their value rows @p values ([scores.size(), head_dim], row-major,
/// head_dim = state.acc.size()) into @p state with the update of the file's documentation
/// (m' = max(m, max_j s_j), α = exp(m − m'), l' = α·l + Σ p_j, acc' = α·acc + Σ p_j·V[j]). A
/// block that leaves the max at −∞ changes nothing. After the last block, acc / l is
/// softmax(s)·V over every key seen. Throws std::invalid_argument (given) when @p values does
/// not hold scores.size() rows of head_dim. Budget: two passes over @p scores, one over
/// @p values. Size hint: roughly 15 lines.
void online_softmax_update(OnlineSoftmaxState& state, std::span<const float> scores, std::span<const float> values);

}  // namespace inferlab::student

/// Declares the chapter-05 CUDA exercise launchers in namespace inferlab::NS::student (NS = sim
/// or cuda; see the file's documentation for the tasks).
#define INFERLAB_DECLARE_CH05_EXERCISES(NS)                                                                           \
  namespace inferlab::NS::student {                                                                                   \
  /* Exercise 5.2: out = softmax(q.k^T / sqrt(head_dim) [causal]).v, fused: 64 query rows per block, 32-key tiles. */ \
  void flash_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,           \
                       Tensor<float>& out);                                                                           \
  /* Exercise 5.3: out[b][h] = the exact attention output from the partial (o_s, m_s, l_s) of every KV slice s. */    \
  void split_kv_reduce(const Tensor<float>& partial_out, const Tensor<float>& partial_max,                            \
                       const Tensor<float>& partial_sum, Tensor<float>& out);                                         \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CH05_EXERCISES(sim)
INFERLAB_DECLARE_CH05_EXERCISES(cuda)
/// @endcond
