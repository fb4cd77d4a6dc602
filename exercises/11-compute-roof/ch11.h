#pragma once
/// @file ch11.h
/// Chapter 11 exercises — the contract: the two pieces of a GEMM built the GotoBLAS/BLIS way for
/// ggml's Q8_0 blocks, written without the lab's code (student code links only inferlab::common,
/// so everything they need is declared here or in common/half.h):
///
///   11.1  repack a Q8_0 weight matrix (repack.cpp): GGUF's row-major blocks interleaved 16 output
///         rows at a time, so that one vector register holds 4 codes of each of 16 outputs;
///   11.2  the micro-kernel (micro_kernel.cpp): up to 4 activation rows × the 16 outputs of one
///         repacked group, every lane one (row, output) pair, no horizontal sum — bit for bit the
///         lab's scalar reference.
///
/// Graded by tests/11-compute-roof/test_student.cpp (checks in tests/11-compute-roof/student_check.h):
/// a hand-worked case, then fresh random matrices of odd shapes (the seed is printed on failure;
/// INFERLAB_SEED replays it) — 11.1 byte for byte against the lab's quant::PackedMatrix
/// (kernels/quant/packed_matrix.h); 11.2 bit for bit against chapter 08's scalar
/// quant_matmul_cpu() (kernels/quant/quant_matmul.h) on the lab's own repacked groups, outputs
/// poisoned with NaN first. Run them with `./inferlab student test ch11` (it builds only this
/// chapter and prints each failing test's output), or `./inferlab grade`. Each stub throws
/// `NotImplemented(...)`: delete that line once your code is written.
///
/// ## The layout (both exercises)
///
/// A Q8_0 block (GGUF) is 34 bytes: the scale d as fp16 bits (2 bytes, little-endian), then 32
/// int8 codes q[0 … 31]; value j is q[j]·d. A row of `in` values is in / 32 blocks, and the matrix
/// is `out` rows one after another ([out][in], each output's weights contiguous).
///
/// Repacked, the outputs go in groups of 16 (the last group padded with rows of zero codes and a
/// zero scale). Group g holds its blocks in order, block b after block b − 1; a packed block is
/// 544 bytes:
///
///     bytes   0 …  31   d[0 … 15]: the fp16 scale of block b of output 16g + o, at 2·o
///     bytes  32 … 543   8 chunks c = 0 … 7 of 64 bytes: chunk c byte 4·o + t is code 4c + t of
///                       block b of output 16g + o (t = 0 … 3), stored as the UNSIGNED byte q + 128
///
/// So a chunk is one 512-bit register: 16 outputs × 4 consecutive codes. One `vpdpbusd` multiplies
/// it by 4 activation codes broadcast to every lane and adds the four products into each lane's
/// int32: 16 outputs advance by 4 values in one instruction, each in its own lane. The instruction
/// multiplies UNSIGNED bytes by signed ones, and the weights are the operand that must be unsigned
/// (the activations are the broadcast one): so each code q is stored as q + 128 — the byte q xor
/// 0x80 — once, when the matrix is packed, and the 128 comes back exactly from the activations:
/// Σ (q + 128)·x = Σ q·x + 128·Σ x. The padding rows' codes are 128 too (q = 0).
///
/// Worked example: out = 2, in = 32. Row 0's block: d = 0x3C00 (1.0), codes 0, 1, …, 31; row 1's:
/// d = 0x4000 (2.0), codes −1, −2, …, −32. The packed matrix is one group, one block, 544 bytes:
///     bytes 0–1: 00 3C; bytes 2–3: 00 40; bytes 4–31: 0 (the 14 padding outputs' scales)
///     chunk 0 (bytes 32–95):  80 81 82 83 | 7F 7E 7D 7C | then 56 bytes of 80
///     chunk 1 (bytes 96–159): 84 85 86 87 | 7B 7A 79 78 | then 56 bytes of 80 ... and so on to chunk 7.

#include <cstdint>
#include <span>
#include <vector>

namespace inferlab::student {

/// Exercise 11.1 — repack a Q8_0 matrix: @p gguf_rows holds @p out rows of @p in values in GGUF's
/// Q8_0 blocks (34 bytes a block, in / 32 blocks a row); return the packed matrix of this file's
/// layout: ⌈out / 16⌉ groups × (in / 32) packed blocks of 544 bytes, the padding rows' scales 0 and
/// their codes 0x80.
/// Refuse, through common/check.h's require(), with std::invalid_argument whose message is
/// "<name> = <value>: <rule>", naming the first bad argument in this order: "in" when it is not a
/// positive multiple of 32; "out" when it is negative; "gguf_rows.size()" when it is not
/// out · in / 32 · 34.
/// Graded: the worked example; random matrices (out 1 … 40, in 32 … 288), every byte equal to
/// the lab's quant::PackedMatrix; the refusals, each naming its argument. Size hint: roughly 15
/// lines (two nested loops over rows and blocks; copy a scale and 8 runs of 4 codes, each xor 0x80).
std::vector<uint8_t> repack_q8_0(std::span<const uint8_t> gguf_rows, int64_t out, int64_t in);

/// One 32-value block of a quantized activation row (Q8_0 activations: chapter 08 quantizes each
/// row of x once per GEMM): its scale as fp32 (exactly the fp16 value GGUF's format stores), its
/// codes, and their sum Σ codes[j] (the VNNI kernels need it to undo the +128 offset they feed the
/// weights with; you may use it or not).
struct ActivationBlock {
  float d;           ///< the block's scale, an fp16 value widened to fp32 (exact)
  int32_t code_sum;  ///< Σ codes[j], j = 0 … 31
  int8_t codes[32];  ///< value j is codes[j] · d
};

/// Exercise 11.2 — the micro-kernel: @p group points at the first packed block of one group
/// (11.1's layout, @p blocks packed blocks of 544 bytes one after another); @p rows holds
/// @p num_rows (1 … 4) pointers, each to one activation row of @p blocks blocks. Write
/// y[r · 16 + o], for r < num_rows and o < 16 (the padding outputs too: their scale is 0), with
/// exactly the lab's arithmetic (kernels/quant/quant_matmul.h's contract) so that the bits equal
/// the scalar reference's:
///
///     acc = 0.0f
///     for each block b, in order:
///         Σ   = Σ_j q_w[o][b][j] · codes_x[r][b][j]         exact, in int32 (q_w = byte − 128,
///                                                           or Σ byte·x − 128 · code_sum)
///         acc = fma(d_w[o][b] · d_x[r][b], float(Σ), acc)   one fma; d_w · d_x is one fp32 multiply
///     y[r · 16 + o] = acc
///
/// d_w is the packed block's fp16 scale of output o (common/half.h's half_bits_to_float). Keep
/// every (row, output) pair in its own lane — an array `int32_t sum[4][16]`, the 16 outputs
/// innermost — and never add parts of one output's sum across lanes; then the compiler can
/// vectorize the lanes, and the bits are the reference's whatever the number of rows.
/// Graded: random groups and rows (1 … 4 rows; 1, 3 and 17 blocks; outliers in the activations),
/// each of the 16 × num_rows outputs memcmp-equal to the reference, outputs poisoned first.
/// Size hint: roughly 20 lines.
void micro_kernel_q8_0(const uint8_t* group, int64_t blocks, const ActivationBlock* const* rows, int num_rows,
                       float* y);

}  // namespace inferlab::student
