#pragma once
/// @file ch08.h
/// Chapter 08 exercises — the contract: the inner loops that run a real model from its file.
/// SmolLM2-135M-Instruct ships as a GGUF file whose matrices are *block-quantized*: 32 values
/// share an fp16 scale (and, for Q4_1, an fp16 minimum), each value a 4- or 8-bit code. Decoding
/// a token reads every weight once, so the bytes a weight takes set the speed; and the text goes
/// in as token ids cut by byte-level BPE. Four exercises, each graded on its own:
///
///   8.1  decode a Q4_1 row to fp32 (CPU, dequantize_q4_1.cpp);
///   8.2  the integer dot product of a Q4_1 weight row with a Q8_1 activation row — the inner
///        loop of the quantized matmul, as llama.cpp's CPU backend computes it (CPU,
///        dot_q4_1_q8_1.cpp);
///   8.3  the BPE merge loop: a word's byte-level symbols merged lowest rank first (CPU,
///        bpe_merge.cpp);
///   8.4  a quantized GEMV kernel, y = W·x with Q8_0 weights and Q8_0 activations, int8 dot
///        products with __dp4a (CUDA, gemv_q8_0.cu; graded on the sim backend — the SIMT emulator,
///        no GPU needed).
///
/// The block structs below are ggml's (`ggml-common.h`), byte for byte: a GGUF tensor's data is
/// an array of them, row after row. fp16 fields are carried as their 16 bits (uint16_t); on the
/// host `half_bits_to_float()` of common/half.h widens them (exactly), on the device
/// `__half2float(__ushort_as_half(bits))`.
///
/// Graded by tests/08-real-model/test_student.cpp (checks in tests/08-real-model/
/// student_check.h): hand-worked cases that each teach one rule, then fresh random data (the
/// seed is printed on failure; INFERLAB_SEED replays it) compared with the lab's own
/// implementations — kernels/quant (block_quant.h, quant_matmul.h) for 8.1 and 8.2, the lab's
/// tokenizer (runtime/tokenizer/bpe_tokenizer.h) on random vocabularies and on SmolLM2's own
/// 49,152 tokens and 48,900 merges (installed by `./inferlab setup`) for 8.3 — and with float64
/// oracles within bounds derived from fp32 rounding. Run them with `./inferlab student test ch08`
/// (it builds only this chapter and prints each failing test's output), or `./inferlab grade`.
/// Each stub throws `NotImplemented(...)` after the checks that are given: delete that line once
/// your code is written.
///
/// ## Exercise 8.1 — decode a Q4_1 row (dequantize_q4_1.cpp)
///
/// A Q4_1 block holds 32 values as d (scale), m (minimum) and 16 bytes of 4-bit codes q ∈ 0…15:
///
///     value = q·d + m          (d = (max − min)/15 and m = min of the block, both fp16)
///
/// The *nibble order* is ggml's: byte j holds value j in its LOW nibble (qs[j] & 15) and value
/// j + 16 in its HIGH nibble (qs[j] >> 4) — the first half of the block in the low nibbles, not
/// adjacent pairs (values 2j and 2j + 1, as one might guess, is the classic bug: the numbers look
/// plausible and the model writes garbage). Decode `blocks` into `out`, 32 values a block, block b
/// at out[32·b …]. In fp32: q·d is exact (4 bits times an 11-bit fp16 significand), so q·d + m
/// rounds once — the value is the fp32 nearest to the exact one, and the grader asks for exactly
/// that. The given check: out.size() == 32·blocks.size().
/// Worked example: d = 0.25, m = −1, byte j = j | (15 − j) << 4 (so byte 0 is 0xF0): value j =
/// j·0.25 − 1 (−1, −0.75, … 2.75) and value j + 16 = (15 − j)·0.25 − 1 (2.75 … −1).
/// Graded: the worked example, then random rows of 1 to 48 blocks (every code, random scales and
/// minima), each value bit-identical to the lab's dequantize_row_q4_1 and to the float64 value
/// rounded once; `out` is poisoned (NaN) before the call: every value must be written. Budget:
/// one pass, each byte read once. Size hint: roughly 8 lines.
///
/// ## Exercise 8.2 — the Q4_1 × Q8_1 dot product (dot_q4_1_q8_1.cpp)
///
/// The quantized matmul never decodes W. It quantizes the activation row x once (Q8_1: per block
/// d_x = max|x|/127, codes q_x = round(x/d_x), and s_x = d_x·Σ_j q_x[j] stored beside them) and
/// takes each output as a sum over blocks of *integer* dot products:
///
///     Σ_j (q_w[j]·d_w + m_w)·(q_x[j]·d_x) = d_w·d_x·Σ_j q_w[j]·q_x[j]  +  m_w·(d_x·Σ_j q_x[j])
///                                         = d_w·d_x·Σ_j q_w[j]·q_x[j]  +  m_w·s_x
///
/// — 32 int8 multiply-adds and two fp32 multiply-adds a block: the minimum costs one multiply per
/// block, because s_x was computed once, when x was quantized. Return, for a weight row `w` and an
/// activation row `x` of the same number of blocks, exactly the lab's arithmetic
/// (kernels/quant/quant_matmul.h, the contract that makes every kernel of the lab bit-identical):
///
///     acc = 0
///     for each block b, in order:
///       sum = Σ_{j<16} (w.qs[j] & 15)·x.qs[j] + (w.qs[j] >> 4)·x.qs[j + 16]   (int32: exact)
///       acc = fmaf(d_w·d_x, float(sum), acc)      (d_w·d_x: an fp32 product, exact for two fp16)
///       acc = fmaf(m_w, s_x, acc)
///     return acc
///
/// The integer sum is exact (|sum| ≤ 32·15·128 < 2^24, so float(sum) is too); each fmaf rounds
/// once. The order is part of the contract: `acc += dd·sum + m·s`, or summing the blocks in another
/// order, gives other bits — as close to the exact value, but not the bits every kernel of the lab
/// shares (which is what makes a row's result the same whatever the batch it runs in).
/// The given check: x.size() == w.size() ≥ 1.
/// Worked example: one block, w as in 8.1's example (d_w = 0.25, m_w = −1), x with d_x = 0.5,
/// every q_x = 1, s_x = 0.5·32 = 16: sum = (0 + 1 + … + 15) + (15 + … + 0) = 240, dd = 0.125,
/// acc = 0.125·240 − 1·16 = 14 — and Σ value_w·value_x over the decoded values is 14 too.
/// Graded: the worked example; rows where the minimum term dominates (drop m·s and the answer is
/// far off); random rows of 1 to 64 blocks — bit-identical to the lab's quant_matmul_cpu (its
/// scalar kernel, same quantized x) and within the fp32 rounding bound of the float64 oracle
/// (γ_{2B}·Σ_b (|d_w·d_x·sum_b| + |m_w·s_x|) for B blocks, γ_n = n·2^−24/(1 − n·2^−24));
/// and real rows of SmolLM2's Q4_1 matrices. Budget: one pass over both rows, no allocation.
/// Size hint: roughly 12 lines.
///
/// ## Exercise 8.3 — the BPE merge loop (bpe_merge.cpp)
///
/// Byte-level BPE (GPT-2's scheme, SmolLM2's tokenizer) cuts text into pieces (the pre-tokenizer:
/// " the", "2", "   "…), writes each byte of a piece as one *symbol* (a printable character:
/// space → "Ġ", newline → "Ċ", 'a' → "a"), then merges adjacent symbols into longer tokens by
/// the vocabulary's *merge list*: rank r is the r-th line of the list ("Ġ t", "h e", "Ġt he",
/// …), lower ranks learned first. The merge loop — your exercise — is the heart of it:
///
///     repeat:
///       among all adjacent pairs (symbols[i], symbols[i+1]) that have a rank,
///       take the one of LOWEST rank; on a tie (the same pair at several places) the LEFTMOST;
///       replace the two symbols by their concatenation
///     until no adjacent pair has a rank
///
/// and the symbols left are the tokens. Three rules, three classic bugs: it is the rank that
/// decides, not the position (merging left to right whatever applies first gives other tokens);
/// the loop runs until nothing applies (a new symbol can merge again, with a lower-ranked pair
/// than some still waiting); and ties go leftmost ("aaa" with the one merge "a a" gives "aa" "a",
/// not "a" "aa"; "aaaa" with "a a" then "aa aa" gives one "aaaa"). A pair is looked up as a pair:
/// "ab" + "c" and "a" + "bc" are different merges of the same text. `ranks` maps (left, right) to
/// the rank (a pair listed twice in a file keeps its first rank: the table already holds it).
/// The given check: no symbol is empty.
/// Worked example: symbols "Ġ" "t" "h" "e", ranks {("t","h"): 0, ("Ġ","th"): 1, ("h","e"): 2,
/// ("Ġth","e"): 3}: pairs Ġt (none), th (0), he (2) → "Ġ" "th" "e"; pairs Ġth (1), the (none) →
/// "Ġth" "e"; then (3) → "Ġthe".
/// Graded: hand cases for each rule (ties, "aaaa", rank over position, until none applies, pairs
/// not concatenations, empty and one-symbol words), then thousands of random words on random
/// vocabularies (merge lists in learned and in shuffled order) and on SmolLM2's vocabulary (words
/// of English, code, numbers, whitespace runs, CJK, emoji, pre-tokenized as the model's
/// tokenizer does), each equal, token for token, to the lab's BpeTokenizer::encode_piece. Budget:
/// O(n²) map lookups for a word of n symbols is fine here (the lab's tokenizer uses a heap for
/// O(n log n): pieces of 10,000 spaces exist). Size hint: roughly 15 lines.
///
/// ## Exercise 8.4 — a quantized GEMV with __dp4a (gemv_q8_0.cu)
///
/// A batch-1 decode step is a chain of matrix-vector products y = W·x (W [out_features,
/// in_features]), each reading all of W once: memory-bound, so the fewer bytes a weight takes, the
/// faster — Q8_0 reads 1.0625 bytes a weight, 3.8× fewer than fp32. W is Q8_0 (row o is
/// in_features/32 blocks, w[o·blocks + b]) and x is Q8_0 too (quantized once, before the launch).
/// Each output is
///
///     y[o] = Σ_b  d_w[o][b]·d_x[b] · Σ_{j<32} q_w[o][b][j]·q_x[b][j]
///
/// with the inner sum in integers: `__dp4a(a, b, c)` multiplies the four signed bytes of int a
/// with those of int b and adds the four products to c — 8 of them sum a block (4 codes per int).
/// A block is 34 bytes, so its codes start 2 bytes in and are only 2-byte aligned: the given
/// `packed_codes(qs, k)` builds the int of codes 4k … 4k + 3 from two 16-bit loads (a 4-byte load
/// of a 2-aligned address faults on a GPU — the emulator reports it as misaligned).
///
/// The launcher is given: grid ⌈out_features / rows_per_block⌉ blocks of 32·rows_per_block
/// threads; **warp r of block i owns output row i·rows_per_block + r**. You write:
///   - `block_dot_q8_0(w, x)`: the int32 Σ_j q_w[j]·q_x[j] of one pair of blocks, 8 __dp4a;
///   - `gemv_q8_0_kernel`: each warp's row — the warps past the last row (the last grid block is
///     partial when out_features is not a multiple of rows_per_block) return at once, the whole
///     warp together; lane l takes the row's blocks b = l, l + 32, … < blocks (a row may hold fewer
///     blocks than the warp has lanes, or more), accumulating d_w·d_x·float(block_dot) in fp32;
///     then the given `warp_sum` (every lane of the warp calls it) and lane 0 writes y[row].
/// One warp owns each output: no atomics, no shared memory, and the result does not depend on the
/// order the threads run in — the grader runs every launch under several thread orders (forward,
/// reverse, shuffled) and requires the same bits.
/// Graded on the sim backend: odd shapes (out_features 1 … 576, in_features 32 … 2112: fewer and
/// more blocks than lanes, neither a multiple of 32), rows_per_block 1 … 32 (a partial last grid
/// block), extreme codes (±127 everywhere, zero scales), SmolLM2's shapes; y poisoned (NaN) before
/// every launch, so an unwritten row fails; each output within the fp32 rounding bound of the
/// float64 oracle, γ_{32B+2}·Σ_b |d_w·d_x|·Σ_j |q_w[j]·q_x[j]| for B blocks (any fp32 summation
/// order of the exact block sums passes). Every call must launch the kernel and hold exactly the
/// given launcher's device buffers (W, x, y). Budget per warp: its row of W and all of x read
/// once, one float written. Size hint: roughly 4 lines for block_dot_q8_0, 12 for the kernel.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/tensor.h"

namespace inferlab::student {

/// Values in every block of ggml's block formats.
inline constexpr int64_t kBlockValues = 32;

/// Q4_1: a scale, a minimum and 32 4-bit codes (value q·d + m) — 20 bytes.
struct BlockQ4_1 {
  uint16_t d;      ///< scale, fp16 bits
  uint16_t m;      ///< minimum, fp16 bits
  uint8_t qs[16];  ///< byte j: value j in the low nibble, value j + 16 in the high nibble
};
/// Q8_0: a scale and 32 int8 codes (value q·d) — 34 bytes.
struct BlockQ8_0 {
  uint16_t d;     ///< scale, fp16 bits
  int8_t qs[32];  ///< value j is qs[j]·d
};
/// Q8_1: Q8_0 plus s = d·Σ qs (fp16), the term a Q4_1 weight's minimum multiplies — 36 bytes.
struct BlockQ8_1 {
  uint16_t d;     ///< scale, fp16 bits
  uint16_t s;     ///< fp16 bits of d·Σ qs (d in fp32, before its rounding to fp16)
  int8_t qs[32];  ///< value j is qs[j]·d
};
static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36,
              "ggml's block sizes: a GGUF file's bytes are arrays of these structs");

/// Exercise 8.1 — decodes @p blocks into @p out (32 values a block): value j = (qs[j] & 15)·d + m,
/// value j + 16 = (qs[j] >> 4)·d + m. Throws std::invalid_argument (given) naming out.size() when
/// it is not 32·blocks.size().
void dequantize_q4_1(std::span<const BlockQ4_1> blocks, std::span<float> out);

/// Exercise 8.2 — the dot product of a Q4_1 weight row @p w with a Q8_1 activation row @p x by
/// the contract of the file's documentation: per block, in order, acc = fmaf(d_w·d_x, float(the
/// exact integer Σ q_w·q_x), acc), then acc = fmaf(m_w, s_x, acc). Throws std::invalid_argument
/// (given) naming w.size() when it is 0 and x.size() when it differs from w.size().
float dot_q4_1_q8_1(std::span<const BlockQ4_1> w, std::span<const BlockQ8_1> x);

/// The merge list of a BPE vocabulary as a lookup: (left, right) → its rank (its line in the
/// list; lower ranks merge first).
using MergeRanks = std::map<std::pair<std::string, std::string>, int32_t>;

/// Exercise 8.3 — the tokens of a word given as byte-level @p symbols: merge the adjacent pair of
/// lowest rank in @p ranks (ties: the leftmost) into one symbol, again and again, until no
/// adjacent pair has a rank; return the symbols left. Throws std::invalid_argument (given) naming
/// symbols[i] for the first empty symbol.
std::vector<std::string> bpe_merge(std::span<const std::string> symbols, const MergeRanks& ranks);

}  // namespace inferlab::student

/// Declares the chapter-08 CUDA exercise launcher in namespace inferlab::NS::student (NS = sim or
/// cuda; see the file's documentation for the task).
#define INFERLAB_DECLARE_CH08_EXERCISES(NS)                                                                  \
  namespace inferlab::NS::student {                                                                          \
  /* Exercise 8.4: y[o] = the row o of the Q8_0 matrix w [out_features, 32·x.size()] times the Q8_0    */   \
  /* vector x, one warp per output row, int8 block sums with __dp4a; rows_per_block warps a block.     */    \
  void gemv_q8_0(std::span<const inferlab::student::BlockQ8_0> w, int64_t out_features,                      \
                 std::span<const inferlab::student::BlockQ8_0> x, Tensor<float>& y, int rows_per_block = 4); \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_CH08_EXERCISES(sim)
INFERLAB_DECLARE_CH08_EXERCISES(cuda)
/// @endcond
