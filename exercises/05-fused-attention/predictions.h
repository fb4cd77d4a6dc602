#pragma once
/// @file 05-fused-attention/predictions.h
/// Chapter 05 — predict, then measure. Each function is a question: work the number out from the
/// lesson (chapters/05-fused-attention/README.md §1, §3 and §4), write it as a formula in
/// `predictions.cpp`, then run the measurement named in its comment and compare. The graded tests
/// (tests/05-fused-attention/test_predictions.cpp) ask each question over several scenarios, odd
/// ones included, and accept an answer within 1% (the tile size exactly). Units: FLOP/byte,
/// bytes, KiB = 1024 bytes.

#include <cstdint>

namespace inferlab::student {

/// Prediction P5.1 — the arithmetic intensity of fused (FlashAttention-style) prefill for one
/// KV head and the @p group_size query heads that share it, counting compulsory traffic only, in
/// FLOP/byte.
///
/// L = @p seq_len, d = @p head_dim, @p bytes_per_element bytes per element, dense FLOPs 4·L²·d per
/// query head. Bytes: each query head's Q and O once, the KV head's K and V once (the scores never
/// leave the chip). With group_size 1 this is the lesson's L/e; GQA raises it.
/// Then measure: `./inferlab bench ch05 --benchmark_filter='prefill/cpu/flash'` (`AI_fused`).
double predict_fused_ai_gqa(int64_t seq_len, int64_t head_dim, int64_t group_size, double bytes_per_element);

/// Prediction P5.2 — what fusion saves: the bytes of a fused kernel (Q, K, V and O once) divided
/// by the bytes of a real unfused pipeline (the L×L scores moved ~4 times, plus Q, K, V and O),
/// one head, L = @p seq_len, d = @p head_dim, the same element size for everything.
/// Then measure: `./inferlab bench ch05 --benchmark_filter='prefill/cpu/flash'`: its
/// `unfused_over_fused` column is 1 / your answer (the lesson's §1 table).
double predict_fused_traffic_share(int64_t seq_len, int64_t head_dim);

/// Prediction P5.3 — the bytes a real fused kernel reads with query tiles of @p query_tile rows:
/// it reads Q and writes O once, but reads all of K and V once per query tile. One head,
/// L = @p seq_len, d = @p head_dim, @p bytes_per_element bytes per element, no causal skipping.
/// Then compare: the lesson's §4 (why large query tiles, and why the re-reads stay in L2).
double predict_fused_bytes_with_query_tiles(int64_t seq_len, int64_t head_dim, int64_t query_tile,
                                            double bytes_per_element);

/// Prediction P5.4 — a tile size from a shared-memory budget. A fused kernel's block keeps in
/// shared memory a query tile (Br rows × d), a K tile and a V tile (@p key_tile rows × d each),
/// all @p bytes_per_element bytes per element, and an fp32 score tile (Br × key_tile, 4 bytes
/// per element). Return the largest Br, a multiple of 16 (the tensor-core fragment height), that
/// fits in @p shared_memory_kib KiB; 0 if not even 16 fits.
/// Then compare: cuda/flash_tc's Br = Bc = 64 at d = 128 in fp16 (the lesson's §3) and an
/// H100's 227 KiB per block.
int64_t predict_max_query_tile(int64_t shared_memory_kib, int64_t head_dim, int64_t key_tile, double bytes_per_element);

}  // namespace inferlab::student
