#pragma once
/// @file ch01.h
/// Chapter 01 exercises — the contract. Your code goes in the .cpp files beside this header;
/// the tests in tests/01-naive-cpu-attention/test_student.cpp grade it against the float64
/// oracle in kernels/attention/. Run them on your code with `./inferlab student test ch01` (it
/// builds only this chapter and prints each failing test's output), or `./inferlab grade --student exercises` (the score table); `./inferlab test` and the default
/// preset build solutions/, the reference, instead.

#include <cstdint>
#include <span>

#include "common/cost.h"

namespace inferlab::student {

/// Exercise 1.1 — numerically stable softmax of one row, in place.
///
/// Replace every x_j of @p row by exp(x_j − m) / Σ_k exp(x_k − m), where m = max_k x_k.
/// Subtracting m changes nothing mathematically but keeps exp() ≤ 1, so logits of ±1000 give
/// the right answer instead of Inf/NaN. Entries equal to −Inf (masked positions) become 0.
/// @p row has at least one finite entry. Budget: read the row 3 times (max, exp+sum, divide).
/// Size hint: roughly 10 lines.
void softmax_row(std::span<float> row);

/// Exercise 1.2 — single-head attention with an optional causal mask, fp32.
///
/// @p q, @p k, @p v and @p out are [seq_len, head_dim], row-major. Compute
/// out = softmax(q·kᵀ / √head_dim) · v, where, when @p causal, query row i attends only to key
/// rows 0..i. Use your softmax_row(). Write every element of @p out (it arrives full of NaN).
/// Budget: 4·seq_len²·head_dim FLOPs; one seq_len-long score row of scratch is enough.
/// Size hint: roughly 20 lines.
void attention_single_head(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                           int64_t seq_len, int64_t head_dim, bool causal, std::span<float> out);

/// Exercise 1.3 — count the FLOPs and bytes of one head of unfused prefill attention under the
/// source article's traffic model.
///
/// FLOPs: Q·Kᵀ and P·V are each seq_len²·head_dim multiply-adds (2 FLOPs each); ignore the
/// scale and softmax. Bytes: read Q, K and V, write the seq_len×seq_len score matrix once, and
/// write O, each element @p bytes_per_element bytes. (The answer for L = 2048, d = 128, fp16 has
/// an arithmetic intensity of about 204.8 FLOP/byte.) Size hint: 4 lines.
///
/// Return a `Cost` (common/cost.h) with its two fields set:
///  - `flops`: the floating-point operations of one head, a multiply-add counting 2 — here
///    4·seq_len²·head_dim (dense: no causal mask);
///  - `bytes`: the bytes that head moves to or from main memory under the article's model —
///    bytes_per_element·(seq_len² + 4·seq_len·head_dim).
/// Both are doubles: compute in double, since seq_len²·head_dim overflows a 32-bit int.
/// `Cost::arithmetic_intensity()` is their ratio, flops / bytes; the tests check both fields and
/// that ratio.
Cost count_prefill_cost(int64_t seq_len, int64_t head_dim, double bytes_per_element);

}  // namespace inferlab::student
