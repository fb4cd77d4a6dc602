#pragma once
// The checks of chapter 11's exercises (exercises/11-compute-roof/ch11.h): the graded tests
// (test_student.cpp) run them on the student's functions, and tests/wrong/wrong_ch11_exercises.cpp
// on deliberately wrong versions that they must reject.
//
// Each check draws its questions first (a hand-worked case, then fresh random matrices from a
// SeededRng: the seed is printed on failure), hands ALL of them at once to the code under test (the
// graded test runs the batch in one sandboxed child process, the wrong fixtures in this one), and
// only then computes the expected answers and compares:
//   11.1 the packed bytes, byte for byte, against the lab's quant::PackedMatrix
//        (kernels/quant/packed_matrix.h) — and against the hand-worked bytes of ch11.h's example;
//   11.2 each of the 16 × rows outputs, bit for bit, against chapter 08's scalar quant_matmul_cpu()
//        (kernels/quant/quant_matmul.h) on the same weights and the same quantized activations,
//        the padding outputs against 0.
// The first wrong answer fails the check with the input, the expected and the returned answer and —
// where it recognises one — the usual mistake behind it.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "11-compute-roof/ch11.h"
#include "common/half.h"
#include "common/tensor.h"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/packed_matrix.h"
#include "kernels/quant/quant_matmul.h"
#include "tests/support/seeded.h"
#include "tests/support/student_answers.h"

namespace inferlab::testing::ch11 {

// A batch's answers, and why they stop early: tests/support/student_answers.h.
using testing::Answers;
using testing::missing_answer;

/// A float for a message: the shortest text that reads back to the same float.
inline std::string show(float x) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, result.ptr);
}

/// @p out rows of @p in random values quantized to GGUF's Q8_0 rows.
inline std::vector<uint8_t> random_q8_0_rows(SeededRng& rng, int64_t out, int64_t in) {
  const Tensor<float> w = rng.normal_tensor({out, in});
  const int64_t rb = quant::row_bytes(quant::GgmlType::q8_0, in);
  std::vector<uint8_t> bytes(size_t(out * rb));
  for (int64_t o = 0; o < out; ++o)
    quant::quantize_row(quant::GgmlType::q8_0, std::span(w.data() + o * in, size_t(in)),
                        std::span(bytes.data() + o * rb, size_t(rb)));
  return bytes;
}

// ==== 11.1 repack a Q8_0 matrix ===============================================================

/// One matrix to repack; the hand case also gives its packed bytes worked out by hand.
struct RepackCase {
  int64_t out = 0, in = 0;
  std::vector<uint8_t> rows;  ///< GGUF's Q8_0 rows
  std::vector<uint8_t> hand;  ///< empty: no hand answer
};

/// Runs a batch of cases through the code under test: each answer is the packed bytes.
using RepackRunFn = std::function<Answers<std::vector<uint8_t>>(std::span<const RepackCase> cases)>;

/// ch11.h's worked example: two rows, one block; its 544 packed bytes written out by hand.
inline RepackCase worked_repack_case() {
  RepackCase c{2, 32, std::vector<uint8_t>(68), std::vector<uint8_t>(544, 0x80)};
  std::fill_n(c.hand.begin(), 32, uint8_t{0});
  c.rows[0] = 0x00, c.rows[1] = 0x3C, c.rows[34] = 0x00, c.rows[35] = 0x40;  // d = 1.0 and 2.0
  for (int j = 0; j < 32; ++j) {
    c.rows[size_t(2 + j)] = uint8_t(j);
    c.rows[size_t(36 + j)] = uint8_t(int8_t(-1 - j));
  }
  c.hand[0] = 0x00, c.hand[1] = 0x3C, c.hand[2] = 0x00, c.hand[3] = 0x40;
  for (int chunk = 0; chunk < 8; ++chunk)
    for (int t = 0; t < 4; ++t) {
      c.hand[size_t(32 + 64 * chunk + t)] = uint8_t(128 + 4 * chunk + t);           // output 0: q + 128
      c.hand[size_t(32 + 64 * chunk + 4 + t)] = uint8_t(128 - 1 - (4 * chunk + t));  // output 1
    }
  return c;
}

/// Random matrices of odd shapes: outputs across the 16-row groups, one to nine blocks.
inline std::vector<RepackCase> random_repack_cases(SeededRng& rng) {
  std::vector<RepackCase> cases;
  for (const int64_t out : std::vector<int64_t>{1, 15, 16, 17, 33, rng.integer(2, 40)})
    for (const int64_t in : std::vector<int64_t>{32, 32 * rng.integer(2, 9)})
      cases.push_back({out, in, random_q8_0_rows(rng, out, in), {}});
  return cases;
}

/// Where byte @p k of a packed matrix of @p in values a row belongs, in words.
inline std::string packed_byte_place(int64_t k, int64_t in) {
  const int64_t blocks = in / 32, block = k / 544, at = k % 544;
  const int64_t g = block / blocks, b = block % blocks;
  std::string where = "group " + std::to_string(g) + ", block " + std::to_string(b) + ", ";
  if (at < 32) return where + "scale bytes of output " + std::to_string(16 * g + at / 2);
  const int64_t chunk = (at - 32) / 64, o = (at - 32) % 64 / 4, t = (at - 32) % 4;
  return where + "chunk " + std::to_string(chunk) + ": code " + std::to_string(4 * chunk + t) + " of output " +
         std::to_string(16 * g + o);
}

/// 11.1: every case's packed bytes equal the lab's PackedMatrix (and the hand answer, if any).
inline ::testing::AssertionResult repacks_match(const RepackRunFn& run, const std::vector<RepackCase>& cases) {
  const Answers<std::vector<uint8_t>> got = run(cases);
  for (size_t k = 0; k < cases.size(); ++k) {
    const RepackCase& c = cases[k];
    const std::string what = "repack_q8_0(" + std::to_string(c.out) + " rows, in " + std::to_string(c.in) + ")";
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << what << "\n  no answer: " << missing;
    const quant::PackedMatrix lab({quant::GgmlType::q8_0, c.out, c.in, c.rows});
    const std::span<const uint8_t> want = lab.bytes();
    if (!c.hand.empty() && !std::equal(want.begin(), want.end(), c.hand.begin(), c.hand.end()))
      return ::testing::AssertionFailure() << what << ": the lab's PackedMatrix disagrees with ch11.h's worked example "
                                           << "(a lab bug, not yours)";
    const std::vector<uint8_t>& mine = got.answers[k];
    if (mine.size() != want.size())
      return ::testing::AssertionFailure()
             << what << ": " << mine.size() << " bytes, want " << want.size() << " = ⌈out / 16⌉ · in / 32 · 544 ("
             << (c.out + 15) / 16 << " groups of " << c.in / 32 << " packed blocks)"
             << (mine.size() == c.rows.size() ? " — the same size as the GGUF rows: the padding rows are missing" : "");
    for (size_t i = 0; i < want.size(); ++i)
      if (mine[i] != want[i]) {
        std::string hint;
        const int64_t at = int64_t(i % 544);
        if (at >= 32 && int64_t(i / 544) == 0) {
          // The usual slip: each output's 32 codes kept together (GGUF's order) instead of chunked.
          const int64_t o = (at - 32) / 32, j = (at - 32) % 32;
          if (o < c.out && (mine[i] ^ 0x80) == c.rows[size_t(o * c.in / 32 * 34 + 2 + j)])
            hint = "\n  your byte is code " + std::to_string(j) + " of output " + std::to_string(o) +
                   ": the codes are in GGUF's order (each output's 32 together); a chunk holds codes 4c … 4c + 3 of "
                   "all 16 outputs";
        }
        if (hint.empty() && at >= 32 && (mine[i] ^ 0x80) == want[i])
          hint = "\n  your byte is the code q itself: a code is stored as q + 128 (q xor 0x80), the unsigned byte "
                 "vpdpbusd multiplies";
        return ::testing::AssertionFailure() << what << ": byte " << i << " (" << packed_byte_place(int64_t(i), c.in)
                                             << ") is " << int(mine[i]) << ", want " << int(want[i]) << hint;
      }
  }
  return ::testing::AssertionSuccess();
}

/// A call 11.1 must refuse (or, with an empty name, accept), and the argument it must name.
struct BadRepackCall {
  int64_t bytes = 0, out = 0, in = 0;
  std::string name, value;  ///< the first bad argument and its value ("" when the call is fine)
};

/// The refusals of ch11.h, in its order, and one call that must be accepted (out = 0).
inline std::vector<BadRepackCall> bad_repack_calls() {
  return {{68, 2, 0, "in", "0"},        {68, 2, 48, "in", "48"},      {68, 2, -32, "in", "-32"},
          {68, -1, 32, "out", "-1"},    {67, 2, 32, "gguf_rows.size()", "67"},
          {0, 0, 32, "", ""}};
}

inline const char* kReturned = "returned";
inline const char* kRefused = "refused: ";

/// Runs the calls: each answer is kReturned or kRefused + the exception's message.
using RefusalRunFn = std::function<Answers<std::string>(std::span<const BadRepackCall> calls)>;

/// 11.1's refusals: each bad call refused naming "<name> = <value>", the good one returned.
inline ::testing::AssertionResult refusals_match(const RefusalRunFn& run, const std::vector<BadRepackCall>& calls) {
  const Answers<std::string> got = run(calls);
  for (size_t k = 0; k < calls.size(); ++k) {
    const BadRepackCall& c = calls[k];
    const std::string where = "repack_q8_0(" + std::to_string(c.bytes) + " bytes, out " + std::to_string(c.out) +
                              ", in " + std::to_string(c.in) + ")";
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << where << "\n  no answer: " << missing;
    const std::string& answer = got.answers[k];
    if (c.name.empty()) {
      if (answer != kReturned) return ::testing::AssertionFailure() << where << ": must return, but it was " << answer;
      continue;
    }
    const std::string needle = c.name + " = " + c.value;
    if (answer == kReturned || answer.find(needle) == std::string::npos)
      return ::testing::AssertionFailure() << where << ": " << answer << "\n  expected std::invalid_argument naming \""
                                           << needle << ": <rule>\" (require(ok, \"" << c.name
                                           << "\", value, rule)), the first bad argument in ch11.h's order";
  }
  return ::testing::AssertionSuccess();
}

// ==== 11.2 the micro-kernel ===================================================================

/// One call of the micro-kernel: a matrix of up to 16 rows (one group, padded), its repacked
/// bytes (the lab's), and num_rows quantized activation rows.
struct KernelCase {
  int64_t out = 0, in = 0;
  int num_rows = 1;
  std::vector<uint8_t> rows;                      ///< GGUF's Q8_0 rows of W
  std::vector<uint8_t> packed;                    ///< the lab's PackedMatrix bytes of them: one group
  Tensor<float> x;                                ///< [num_rows, in]: the activations before quantization
  std::vector<student::ActivationBlock> act;      ///< num_rows × in / 32 blocks: x quantized (Q8_0)
};

/// Runs a batch of cases: each answer is the 16 · num_rows outputs.
using KernelRunFn = std::function<Answers<std::vector<float>>(std::span<const KernelCase> cases)>;

/// x quantized as chapter 08's kernel quantizes it (quantize_row_q8_0), into the contract's blocks.
inline std::vector<student::ActivationBlock> quantized_activations(const Tensor<float>& x) {
  const int64_t rows = x.dim(0), in = x.dim(1), blocks = in / 32;
  std::vector<student::ActivationBlock> act(size_t(rows * blocks));
  std::vector<quant::BlockQ8_0> q(static_cast<size_t>(blocks));
  for (int64_t r = 0; r < rows; ++r) {
    quant::quantize_row_q8_0(std::span(x.data() + r * in, size_t(in)), q);
    for (int64_t b = 0; b < blocks; ++b) {
      student::ActivationBlock& a = act[size_t(r * blocks + b)];
      a.d = half_bits_to_float(q[size_t(b)].d);
      a.code_sum = 0;
      for (int j = 0; j < 32; ++j) {
        a.codes[j] = q[size_t(b)].qs[j];
        a.code_sum += a.codes[j];
      }
    }
  }
  return act;
}

/// Random cases: 1 … 4 rows, 1, 3 and 17 blocks, full and partial groups, an outlier a row.
inline std::vector<KernelCase> random_kernel_cases(SeededRng& rng) {
  std::vector<KernelCase> cases;
  for (const int64_t in : std::vector<int64_t>{32, 96, 544})
    for (const int num_rows : {1, 2, 3, 4}) {
      KernelCase c;
      c.out = num_rows == 3 ? rng.integer(1, 15) : 16;
      c.in = in;
      c.num_rows = num_rows;
      c.rows = random_q8_0_rows(rng, c.out, in);
      const quant::PackedMatrix packed({quant::GgmlType::q8_0, c.out, in, c.rows});
      c.packed.assign(packed.bytes().begin(), packed.bytes().end());
      c.x = rng.normal_tensor({num_rows, in});
      for (int r = 0; r < num_rows; ++r) c.x.data()[r * in + rng.integer(0, in - 1)] *= 40.0f;
      c.act = quantized_activations(c.x);
      cases.push_back(std::move(c));
    }
  return cases;
}

/// 11.2: every real output bit for bit chapter 08's scalar reference, every padding output 0.
inline ::testing::AssertionResult kernels_match(const KernelRunFn& run, const std::vector<KernelCase>& cases) {
  const Answers<std::vector<float>> got = run(cases);
  for (size_t k = 0; k < cases.size(); ++k) {
    const KernelCase& c = cases[k];
    const std::string what = "micro_kernel_q8_0(" + std::to_string(c.num_rows) + " rows, " + std::to_string(c.in / 32) +
                             " blocks, a group of " + std::to_string(c.out) + " real outputs)";
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << what << "\n  no answer: " << missing;
    const std::vector<float>& mine = got.answers[k];
    if (int64_t(mine.size()) != 16 * c.num_rows)
      return ::testing::AssertionFailure() << what << ": " << mine.size() << " outputs came back, want " << 16 * c.num_rows;
    Tensor<float> want({c.num_rows, c.out});
    want.poison();
    quant::quant_matmul_cpu(c.x, {quant::GgmlType::q8_0, c.out, c.in, c.rows}, want, quant::QuantKernel::scalar);
    for (int r = 0; r < c.num_rows; ++r)
      for (int64_t o = 0; o < 16; ++o) {
        const float y = mine[size_t(r * 16 + o)];
        const std::string at = "row " + std::to_string(r) + ", output " + std::to_string(o);
        if (o >= c.out) {
          if (!(y == 0.0f))
            return ::testing::AssertionFailure() << what << ": " << at << " is a padding output (scale 0): want 0, got "
                                                 << show(y) << (std::isnan(y) ? " — it was never written" : "");
          continue;
        }
        const float w = want.data()[r * c.out + o];
        if (std::memcmp(&y, &w, sizeof y) == 0) continue;
        std::string hint;
        if (std::isnan(y)) hint = " — it was never written (the output was poisoned with NaN)";
        else if (std::fabs(double(y) - double(w)) <= 1e-4 * (1.0 + std::fabs(double(w))))
          hint = " — close but not the same bits: the float operations differ from the contract (one fma a block, "
                 "d_w · d_x first, blocks in order from 0.0f; no float sum of partial chunks, no separate multiply and add)";
        return ::testing::AssertionFailure() << what << ": " << at << " is " << show(y) << ", want " << show(w)
                                             << " (chapter 08's scalar reference)" << hint;
      }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace inferlab::testing::ch11
