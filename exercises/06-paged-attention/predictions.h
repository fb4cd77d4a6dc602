#pragma once
/// @file 06-paged-attention/predictions.h
/// Chapter 06 — predict, then measure. Each function is a question: work the number out from the
/// lesson (chapters/06-paged-attention/README.md, "Predict first" and "The memory table"), write
/// it as a formula in `predictions.cpp`, then run the measurement named in its comment and
/// compare. The graded tests (tests/06-paged-attention/test_predictions.cpp) ask each question
/// over several scenarios, odd ones included. Units: bytes, GiB = 2³⁰ bytes, tokens.

#include <cstdint>
#include <span>

namespace inferlab::student {

/// Prediction P6.1 — blocks needed: sequences of @p sequence_lengths tokens each (one entry per
/// sequence, no sharing) in a paged KV cache of @p block_size tokens per block. Each sequence
/// holds its own blocks. Return the total number of blocks (exact).
/// Then compare: `./inferlab analyze --kv-waste` (the waste per sequence these blocks leave).
int64_t predict_blocks_needed(std::span<const int64_t> sequence_lengths, int64_t block_size);

/// Prediction P6.2 — the bytes of one block of one layer: K and V of @p block_size tokens,
/// @p kv_heads KV heads of dimension @p head_dim, @p bytes_per_element bytes each.
/// Then compare: the paged cache's block shape (chapters/06-paged-attention/README.md, "The
/// kernels: a layout").
double predict_block_bytes(int64_t block_size, int64_t kv_heads, int64_t head_dim, double bytes_per_element);

/// Prediction P6.3 (a) — sequences that fit with contiguous allocation: a KV pool of @p pool_gib
/// GiB, @p kv_bytes_per_token bytes of KV per token (all layers), every sequence reserving
/// @p max_seq_len tokens. Return the whole number of sequences (exact).
/// Then compare: `./inferlab analyze --kv-waste` (the "contiguous" row).
int64_t predict_sequences_contiguous(double pool_gib, double kv_bytes_per_token, int64_t max_seq_len);

/// Prediction P6.3 (b) — sequences that fit with paging, on average: the same pool, sequences of
/// @p mean_length tokens on average, blocks of @p block_size tokens allocated on demand; only a
/// sequence's last block is partly empty, on average by (block_size − 1)/2 tokens. Return the
/// whole number of sequences (within 1).
/// Then compare: `./inferlab analyze --kv-waste` (the "paged" rows; 64 at block 16 in 16 GiB).
int64_t predict_sequences_paged(double pool_gib, double kv_bytes_per_token, int64_t block_size, double mean_length);

}  // namespace inferlab::student
