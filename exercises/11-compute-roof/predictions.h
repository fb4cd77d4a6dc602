#pragma once
/// @file 11-compute-roof/predictions.h
/// Chapter 11 — predict, then measure. Each function is a question about the compute roof of a
/// quantized GEMM: work the number out from the lesson (chapters/11-compute-roof/README.md), write
/// it as a formula in `predictions.cpp`, then run the measurement named in its comment and compare.
/// The graded tests (tests/11-compute-roof/test_predictions.cpp) ask each question over several
/// scenarios — this lab's 2-core VM, SmolLM2's shapes, an H100-class chip's, odd and fresh random
/// ones — and accept an answer within 1% (P11.4, a count: exactly). Units: one operation is one
/// multiply or one add (as a FLOP, whatever the type); GOP/s = 1e9 operations a second; GB/s = 1e9
/// bytes a second; GHz = 1e9 cycles a second.
///
/// P11.1 and P11.2 are the int8 ceiling from the instruction's throughput; P11.3 the arithmetic
/// intensity of a quantized GEMM; P11.4 the batch at which it crosses the int8 ridge.

#include <cstdint>

namespace inferlab::student {

/// Prediction P11.1 — the operations ONE int8 dot-product instruction does: `vpdpbusd` on a
/// register of @p vector_bits bits multiplies every byte of one operand by the matching byte of
/// the other and adds each group of 4 products into the int32 lane they share (and into the lane's
/// old value). Count a multiply and an add each as one operation.
/// Worked example: 256-bit ymm: 32 byte products, each added: 64 operations.
/// Then measure: `./inferlab roofline` prints the int8 ceiling of every instruction this CPU has;
/// divide by the clock and the cores (P11.2) to see how many a cycle it issues.
double predict_dot_ops_per_instruction(int64_t vector_bits);

/// Prediction P11.2 — the int8 ceiling of a CPU, GOP/s: @p cores cores at @p ghz GHz, each issuing
/// @p instructions_per_cycle `vpdpbusd` of @p vector_bits bits a cycle.
/// Worked example: 1 core at 2.0 GHz, 1 zmm (512-bit) vpdpbusd a cycle: 256 GOP/s.
/// Then measure: `./inferlab roofline` (its "int8 dot" lines): this lab's 2-core VM measures about
/// 4× its fp32 FMA peak — a zmm FMA does 32 operations where a zmm vpdpbusd does 128.
double predict_int8_ceiling_gops(int64_t cores, double ghz, int64_t vector_bits, double instructions_per_cycle);

/// Prediction P11.3 — the arithmetic intensity (operations a byte) of y[M, out] = x[M, in] · Wᵀ
/// with W in a block format of @p weight_bytes_per_value bytes a weight (Q8_0 1.0625, Q4_1 0.625):
/// 2·M·out·in operations; the weights read once, x read and y written once in fp32 (4 bytes a
/// value) — quant_matmul_cost()'s traffic model.
/// Worked example: M = 1, out = 2, in = 32, Q8_0: 128 operations over 68 + 128 + 8 = 204 bytes,
/// 0.627 operations a byte.
/// Then measure: `./inferlab bench ch11` prints AI beside GOP/s for every M.
double predict_gemm_intensity(int64_t rows, int64_t out, int64_t in, double weight_bytes_per_value);

/// Prediction P11.4 — the smallest batch M ≥ 1 at which the GEMM of P11.3 reaches the int8 ridge
/// point, where its arithmetic intensity is at least @p int8_gops / @p bandwidth_gbs: below it the
/// GEMM is memory-bound, above it it can be compute-bound. 0 when no M reaches the ridge (the
/// intensity tends to out·in / (2·(out + in)) as M grows: the activations' traffic grows with M).
/// Worked example: 900 GOP/s over 36 GB/s (a ridge of 25), out = 1536, in = 576, Q8_0: M = 16
/// (M = 15 gives 24.9 operations a byte, M = 16 gives 26.3).
/// Then measure: `./inferlab bench ch11`'s roof_pct against M: below the ridge it follows the
/// bandwidth roof, above it the int8 ceiling.
int64_t predict_rows_at_int8_ridge(double int8_gops, double bandwidth_gbs, int64_t out, int64_t in,
                                   double weight_bytes_per_value);

}  // namespace inferlab::student
