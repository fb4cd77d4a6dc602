#pragma once
/// @file ch04.h
/// Chapter 04 exercises — the contract: the two halves of an INT8 KV cache. Exercise 4.1 stores
/// a row of K or V as int8 plus one fp32 scale (CPU, quantize_row.cpp); exercise 4.2 is the
/// inner loops of a decode kernel that reads such a cache (CUDA, decode_int8.cu). Graded by
/// tests/04-int8-kv-cache/test_student.cpp — 4.1 against the definition below, 4.2 on the sim
/// backend (the SIMT emulator, no GPU needed) against the float64 decode of the dequantized cache
/// and against the fp32 decode within the error bound derived from the quantization steps
/// (common/tolerance.h). Run them with `./inferlab student test ch04` (it builds only this
/// chapter and prints each failing test's output), or `./inferlab grade` (the default preset
/// builds solutions/ instead). Each stub throws `NotImplemented(...)` after its given
/// checks: delete that line once your code is written.
///
/// ## Exercise 4.1 — quantize a row with its scale (quantize_row.cpp)
///
/// Symmetric INT8 with one scale per group (here: a row of head_dim elements — one token's key or
/// value for one KV head):
///
///     Δ = max_c |x_c| / 127          (fp32: max_abs / 127.0f)
///     q_c = clamp(round(x_c / Δ), −127, 127)     (round half away from zero: std::round)
///     x̂_c = Δ · q_c,   so |x̂_c − x_c| ≤ Δ/2 for every x_c inside ±127.5·Δ.
///
/// −128 is never produced (the range stays symmetric). Two functions:
///   - `quantize_int8(row, scale, out)` quantizes with a *given* scale (per-channel K scales are
///     calibrated on the prompt, so a later token may exceed ±127·Δ): round first, then clamp in
///     float — a value past the range *saturates* at ±127, it never wraps (casting 128 to int8
///     gives −128: the sign flips, the worst possible error). Returns how many elements were
///     clamped (|round(x/Δ)| > 127). Δ = 0 writes 0 everywhere (and clamps nothing).
///   - `quantize_row_int8(row, out)` computes Δ from the row as above, quantizes with it and
///     returns Δ. An all-zero row has Δ = 0 and quantizes to zeros — not 0/0 = NaN.
/// Both refuse non-finite input: when row[i] is NaN or ±Inf, throw std::invalid_argument whose
/// message contains "row[i]" (the first such i; use `require()` from common/check.h) *before*
/// writing anything — a NaN must be reported, not stored as a silent 0 (round(NaN) cast to int8
/// is undefined behaviour). The given check: out.size() == row.size().
/// Budget: one pass for the max, one for the codes. Size hint: roughly 12 lines in all.
///
/// ## Exercise 4.2 — the INT8 decode inner loops (decode_int8.cu)
///
/// The cache (per-token scales for K and V): K and V are int8 tensors
/// [batch, num_kv_heads, max_seq_len, head_dim] (row-major, as in ch03.h: element c of token t of
/// KV head g of sequence b at ((b·num_kv_heads + g)·max_seq_len + t)·head_dim + c), and
/// k_scales, v_scales are fp32 [batch, num_kv_heads, max_seq_len]: row (b, g, t) dequantizes as
/// x̂_c = scale[b][g][t] · q_c. Slots at or past lengths[b] have NaN scales: read one and the
/// output is NaN.
///
/// The kernel decode_int8_kernel is given: exercise 3.2's structure (grid (num_heads, batch),
/// blockDim.x = threads_per_block — a multiple of 32 from 32 to 1024 —, dynamic shared memory
/// q_scaled [head_dim] then scores [max_length]; scores one warp per key, block-wide softmax with
/// the max subtracted, one thread per output dimension). It calls the two device functions you
/// write — the loops that read int8 bytes:
///
///   - `int8_key_score(q_scaled, k_row, k_scale, head_dim, lane)`: the score of one key,
///     k_scale · Σ_c q_scaled[c] · k_row[c] (q_scaled already holds q/√head_dim). Called by all
///     32 lanes of a warp together; lane l takes c = l, l + 32, … < head_dim, converts each byte
///     to float, accumulates in fp32, then the lanes add their partial sums with the given
///     `warp_sum` (every lane must call it). Every lane returns the score. Multiply by k_scale
///     once, after the sum — not once per element: the scale is common to the row.
///   - `int8_value_sum(p, v_rows, v_scales, length, head_dim, c)`: output dimension c before
///     normalisation, Σ_{j < length} p[j] · v_scales[j] · v_rows[j·head_dim + c], where p[j] =
///     exp(score_j − max) and v_rows, v_scales start at token 0 of this (sequence, KV head). One
///     thread; consecutive threads take consecutive c (so the bytes they read are consecutive).
///     Fold the row's scale into its probability: w = p[j] · v_scales[j], then acc += w · v.
///
/// Never read a row at or past length (its scale is NaN). Budget per block: head_dim bytes of
/// each of the L keys (once per warp that owns the key) and one K scale per key; L bytes of V
/// and L V scales per output dimension; no writes besides the return values. Device memory per
/// call: the given launcher's uploads (q, the int8 caches, their scales, the lengths) and out —
/// no more (no dequantized fp32 copy of the cache) and no less (the kernel reads the cache on the
/// device); the grader checks that each call launches a kernel and that its device-memory peak
/// is this sum. Accumulate in fp32 — the grader accepts fp32 rounding against the float64
/// decode of the dequantized cache.
/// Size hint: roughly 6 lines each.

#include <cstdint>
#include <span>
#include <vector>

#include "common/tensor.h"

namespace inferlab::student {

/// Exercise 4.1a: q_c = clamp(round(row[c] / @p scale), −127, 127) into @p out (0 everywhere when
/// @p scale is 0); returns the number of clamped elements. Throws std::invalid_argument naming
/// "row[i]" for the first non-finite element, writing nothing.
int64_t quantize_int8(std::span<const float> row, float scale, std::span<int8_t> out);

/// Exercise 4.1b: Δ = max|row| / 127, then quantize_int8(row, Δ, out); returns Δ (0 for an
/// all-zero row). Throws std::invalid_argument naming "row[i]" for a non-finite element.
float quantize_row_int8(std::span<const float> row, std::span<int8_t> out);

}  // namespace inferlab::student

/// Declares the chapter-04 CUDA exercise launcher in namespace inferlab::NS::student (NS = sim or
/// cuda; see the file's documentation for the task).
#define INFERLAB_DECLARE_CH04_EXERCISES(NS)                                                              \
  namespace inferlab::NS::student {                                                                      \
  /* Exercise 4.2: out[b][h] = attention of q[b][h] over the first lengths[b] tokens of an INT8 cache */ \
  /* (k_cache, v_cache int8 [batch, kv_heads, max_seq_len, d]; scales fp32 [batch, kv_heads,       */   \
  /* max_seq_len], one per token row).                                                               */   \
  void decode_int8(const Tensor<float>& q, const Tensor<int8_t>& k_cache, const Tensor<int8_t>& v_cache,  \
                   const Tensor<float>& k_scales, const Tensor<float>& v_scales,                         \
                   const std::vector<int32_t>& lengths, Tensor<float>& out, int threads_per_block = 128); \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CH04_EXERCISES(sim)
INFERLAB_DECLARE_CH04_EXERCISES(cuda)
/// @endcond
