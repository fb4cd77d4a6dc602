#pragma once
// The checks of chapter 08's exercises (exercises/08-real-model/ch08.h), on the lab's own types:
// the graded tests (test_student.cpp) run them on the student's functions, and
// tests/wrong/wrong_ch08_exercises.cpp and wrong_ch08_gemv.cpp on deliberately wrong versions that
// they must reject.
//
// 8.1–8.3 work as chapter 07's checks do: each check draws its questions first (hand-worked cases
// that each teach one rule, or fresh random inputs from a SeededRng: the seed is printed on
// failure), hands ALL of them at once to the function under test (the graded test answers the
// batch in one sandboxed child process, the wrong fixtures in this one), and only then computes
// the expected answers — twice, by the lab's library (kernels/quant, runtime/tokenizer) and by a
// version written here, which must agree (a lab bug otherwise) — and compares, answer by answer.
// The first wrong answer fails the check with the input, the expected and the returned answer,
// why, and — where it recognises one — the usual mistake behind it.
//
// 8.4 (the GEMV kernel, sim) runs one launch per case under every thread order of
// default_schedules() with y poisoned before each (tests/support/schedules.h), then compares each
// output with the float64 value of the quantized product within the fp32 rounding bound derived
// below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/half.h"
#include "common/rng.h"
#include "common/tensor.h"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/quant_matmul.h"
#include "runtime/gguf/gguf.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/pretokenizer.h"
#include "runtime/tokenizer/vocabulary.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"
#include "tests/support/student_answers.h"

namespace inferlab::testing::ch08 {

using quant::BlockQ4_1;
using quant::BlockQ8_0;
using quant::BlockQ8_1;

// A batch's answers, and why they stop early: tests/support/student_answers.h.
using testing::Answers;
using testing::missing_answer;

/// The unit roundoff of fp32 and γ_n = n·u / (1 − n·u): the relative error bound of n fp32
/// roundings in a chain (Higham, Accuracy and Stability of Numerical Algorithms, §3.1).
inline constexpr double kFp32Unit = 0x1p-24;
inline double gamma_fp32(double n) {
  return n * kFp32Unit / (1.0 - n * kFp32Unit);
}

inline double f16(uint16_t bits) {
  return double(half_bits_to_float(bits));
}

/// A number for a message, with enough digits to tell floats apart.
inline std::string show(double x) {
  std::ostringstream s;
  s.precision(9);
  s << x;
  return s.str();
}

/// "0x3400 (0.25)".
inline std::string show_half(uint16_t bits) {
  std::ostringstream s;
  s << "0x" << std::hex << bits << std::dec << " (" << show(f16(bits)) << ")";
  return s.str();
}

inline std::string show_byte(uint8_t b) {
  static const char* digits = "0123456789ABCDEF";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

// ==== 8.1 dequantize_q4_1 ====================================================================

/// Decoders written here, each in double: ggml's order and the two usual wrong ones.
enum class NibbleOrder {
  ggml,      ///< byte j: value j low, value j + 16 high
  adjacent,  ///< byte j: values 2j (low) and 2j + 1 (high) — the classic guess
  swapped,   ///< byte j: value j high, value j + 16 low
};

/// Code of value @p j (0 … 31) of a Q4_1 block's bytes @p qs in @p order.
inline int q4_code(const uint8_t* qs, int j, NibbleOrder order) {
  switch (order) {
    case NibbleOrder::ggml:
      return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
    case NibbleOrder::adjacent:
      return j % 2 == 0 ? qs[j / 2] & 15 : qs[j / 2] >> 4;
    case NibbleOrder::swapped:
      return j < 16 ? qs[j] >> 4 : qs[j - 16] & 15;
  }
  return 0;
}

/// The values of @p blocks in double (exact: q·d + m spans at most 41 bits for fp16 d and m),
/// decoded in @p order, with or without the minimum.
inline std::vector<double> decode_q4_1_f64(std::span<const BlockQ4_1> blocks, NibbleOrder order = NibbleOrder::ggml,
                                           bool with_minimum = true) {
  std::vector<double> out;
  out.reserve(blocks.size() * 32);
  for (const BlockQ4_1& b : blocks)
    for (int j = 0; j < 32; ++j)
      out.push_back(double(q4_code(b.qs, j, order)) * f16(b.d) + (with_minimum ? f16(b.m) : 0.0));
  return out;
}

/// A row of Q4_1 blocks to decode, what it teaches, and — for a hand case — the values worked
/// out by hand.
struct DequantizeQuestion {
  std::vector<BlockQ4_1> blocks;
  std::string lesson;
  std::vector<float> hand;  ///< empty: no hand answer
};

/// Decodes every row of a batch (each answer: 32 values a block, written into an output poisoned
/// with NaN before the call).
using DequantizeBatchFn = std::function<Answers<std::vector<float>>(std::span<const std::vector<BlockQ4_1>> rows)>;

inline std::string describe_q4_1_block(const BlockQ4_1& b, size_t index) {
  std::ostringstream s;
  s << "block " << index << ": d " << show_half(b.d) << ", m " << show_half(b.m) << ", qs";
  for (int j = 0; j < 16; ++j) s << " " << show_byte(b.qs[j]);
  return s.str();
}

inline std::string describe_row(std::span<const BlockQ4_1> blocks, size_t focus_block) {
  std::ostringstream s;
  s << blocks.size() << " block" << (blocks.size() == 1 ? "" : "s");
  s << "; " << describe_q4_1_block(blocks[focus_block], focus_block);
  return s.str();
}

/// @p decode decodes every row as the lab's dequantize_row_q4_1 does, value for value: the
/// reference and the float64 decoder rounded once must agree (a lab bug otherwise), and so must
/// each answer.
inline ::testing::AssertionResult rows_decode(const DequantizeBatchFn& decode,
                                              const std::vector<DequantizeQuestion>& questions) {
  std::vector<std::vector<BlockQ4_1>> inputs;
  inputs.reserve(questions.size());
  for (const DequantizeQuestion& q : questions) inputs.push_back(q.blocks);
  const Answers<std::vector<float>> got = decode(inputs);
  for (size_t k = 0; k < questions.size(); ++k) {
    const DequantizeQuestion& q = questions[k];
    const size_t n = q.blocks.size() * 32;
    std::vector<float> lab(n, std::nanf(""));
    quant::dequantize_row_q4_1(q.blocks, lab);
    const std::vector<double> exact = decode_q4_1_f64(q.blocks);
    for (size_t i = 0; i < n; ++i)
      if (lab[i] != float(exact[i]) || (!q.hand.empty() && q.hand[i] != lab[i]))
        return ::testing::AssertionFailure() << "lab bug: quant::dequantize_row_q4_1, the float64 decoder and the hand "
                                                "values of \""
                                             << q.lesson << "\" disagree at value " << i;
    const std::string where = (q.lesson.empty() ? "" : q.lesson + ":\n  ");
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure()
             << where << "no values from dequantize_q4_1: " << missing << "\n  row of " << describe_row(q.blocks, 0);
    const std::vector<float>& values = got.answers[k];
    if (values.size() != n)
      return ::testing::AssertionFailure()
             << where << "dequantize_q4_1 gave " << values.size() << " values, expected " << n << " (32 a block)";
    for (size_t i = 0; i < n; ++i) {
      if (values[i] == lab[i]) continue;
      const size_t block = i / 32, j = i % 32;
      const BlockQ4_1& b = q.blocks[block];
      ::testing::AssertionResult failure = ::testing::AssertionFailure();
      failure << where << "out[" << i << "] (value " << j << " of block " << block << ") is " << show(values[i])
              << ", expected " << show(lab[i]) << " = " << q4_code(b.qs, int(j), NibbleOrder::ggml)
              << " · d + m = " << q4_code(b.qs, int(j), NibbleOrder::ggml) << " · " << show(f16(b.d)) << " + "
              << show(f16(b.m)) << "\n  (value " << j << " is the " << (j < 16 ? "LOW" : "HIGH") << " nibble of qs["
              << j % 16 << "] = " << show_byte(b.qs[j % 16]) << ")\n  row of " << describe_row(q.blocks, block);
      if (std::isnan(values[i]))
        return failure << "\n  NaN: out is poisoned before the call — this value was never written";
      const auto all_match = [&](const std::vector<double>& alt) {
        for (size_t t = 0; t < n; ++t)
          if (values[t] != float(alt[t])) return false;
        return true;
      };
      if (all_match(decode_q4_1_f64(q.blocks, NibbleOrder::adjacent)))
        return failure << "\n  your values are the nibbles read as adjacent pairs (byte j = values 2j, 2j + 1): "
                          "ggml puts value j in the low nibble of byte j and value j + 16 in its high nibble";
      if (all_match(decode_q4_1_f64(q.blocks, NibbleOrder::swapped)))
        return failure << "\n  your values have the nibbles swapped: the LOW nibble (qs[j] & 15) is value j, the "
                          "HIGH nibble (qs[j] >> 4) value j + 16";
      if (all_match(decode_q4_1_f64(q.blocks, NibbleOrder::ggml, false)))
        return failure << "\n  your values are q·d alone: the minimum m is added to every value of the block";
      return failure;
    }
  }
  return ::testing::AssertionSuccess();
}

/// A Q4_1 block from its fields.
inline BlockQ4_1 q4_1_block(float d, float m, const uint8_t (&qs)[16]) {
  BlockQ4_1 b{};
  b.d = float_to_half_bits(d);
  b.m = float_to_half_bits(m);
  std::memcpy(b.qs, qs, 16);
  return b;
}

/// ch08.h's worked example block: d = 0.25, m = −1, byte j = j | (15 − j) << 4.
inline BlockQ4_1 worked_example_block() {
  uint8_t qs[16];
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(j | ((15 - j) << 4));
  return q4_1_block(0.25f, -1.0f, qs);
}

/// The worked example of ch08.h and rows built by hand around it.
inline std::vector<DequantizeQuestion> worked_example_rows() {
  std::vector<DequantizeQuestion> q;
  const BlockQ4_1 example = worked_example_block();
  std::vector<float> hand(32);
  for (int j = 0; j < 16; ++j) {
    hand[size_t(j)] = float(j) * 0.25f - 1.0f;
    hand[size_t(j) + 16] = float(15 - j) * 0.25f - 1.0f;
  }
  q.push_back({{example}, "ch08.h's worked example: d 0.25, m −1, byte j = j | (15 − j) << 4", hand});
  // Every code once in the low nibbles, 15 − code in the high ones, then a second block whose
  // high nibbles repeat one code: value j + 16 of block 1 is 3·1.5 + 100.
  uint8_t qs[16];
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(((j * 7) % 16) | (3 << 4));
  const BlockQ4_1 second = q4_1_block(1.5f, 100.0f, qs);
  std::vector<float> both = hand;
  for (int j = 0; j < 16; ++j) both.push_back(float((j * 7) % 16) * 1.5f + 100.0f);
  for (int j = 0; j < 16; ++j) both.push_back(3.0f * 1.5f + 100.0f);
  q.push_back(
      {{example, second}, "two blocks, each with its own d and m (block 1: d 1.5, m 100, high nibbles all 3)", both});
  // A block of one code: low nibbles 0, high nibbles 15 — the first half is m, the second 15·d + m.
  uint8_t split[16];
  std::fill(split, split + 16, uint8_t(0xF0));
  std::vector<float> halves(16, -2.0f);
  halves.resize(32, 15.0f * 0.5f - 2.0f);
  q.push_back({{q4_1_block(0.5f, -2.0f, split)},
               "every byte 0xF0: values 0 … 15 are m = −2 (low nibbles 0), values 16 … 31 are 15·0.5 − 2 (high 15)",
               halves});
  return q;
}

/// Options of random Q4_1 rows.
struct RowOptions {
  int64_t min_blocks = 1;      ///< rows of min_blocks … max_blocks blocks
  int64_t max_blocks = 48;     ///< …
  bool quantized = false;      ///< the lab's quantizer on random floats (else random fields and bytes)
  bool large_minimum = false;  ///< the values sit far from 0: m dominates q·d
};

/// A random finite fp16 value: |x| in [2^lo, 2^hi), random sign when @p signed_ is set.
inline uint16_t random_half(Rng& rng, float lo, float hi, bool signed_) {
  const float magnitude = std::exp2(rng.uniform(lo, hi));
  return float_to_half_bits(signed_ && rng.integer(0, 1) ? -magnitude : magnitude);
}

/// A random row of Q4_1 blocks: random bytes (every nibble value) and fp16 fields, or the lab's
/// quantizer on random floats.
inline std::vector<BlockQ4_1> random_q4_1_row(Rng& rng, const RowOptions& options = {}) {
  const int64_t blocks = rng.integer(options.min_blocks, options.max_blocks);
  std::vector<BlockQ4_1> row(static_cast<size_t>(blocks));
  if (options.quantized) {
    std::vector<float> x(static_cast<size_t>(blocks * 32));
    const float offset = options.large_minimum ? rng.uniform(-300.0f, 300.0f) : 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      const float scale = std::exp2(rng.uniform(-8.0f, 4.0f)) * (options.large_minimum ? 0.01f : 1.0f);
      for (int j = 0; j < 32; ++j) x[size_t(b * 32 + j)] = offset + scale * rng.normal();
    }
    quant::quantize_row_q4_1(x, row);
    return row;
  }
  for (BlockQ4_1& b : row) {
    b.d = random_half(rng, -14.0f, 3.0f, false);
    b.m = options.large_minimum ? random_half(rng, 4.0f, 9.0f, true) : random_half(rng, -10.0f, 4.0f, true);
    for (uint8_t& byte : b.qs) byte = uint8_t(rng.integer(0, 255));
  }
  return row;
}

/// @p count random rows (random bytes and quantized floats alternately), drawn before any is
/// decoded.
inline std::vector<DequantizeQuestion> random_rows(Rng& rng, int count, RowOptions options = {}) {
  std::vector<DequantizeQuestion> q;
  for (int i = 0; i < count; ++i) {
    options.quantized = i % 2 == 1;
    q.push_back({random_q4_1_row(rng, options),
                 std::string(options.quantized ? "a quantized random row" : "a row of random bytes") + " (case " +
                     std::to_string(i + 1) + " of " + std::to_string(count) + ")",
                 {}});
  }
  return q;
}

// ==== 8.2 dot_q4_1_q8_1 ======================================================================

/// One dot product to compute: a Q4_1 weight row and a Q8_1 activation row of as many blocks,
/// and — when the activations were quantized by the lab (quant::quantize_row_q8_1) — the floats
/// they came from, so that the lab's matmul can answer too.
struct DotCase {
  std::vector<BlockQ4_1> w;
  std::vector<BlockQ8_1> x;
  std::vector<float> x_values;  ///< empty: x was built by hand
};

/// A dot product to ask, what it teaches, and — for a hand case — its value.
struct DotQuestion {
  DotCase input;
  std::string lesson;
  std::optional<float> hand;
};

/// Answers every dot product of a batch.
using DotBatchFn = std::function<Answers<float>(std::span<const DotCase> cases)>;

/// The integer Σ q_w·q_x of block @p b, the weight codes read in @p order (signed: Q4_0's q − 8).
inline int32_t block_sum(const BlockQ4_1& w, const BlockQ8_1& x, NibbleOrder order = NibbleOrder::ggml,
                         bool signed_codes = false) {
  int32_t sum = 0;
  for (int j = 0; j < 32; ++j) sum += (q4_code(w.qs, j, order) - (signed_codes ? 8 : 0)) * int32_t(x.qs[j]);
  return sum;
}

/// Ways to compute the dot product: the contract and the usual mistakes.
struct DotVariant {
  NibbleOrder order = NibbleOrder::ggml;
  bool signed_codes = false;  ///< q − 8 (Q4_0's codes)
  bool minimum = true;        ///< the m_w·s_x term
  bool s_from_codes = false;  ///< s_x recomputed as fp16(d_x)·Σq_x instead of the block's s
};

/// The contract's fp32 chain (ch08.h, quant_matmul.h), written here: per block, in order,
/// fmaf(d_w·d_x, float(Σ), acc), then fmaf(m_w, s_x, acc).
inline float contract_dot(const DotCase& c, const DotVariant& v = {}) {
  float acc = 0.0f;
  for (size_t b = 0; b < c.w.size(); ++b) {
    const int32_t sum = block_sum(c.w[b], c.x[b], v.order, v.signed_codes);
    const float dd = half_bits_to_float(c.w[b].d) * half_bits_to_float(c.x[b].d);
    acc = std::fma(dd, float(sum), acc);
    if (v.minimum) {
      int32_t codes = 0;
      for (const int8_t q : c.x[b].qs) codes += q;
      const float s = v.s_from_codes ? half_bits_to_float(c.x[b].d) * float(codes) : half_bits_to_float(c.x[b].s);
      acc = std::fma(half_bits_to_float(c.w[b].m), s, acc);
    }
  }
  return acc;
}

/// The float64 value of the same sum and its fp32 bound: every product exact in double, 2 fp32
/// roundings a block → γ_{2B}·Σ_b (|d_w·d_x·Σ_b| + |m_w·s_x|).
struct DotOracle {
  double value = 0, bound = 0;
};

inline DotOracle oracle_dot(const DotCase& c, const DotVariant& v = {}) {
  DotOracle o;
  double magnitude = 0;
  for (size_t b = 0; b < c.w.size(); ++b) {
    const double dd = f16(c.w[b].d) * f16(c.x[b].d);
    const double main = dd * double(block_sum(c.w[b], c.x[b], v.order, v.signed_codes));
    double minimum = 0;
    if (v.minimum) {
      int32_t codes = 0;
      for (const int8_t q : c.x[b].qs) codes += q;
      minimum = f16(c.w[b].m) * (v.s_from_codes ? f16(c.x[b].d) * double(codes) : f16(c.x[b].s));
    }
    o.value += main + minimum;
    magnitude += std::abs(main) + std::abs(minimum);
  }
  o.bound = gamma_fp32(2.0 * double(c.w.size())) * magnitude + 1e-40;
  return o;
}

/// The lab's answer for a case whose x came from floats: quant_matmul_cpu (scalar kernel) on that
/// row of floats and the one-row weight matrix.
inline std::optional<float> lab_dot(const DotCase& c) {
  if (c.x_values.empty()) return std::nullopt;
  const int64_t in = int64_t(c.w.size()) * 32;
  const Tensor<float> x({1, in}, c.x_values);
  Tensor<float> y({1, 1});
  const quant::BlockMatrix w{quant::GgmlType::q4_1, 1, in,
                             std::span(reinterpret_cast<const uint8_t*>(c.w.data()), c.w.size() * sizeof(BlockQ4_1))};
  quant::quant_matmul_cpu(x, w, y, quant::QuantKernel::scalar);
  return y[0];
}

inline std::string describe_dot(const DotCase& c) {
  std::ostringstream s;
  s << c.w.size() << " block" << (c.w.size() == 1 ? "" : "s") << " (in = " << 32 * c.w.size() << ")";
  const BlockQ4_1& w = c.w[0];
  const BlockQ8_1& x = c.x[0];
  s << "\n  w " << describe_q4_1_block(w, 0) << "\n  x block 0: d " << show_half(x.d) << ", s " << show_half(x.s)
    << ", qs";
  for (int j = 0; j < 8; ++j) s << " " << int(x.qs[j]);
  s << " …";
  if (c.w.size() > 1) s << "\n  (and " << c.w.size() - 1 << " more blocks)";
  return s.str();
}

/// @p dot answers every question bit for bit as the contract's chain (ch08.h): the chain written
/// here must equal the lab's quant_matmul_cpu where x came from floats, lie within the fp32 bound
/// of the float64 oracle and give each hand value (a lab bug otherwise); then each answer must lie
/// within that bound (else: a wrong value, and the mistake it matches) and equal the chain's bits
/// (else: the right value in the wrong order).
inline ::testing::AssertionResult dots_match(const DotBatchFn& dot, const std::vector<DotQuestion>& questions) {
  std::vector<DotCase> inputs;
  inputs.reserve(questions.size());
  for (const DotQuestion& q : questions) inputs.push_back(q.input);
  const Answers<float> got = dot(inputs);
  for (size_t k = 0; k < questions.size(); ++k) {
    const DotQuestion& q = questions[k];
    const float expected = contract_dot(q.input);
    const DotOracle oracle = oracle_dot(q.input);
    const std::optional<float> lab = lab_dot(q.input);
    if ((lab && *lab != expected) || std::abs(double(expected) - oracle.value) > oracle.bound ||
        (q.hand && *q.hand != expected))
      return ::testing::AssertionFailure()
             << "lab bug: the contract's chain (" << show(expected) << "), quant_matmul_cpu ("
             << (lab ? show(*lab) : "–") << "), the float64 oracle (" << show(oracle.value) << " ± "
             << show(oracle.bound) << ") and the hand value disagree on \"" << q.lesson << "\"";
    const std::string where = (q.lesson.empty() ? "" : q.lesson + ":\n  ");
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure()
             << where << "no value from dot_q4_1_q8_1: " << missing << "\n  " << describe_dot(q.input);
    const float g = got.answers[k];
    if (std::memcmp(&g, &expected, sizeof g) == 0 || (g == 0.0f && expected == 0.0f)) continue;  // ±0 alike
    ::testing::AssertionResult failure = ::testing::AssertionFailure();
    failure << where << "dot_q4_1_q8_1 returned " << show(g) << ", expected " << show(expected) << " (float64 "
            << show(oracle.value) << ", fp32 rounding bound ±" << show(oracle.bound) << ")\n  "
            << describe_dot(q.input);
    if (std::isnan(g)) return failure << "\n  NaN: a value read from outside the rows, or an fp16 field misread?";
    const std::vector<std::pair<DotVariant, std::string>> mistakes = {
        {{NibbleOrder::ggml, false, false, false},
         "the minimum's term is missing: each block adds m_w·s_x (s_x = d_x·Σ q_x, stored in the Q8_1 block)"},
        {{NibbleOrder::adjacent, false, true, false},
         "the nibbles are read as adjacent pairs: value j is the low nibble of qs[j], value j + 16 its high nibble"},
        {{NibbleOrder::swapped, false, true, false},
         "the nibbles are swapped: the LOW nibble of qs[j] is value j (it multiplies x.qs[j]), the HIGH one value "
         "j + 16"},
        {{NibbleOrder::ggml, true, true, false},
         "the codes are taken as Q4_0's q − 8: Q4_1's codes are 0 … 15, and the minimum m carries the offset"},
        {{NibbleOrder::ggml, false, true, true},
         "s_x is recomputed from the codes: use the block's s (d·Σq with d before its rounding to fp16)"},
    };
    // Every mistake that gives this value: the same bits as its chain, or a value within rounding
    // of its exact sum and away from the right one. (Where the minimum dominates, a wrong main term
    // can hide inside the rounding of the right one: its bits still tell.)
    bool recognised = false;
    for (const auto& [variant, why] : mistakes) {
      const float chain = contract_dot(q.input, variant);
      const DotOracle alt = oracle_dot(q.input, variant);
      if (std::memcmp(&chain, &g, sizeof g) == 0 ||
          (std::abs(double(g) - alt.value) <= alt.bound && std::abs(alt.value - oracle.value) > oracle.bound)) {
        failure << "\n  " << why;
        recognised = true;
      }
    }
    if (!recognised && std::abs(double(g) - oracle.value) <= oracle.bound)
      failure << "\n  your value is within fp32 rounding of the exact sum, but not the contract's bits: keep "
                 "its order — per block, acc = fmaf(d_w·d_x, float(sum), acc), then acc = fmaf(m_w, s_x, acc), "
                 "block after block from acc = 0 (not acc += dd·sum + m·s, nor the blocks in another order)";
    return failure;
  }
  return ::testing::AssertionSuccess();
}

/// A Q8_1 block from its scale and codes; s = fp16(d·Σq) as the quantizer writes it.
inline BlockQ8_1 q8_1_block(float d, const int8_t (&qs)[32]) {
  BlockQ8_1 b{};
  b.d = float_to_half_bits(d);
  int sum = 0;
  for (int j = 0; j < 32; ++j) sum += qs[j];
  b.s = float_to_half_bits(d * float(sum));
  std::memcpy(b.qs, qs, 32);
  return b;
}

/// ch08.h's worked example and hand cases around it.
inline std::vector<DotQuestion> worked_example_dots() {
  std::vector<DotQuestion> q;
  int8_t ones[32];
  std::fill(ones, ones + 32, int8_t(1));
  const BlockQ4_1 w = worked_example_block();
  q.push_back({{{w}, {q8_1_block(0.5f, ones)}, {}},
               "ch08.h's worked example: sum 240, d_w·d_x 0.125, m_w·s_x = −1·16 → 14",
               14.0f});
  // Codes that alternate +2 / −2 over the block: Σ q_x = 0, so s = 0 and the minimum drops out;
  // the low nibbles j meet +2 at even j, −2 at odd j: Σ = −16 (low half) + 16 (high half) = 0 …
  int8_t alternating[32];
  for (int j = 0; j < 32; ++j) alternating[j] = int8_t(j % 2 == 0 ? 2 : -2);
  q.push_back({{{w}, {q8_1_block(0.25f, alternating)}, {}},
               "x codes +2, −2, +2, …: Σ q_x = 0 so s = 0; Σ q_w·q_x = 2·(0 − 1 + 2 − … − 15) + 2·(15 − 14 + …) = 0",
               0.0f});
  // … and with the codes of the first half only: x = 1 on values 0 … 15, 0 on 16 … 31.
  int8_t first_half[32] = {};
  std::fill(first_half, first_half + 16, int8_t(1));
  q.push_back({{{w}, {q8_1_block(1.0f, first_half)}, {}},
               "x = 1 on values 0 … 15 only: the LOW nibbles' codes 0 … 15 count, sum 120; 0.25·120 − 1·16 = 14",
               14.0f});
  q.push_back({{{w, w}, {q8_1_block(0.5f, ones), q8_1_block(1.0f, first_half)}, {}},
               "the two blocks above in one row: 14 + 14, the fma chain block after block",
               28.0f});
  return q;
}

/// A random activation row of @p blocks blocks, quantized to Q8_1 by the lab, floats kept.
inline void random_activations(Rng& rng, DotCase& c, size_t blocks, float scale = 1.0f) {
  c.x_values.resize(blocks * 32);
  for (size_t b = 0; b < blocks; ++b) {
    const float block_scale = scale * std::exp2(rng.uniform(-4.0f, 4.0f));
    for (int j = 0; j < 32; ++j) c.x_values[b * 32 + size_t(j)] = block_scale * rng.normal(rng.uniform(-0.5f, 0.5f));
  }
  c.x.resize(blocks);
  quant::quantize_row_q8_1(c.x_values, c.x);
}

/// Random dot products: a random or quantized Q4_1 row and a quantized activation row; with
/// @p random_bytes, the Q8_1 blocks are random bytes too (codes −128 … 127, any s).
inline std::vector<DotQuestion> random_dots(Rng& rng, int count, const RowOptions& options = {},
                                            bool random_bytes = false) {
  std::vector<DotQuestion> q;
  for (int i = 0; i < count; ++i) {
    RowOptions o = options;
    o.quantized = options.quantized || i % 2 == 1;
    DotQuestion& question = q.emplace_back();
    question.input.w = random_q4_1_row(rng, o);
    if (random_bytes) {
      question.input.x.resize(question.input.w.size());
      for (BlockQ8_1& b : question.input.x) {
        b.d = random_half(rng, -12.0f, 2.0f, false);
        b.s = random_half(rng, -8.0f, 8.0f, true);
        for (int8_t& code : b.qs) code = int8_t(rng.integer(-128, 127));
      }
    } else {
      random_activations(rng, question.input, question.input.w.size());
    }
    question.lesson = std::string(o.quantized ? "quantized weights" : "random weight bytes") +
                      (random_bytes ? ", random activation bytes" : ", quantized activations") + " (case " +
                      std::to_string(i + 1) + " of " + std::to_string(count) + ")";
  }
  return q;
}

// ==== 8.3 bpe_merge ==========================================================================

/// The merge table the exercise receives: (left, right) → rank (ch08.h's MergeRanks).
using MergeRanks = std::map<std::pair<std::string, std::string>, int32_t>;

/// A vocabulary under test: the lab's tokenizer over it and its merge table.
struct BpeVocabulary {
  std::string name;
  tokenizer::BpeTokenizer tokenizer;
  MergeRanks ranks;
};

/// The lookup table of @p v's merges: rank = index, a pair listed twice keeping its first.
inline MergeRanks merge_ranks(const tokenizer::Vocabulary& v) {
  MergeRanks ranks;
  for (size_t r = 0; r < v.merges.size(); ++r) ranks.emplace(v.merges[r], int32_t(r));
  return ranks;
}

/// A small vocabulary: the symbols of @p alphabet's bytes, then each merge's concatenation (once),
/// with @p merges in rank order.
inline std::shared_ptr<const BpeVocabulary> small_vocabulary(
    const std::string& name, std::string_view alphabet,
    const std::vector<std::pair<std::string, std::string>>& merges) {
  tokenizer::Vocabulary v;
  const auto add = [&](const std::string& token) {
    if (std::find(v.tokens.begin(), v.tokens.end(), token) != v.tokens.end()) return;
    v.tokens.push_back(token);
    v.types.push_back(tokenizer::TokenType::normal);
  };
  for (const char byte : alphabet) add(tokenizer::bytes_to_symbols(std::string(1, byte)));
  for (const auto& [left, right] : merges) add(left + right);
  v.merges = merges;
  return std::make_shared<const BpeVocabulary>(BpeVocabulary{name, tokenizer::BpeTokenizer(v), merge_ranks(v)});
}

/// SmolLM2's vocabulary from the installed model file (built once per process); nullptr, with
/// @p problem set, when the file is missing.
inline std::shared_ptr<const BpeVocabulary> smollm2_vocabulary(const std::string& path, std::string& problem) {
  static std::shared_ptr<const BpeVocabulary> cached;
  if (cached) return cached;
  if (!std::filesystem::exists(path)) {
    problem = "the model " + path + " is not installed: run ./inferlab setup (it installs chapter 08's model)";
    return nullptr;
  }
  tokenizer::Vocabulary v = tokenizer::vocabulary_from_gguf(gguf::GgufFile::open(path));
  MergeRanks ranks = merge_ranks(v);
  cached = std::make_shared<const BpeVocabulary>(
      BpeVocabulary{"SmolLM2", tokenizer::BpeTokenizer(std::move(v)), std::move(ranks)});
  return cached;
}

/// One word to merge: its bytes (what the lab's encode_piece takes), its symbols (what the
/// exercise takes: one per byte that has a token) and the vocabulary.
struct BpeCase {
  std::shared_ptr<const BpeVocabulary> vocabulary;
  std::string piece;
  std::vector<std::string> symbols;
};

/// A word to ask, what it teaches, and — for a hand case — its tokens worked out by hand.
struct BpeQuestion {
  BpeCase input;
  std::string lesson;
  std::optional<std::vector<std::string>> hand;
};

/// Merges every word of a batch.
using BpeBatchFn = std::function<Answers<std::vector<std::string>>(std::span<const BpeCase> cases)>;

/// The case of @p piece (bytes) on @p vocabulary: symbols of the bytes that have a token.
inline BpeCase bpe_case(const std::shared_ptr<const BpeVocabulary>& vocabulary, std::string piece) {
  BpeCase c{vocabulary, std::move(piece), {}};
  for (const char byte : c.piece)
    if (vocabulary->tokenizer.byte_token(uint8_t(byte)) >= 0)
      c.symbols.push_back(tokenizer::bytes_to_symbols(std::string(1, byte)));
  return c;
}

/// The usual wrong merge loops, written here (each a plain O(n²) loop).
enum class MergeRule {
  lowest_rank_leftmost,      ///< the rule
  lowest_rank_rightmost,     ///< ties to the rightmost occurrence
  first_pair_left_to_right,  ///< the first adjacent pair that has any rank, whatever its rank
  single_merge,              ///< the lowest-ranked merge, once
  single_sweep,              ///< one left-to-right sweep merging each pair that has a rank, never again
  highest_rank,              ///< the highest rank first
};

/// @p symbols merged by @p rule with @p ranks; @p steps (when given) receives each merge.
inline std::vector<std::string> merge_by(std::vector<std::string> parts, const MergeRanks& ranks, MergeRule rule,
                                         std::vector<std::string>* steps = nullptr) {
  const auto rank_at = [&](size_t i) -> int64_t {
    const auto it = ranks.find({parts[i], parts[i + 1]});
    return it == ranks.end() ? -1 : it->second;
  };
  const auto merge_at = [&](size_t i) {
    if (steps)
      steps->push_back("\"" + parts[i] + "\" + \"" + parts[i + 1] + "\" (rank " + std::to_string(rank_at(i)) + ")");
    parts[i] += parts[i + 1];
    parts.erase(parts.begin() + std::ptrdiff_t(i) + 1);
  };
  if (rule == MergeRule::single_sweep) {
    for (size_t i = 0; i + 1 < parts.size(); ++i)
      if (rank_at(i) >= 0) merge_at(i);
    return parts;
  }
  for (;;) {
    int64_t best = -1, best_rank = -1;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const int64_t r = rank_at(i);
      if (r < 0) continue;
      const bool better = best < 0 || (rule == MergeRule::lowest_rank_leftmost && r < best_rank) ||
                          (rule == MergeRule::lowest_rank_rightmost && r <= best_rank) ||
                          (rule == MergeRule::single_merge && r < best_rank) ||
                          (rule == MergeRule::highest_rank && r > best_rank);
      if (better) best = int64_t(i), best_rank = r;
      if (rule == MergeRule::first_pair_left_to_right) break;
    }
    if (best < 0) return parts;
    merge_at(size_t(best));
    if (rule == MergeRule::single_merge) return parts;
  }
}

inline std::string show_tokens(std::span<const std::string> tokens) {
  std::ostringstream s;
  s << "[";
  const size_t shown = std::min<size_t>(tokens.size(), 40);
  for (size_t i = 0; i < shown; ++i) s << (i ? " " : "") << "\"" << tokens[i] << "\"";
  if (shown < tokens.size()) s << " … (" << tokens.size() << " in all)";
  return s.str() + "]";
}

/// @p merge answers every word as the lab's BpeTokenizer::encode_piece does, token for token: the
/// lab's tokens and the rule written here (merge_by) must agree, and give each hand answer (a
/// lab bug otherwise).
inline ::testing::AssertionResult merges_match(const BpeBatchFn& merge, const std::vector<BpeQuestion>& questions) {
  std::vector<BpeCase> inputs;
  inputs.reserve(questions.size());
  for (const BpeQuestion& q : questions) inputs.push_back(q.input);
  const Answers<std::vector<std::string>> got = merge(inputs);
  for (size_t k = 0; k < questions.size(); ++k) {
    const BpeQuestion& q = questions[k];
    const BpeVocabulary& v = *q.input.vocabulary;
    std::vector<int32_t> ids;
    v.tokenizer.encode_piece(q.input.piece, ids);
    std::vector<std::string> expected;
    for (const int32_t id : ids) expected.push_back(v.tokenizer.vocabulary().tokens[size_t(id)]);
    std::vector<std::string> steps;
    const std::vector<std::string> written_here =
        merge_by(q.input.symbols, v.ranks, MergeRule::lowest_rank_leftmost, &steps);
    if (written_here != expected || (q.hand && *q.hand != expected))
      return ::testing::AssertionFailure() << "lab bug: BpeTokenizer::encode_piece (" << show_tokens(expected)
                                           << "), the rule written in student_check.h (" << show_tokens(written_here)
                                           << ") and the hand answer disagree on \"" << q.lesson << "\"";
    const std::string where = (q.lesson.empty() ? "" : q.lesson + ":\n  ");
    std::ostringstream input;
    input << "vocabulary " << v.name << " (" << v.ranks.size() << " merges), symbols " << show_tokens(q.input.symbols);
    if (const std::string missing = missing_answer(got, k); !missing.empty())
      return ::testing::AssertionFailure() << where << "no tokens from bpe_merge: " << missing << "\n  " << input.str();
    const std::vector<std::string>& g = got.answers[k];
    if (g == expected) continue;
    ::testing::AssertionResult failure = ::testing::AssertionFailure();
    failure << where << input.str() << "\n  expected " << show_tokens(expected) << "\n  got      " << show_tokens(g);
    if (!steps.empty()) {
      failure << "\n  the merges, lowest rank first (ties: leftmost):";
      for (size_t i = 0; i < steps.size() && i < 24; ++i) failure << "\n    " << i + 1 << ". " << steps[i];
      if (steps.size() > 24) failure << "\n    … " << steps.size() - 24 << " more";
    }
    std::string spelled, word;
    for (const std::string& t : g) spelled += t;
    for (const std::string& s : q.input.symbols) word += s;
    if (spelled != word)
      return failure << "\n  your tokens spell \"" << spelled << "\", not the word \"" << word
                     << "\": a merge joins two neighbours, it never drops or repeats a symbol";
    struct Mistake {
      MergeRule rule;
      std::string what, fix;
    };
    const std::vector<Mistake> mistakes = {
        {MergeRule::lowest_rank_rightmost, "ties going to the rightmost occurrence",
         "when the lowest-ranked pair occurs more than once, the LEFTMOST merges first (keep a pair only when its rank "
         "is strictly lower than the best so far)"},
        {MergeRule::first_pair_left_to_right, "merging the first pair from the left that has a rank",
         "among ALL adjacent pairs, the one of lowest rank merges first, wherever it stands"},
        {MergeRule::single_merge, "one merge only", "repeat until no adjacent pair has a rank"},
        {MergeRule::single_sweep, "one sweep over the word",
         "a merged symbol can merge again: repeat over the new pairs, lowest rank first, until none has a rank"},
        {MergeRule::highest_rank, "the highest rank first", "lower ranks were learned first and merge first"},
    };
    // Every mistake that gives these tokens (on a short word several may: each is named).
    bool recognised = false;
    for (const Mistake& m : mistakes)
      if (merge_by(q.input.symbols, v.ranks, m.rule) == g) {
        failure << "\n  your tokens are what " << m.what << " gives: " << m.fix;
        recognised = true;
      }
    if (recognised) return failure;
    for (size_t i = 0; i + 1 < g.size(); ++i)
      if (v.ranks.count({g[i], g[i + 1]}))
        return failure << "\n  \"" << g[i] << "\" + \"" << g[i + 1] << "\" still has a rank ("
                       << v.ranks.at({g[i], g[i + 1]}) << "): the loop stops only when no adjacent pair has one";
    return failure;
  }
  return ::testing::AssertionSuccess();
}

/// A hand case on a small vocabulary.
inline BpeQuestion hand_word(const std::shared_ptr<const BpeVocabulary>& v, std::string piece,
                             std::vector<std::string> tokens, std::string lesson) {
  return {bpe_case(v, std::move(piece)), std::move(lesson), std::move(tokens)};
}

using Merges = std::vector<std::pair<std::string, std::string>>;

/// ch08.h's worked example and the rules of the merge loop, one hand case each.
inline std::vector<BpeQuestion> worked_example_words() {
  const auto the =
      small_vocabulary("worked example", " the", Merges{{"t", "h"}, {"Ġ", "th"}, {"h", "e"}, {"Ġth", "e"}});
  return {hand_word(the, " the", {"Ġthe"}, "ch08.h's worked example: th (0), Ġth (1), Ġthe (3) — he (2) never merges"),
          hand_word(the, "the", {"th", "e"}, "\"the\" without its space: th (0), then \"th\" + \"e\" has no rank"),
          hand_word(the, "he", {"he"}, "\"he\": one pair, rank 2"),
          hand_word(the, " he", {"Ġ", "he"}, "\" he\": Ġh has no rank, he (2)"),
          hand_word(the, "", {}, "an empty word has no tokens"),
          hand_word(the, "t", {"t"}, "one symbol: nothing to merge")};
}

/// Ties: the same lowest-ranked pair at several places merges leftmost first.
inline std::vector<BpeQuestion> tie_words() {
  const auto a = small_vocabulary("a a", "a", Merges{{"a", "a"}});
  const auto aaaa = small_vocabulary("a a, aa aa", "a", Merges{{"a", "a"}, {"aa", "aa"}});
  const auto aa_a = small_vocabulary("a a, aa a", "a", Merges{{"a", "a"}, {"aa", "a"}});
  const auto spaces = small_vocabulary("Ġ Ġ", " x", Merges{{"Ġ", "Ġ"}});
  return {
      hand_word(a, "aaa", {"aa", "a"}, "\"aaa\" with the one merge \"a a\": the leftmost pair merges, \"aa\" \"a\""),
      hand_word(a, "aaaa", {"aa", "aa"}, "\"aaaa\" with \"a a\": leftmost, then the next pair: \"aa\" \"aa\""),
      hand_word(a, "aaaaa", {"aa", "aa", "a"}, "\"aaaaa\" with \"a a\": \"aa\" \"aa\" \"a\""),
      hand_word(aaaa, "aaaa", {"aaaa"}, "\"aaaa\" with \"a a\" then \"aa aa\": one token"),
      hand_word(aaaa, "aaaaaa", {"aaaa", "aa"}, "\"aaaaaa\" with \"a a\", \"aa aa\": \"aaaa\" \"aa\""),
      hand_word(aa_a, "aaaaa", {"aa", "aaa"},
                "\"aaaaa\" with \"a a\" (0), \"aa a\" (1): a a, then the next a a (rank 0 beats aa a), then aa a"),
      hand_word(spaces, "   ", {"ĠĠ", "Ġ"}, "three spaces with \"Ġ Ġ\": \"ĠĠ\" \"Ġ\" (leftmost), not \"Ġ\" \"ĠĠ\""),
      hand_word(spaces, "x   x", {"x", "ĠĠ", "Ġ", "x"}, "a run of spaces inside a word merges leftmost too")};
}

/// The rank decides, not the position; the loop runs until nothing applies; a pair is a pair.
inline std::vector<BpeQuestion> rank_words() {
  const auto bc_first = small_vocabulary("b c before a b", "abc", Merges{{"b", "c"}, {"a", "b"}});
  const auto chain = small_vocabulary("a b, ab c, c d", "abcd", Merges{{"a", "b"}, {"ab", "c"}, {"c", "d"}});
  const auto nested = small_vocabulary("a b, c d, ab cd", "abcd", Merges{{"a", "b"}, {"c", "d"}, {"ab", "cd"}});
  const auto pair_only = small_vocabulary("b c, a b, ab c", "abc", Merges{{"b", "c"}, {"a", "b"}, {"ab", "c"}});
  const auto late = small_vocabulary("x y late", "axyb", Merges{{"a", "x"}, {"y", "b"}, {"ax", "yb"}, {"x", "y"}});
  return {
      hand_word(bc_first, "abc", {"a", "bc"}, "\"b c\" has rank 0, \"a b\" rank 1: bc merges, though ab comes first"),
      hand_word(chain, "abcd", {"abc", "d"},
                "ab (0), then \"ab\" + \"c\" (1) beats \"c\" + \"d\" (2): a new symbol merges again, by rank"),
      hand_word(nested, "abcd", {"abcd"}, "ab (0), cd (1), then \"ab\" + \"cd\" (2): until no pair has a rank"),
      hand_word(pair_only, "abc", {"a", "bc"},
                "bc (0) first; then \"a\" + \"bc\" is no merge, although \"abc\" is a token (of \"ab\" + \"c\"): "
                "pairs are looked up as pairs"),
      hand_word(late, "axyb", {"axyb"}, "ax (0), yb (1), then \"ax\" + \"yb\" (2): \"x y\" (3) never gets its turn"),
      hand_word(late, "xyb", {"x", "yb"}, "yb (1) before xy (3): the rank decides")};
}

/// Options of random vocabularies and words.
struct RandomBpeOptions {
  bool shuffled = false;  ///< the merge list in random order (ranks unrelated to how tokens were built)
  bool runs = false;      ///< words of long runs of one or two letters (repeated pairs, ties)
};

/// A random small vocabulary over a few letters and the space: merges built from the tokens made
/// so far (as BPE training does), in that order or shuffled.
inline std::shared_ptr<const BpeVocabulary> random_vocabulary(Rng& rng, const RandomBpeOptions& options, int index) {
  const std::string alphabet = std::string(" abcde").substr(0, size_t(rng.integer(2, 6)));
  std::vector<std::string> tokens;
  for (const char byte : alphabet) tokens.push_back(tokenizer::bytes_to_symbols(std::string(1, byte)));
  Merges merges;
  const int64_t count = rng.integer(1, 40);
  for (int64_t i = 0; i < count * 3 && int64_t(merges.size()) < count; ++i) {
    // Recent tokens more often: merges build on merges.
    const auto pick = [&] {
      const int64_t n = int64_t(tokens.size());
      return tokens[size_t(rng.integer(0, 1) ? rng.integer(0, n - 1)
                                             : rng.integer(std::max<int64_t>(0, n - 4), n - 1))];
    };
    std::pair<std::string, std::string> pair{pick(), pick()};
    if (pair.first.size() + pair.second.size() > 24) continue;
    if (std::find(merges.begin(), merges.end(), pair) != merges.end()) continue;
    merges.push_back(pair);
    if (std::find(tokens.begin(), tokens.end(), pair.first + pair.second) == tokens.end())
      tokens.push_back(pair.first + pair.second);
  }
  if (options.shuffled) std::shuffle(merges.begin(), merges.end(), rng.engine());
  return small_vocabulary("random " + std::to_string(index) + (options.shuffled ? " (shuffled ranks)" : ""), alphabet,
                          merges);
}

/// A random word over @p v's alphabet: pieces of its tokens glued together (so that merges apply)
/// or, with options.runs, runs of one letter.
inline std::string random_word(Rng& rng, const BpeVocabulary& v, const RandomBpeOptions& options) {
  const auto& tokens = v.tokenizer.vocabulary().tokens;
  std::string word;
  const int64_t parts = rng.integer(0, 8);
  for (int64_t p = 0; p < parts; ++p) {
    const std::string bytes = tokenizer::symbols_to_bytes(tokens[size_t(rng.integer(0, int64_t(tokens.size()) - 1))]);
    if (options.runs) {
      word += std::string(size_t(rng.integer(1, 12)), bytes[0]);
    } else {
      word += bytes;
    }
  }
  return word;
}

/// @p words random words on each of @p vocabularies random vocabularies, drawn before any is merged.
inline std::vector<BpeQuestion> random_words(Rng& rng, int vocabularies, int words, const RandomBpeOptions& options) {
  std::vector<BpeQuestion> q;
  for (int i = 0; i < vocabularies; ++i) {
    const auto v = random_vocabulary(rng, options, i + 1);
    for (int w = 0; w < words; ++w)
      q.push_back({bpe_case(v, random_word(rng, *v, options)),
                   "random word " + std::to_string(w + 1) + " on " + v->name, std::nullopt});
  }
  return q;
}

/// Words for SmolLM2: the pieces of texts of every kind, pre-tokenized as the model's tokenizer
/// does (tokenizer::pretokenize_smollm), and random words: letters after a space, long runs of
/// one character (repeated pairs), digits, punctuation runs, accented, CJK and emoji characters.
inline std::vector<BpeQuestion> smollm2_words(Rng& rng, const std::shared_ptr<const BpeVocabulary>& v,
                                              int random_count) {
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times.",
      "def square(x: int) -> int:\n    return x ** 2  # no overflow\n\nfor (int i = 0; i < n; ++i) { sum += a[i]; }\n",
      "I'm sure you're right; we've seen they'll do what he'd said. Wait... what?!? (yes) [no] --flag ++i",
      "12345678901234567890 and 3.14159 and 2,000,000.00 — aaaaaaaaaaaa !!!!!!!! ======== ________ ........",
      "a b  c   d    e     f      g\tindented\n\t\ttwice\n\n\n\r\nwindows\r\n        ",
      "Café naïve résumé Ärger Øresund ĳ — 中文分词测试 日本語のテキスト 한국어 — emoji "
      "😀👍🏽 "
      "flag "
      "🇫🇷",
      "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
  };
  std::vector<BpeQuestion> q;
  for (const std::string& text : texts)
    for (const std::string_view piece : tokenizer::pretokenize_smollm(text))
      q.push_back({bpe_case(v, std::string(piece)), "a piece of \"" + text.substr(0, 32) + "…\"", std::nullopt});
  const std::vector<std::string> others = {"é", "ü", "ß", "中", "文", "😀", "١", "½", "—", "€", "ñ", "Ω"};
  const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
  for (int i = 0; i < random_count; ++i) {
    std::string word;
    switch (rng.integer(0, 5)) {
      case 0:
      case 1: {  // a space and letters, sometimes capitalised
        word = rng.integer(0, 2) ? " " : "";
        const int64_t n = rng.integer(1, 14);
        for (int64_t j = 0; j < n; ++j)
          word += letters[size_t(std::min<int64_t>(rng.integer(0, 25), rng.integer(0, 25)))];
        if (rng.integer(0, 3) == 0) word[word[0] == ' ' ? 1 : 0] = char(std::toupper(word[word[0] == ' ' ? 1 : 0]));
        break;
      }
      case 2:  // a run of one character: spaces, letters, punctuation, newlines
        word = std::string(size_t(rng.integer(2, 60)), " a=.-_!\n"[size_t(rng.integer(0, 7))]);
        break;
      case 3: {  // punctuation and symbols
        const std::string marks = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
        const int64_t n = rng.integer(1, 8);
        word = rng.integer(0, 1) ? " " : "";
        for (int64_t j = 0; j < n; ++j) word += marks[size_t(rng.integer(0, int64_t(marks.size()) - 1))];
        break;
      }
      default: {  // letters mixed with multi-byte characters
        word = rng.integer(0, 1) ? " " : "";
        const int64_t n = rng.integer(1, 6);
        for (int64_t j = 0; j < n; ++j)
          word += rng.integer(0, 1) ? others[size_t(rng.integer(0, int64_t(others.size()) - 1))]
                                    : std::string(1, letters[size_t(rng.integer(0, 25))]);
        break;
      }
    }
    q.push_back({bpe_case(v, word), "random word " + std::to_string(i + 1) + " of " + std::to_string(random_count),
                 std::nullopt});
  }
  return q;
}

// ==== 8.4 gemv_q8_0 (sim) ====================================================================

/// A GEMV launcher under test: y[o] = row o of @p w [out_features, 32·x.size()] (Q8_0) · @p x
/// (Q8_0), run with @p rows_per_block warps a block.
using GemvFn = std::function<void(std::span<const BlockQ8_0> w, int64_t out_features, std::span<const BlockQ8_0> x,
                                  Tensor<float>& y, int rows_per_block)>;

/// What the data of a GEMV case looks like.
enum class GemvData {
  quantized,  ///< the lab's quantizer on random floats, rows of different magnitudes
  extreme,    ///< codes ±127 (and −128) everywhere, random signs; some blocks with a zero scale
};

/// One GEMV shape.
struct GemvCase {
  int64_t out_features = 1;
  int64_t in_features = 32;
  int rows_per_block = 4;
  GemvData data = GemvData::quantized;

  /// "out33_in544_rows4".
  std::string name() const {
    return "out" + std::to_string(out_features) + "_in" + std::to_string(in_features) + "_rows" +
           std::to_string(rows_per_block) + (data == GemvData::extreme ? "_extreme" : "");
  }
};

/// Σ_j q_w[j]·q_x[j] of one pair of Q8_0 blocks, in integers.
inline int32_t block_sum(const BlockQ8_0& w, const BlockQ8_0& x) {
  int32_t sum = 0;
  for (int j = 0; j < 32; ++j) sum += int32_t(w.qs[j]) * int32_t(x.qs[j]);
  return sum;
}

/// The random data of @p c: W [out, blocks] and x [blocks].
struct GemvInputs {
  std::vector<BlockQ8_0> w, x;
};

inline GemvInputs gemv_data(Rng& rng, const GemvCase& c) {
  const int64_t blocks = c.in_features / 32;
  GemvInputs d;
  d.w.resize(size_t(c.out_features * blocks));
  d.x.resize(size_t(blocks));
  if (c.data == GemvData::quantized) {
    std::vector<float> row(size_t(c.in_features));
    for (int64_t o = 0; o < c.out_features; ++o) {
      const float scale = std::exp2(rng.uniform(-6.0f, 3.0f));
      for (float& v : row) v = scale * rng.normal();
      quant::quantize_row_q8_0(row, std::span(d.w).subspan(size_t(o * blocks), size_t(blocks)));
    }
    for (int64_t b = 0; b < blocks; ++b) {
      const float scale = std::exp2(rng.uniform(-4.0f, 4.0f));
      for (int j = 0; j < 32; ++j) row[size_t(b * 32 + j)] = scale * rng.normal(0.2f);
    }
    quant::quantize_row_q8_0(row, d.x);
    return d;
  }
  const auto extreme_block = [&](BlockQ8_0& b) {
    b.d = rng.integer(0, 7) == 0 ? uint16_t(0) : random_half(rng, -10.0f, 6.0f, rng.integer(0, 3) == 0);
    const int mode = int(rng.integer(0, 2));
    for (int8_t& q : b.qs)
      q = mode == 0 ? int8_t(127) : mode == 1 ? int8_t(rng.integer(0, 1) ? 127 : -127) : int8_t(rng.integer(-128, 127));
  };
  for (BlockQ8_0& b : d.w) extreme_block(b);
  for (BlockQ8_0& b : d.x) extreme_block(b);
  return d;
}

/// The float64 value of each output and its bound (see the file's comment in ch08.h): the block
/// terms d_w·d_x·Σ are exact in double; any fp32 evaluation that rounds each block's product at
/// most twice and sums the terms in any order, or sums the 32·B exact products in fp32 in any
/// order, lies within γ_{32B+2}·Σ_b |d_w·d_x|·Σ_j |q_w[j]·q_x[j]|.
struct GemvOracle {
  std::vector<double> value, bound;
  std::vector<double> without_last_block, without_tail_blocks, lane0_only;         // within `bound` when matched
  std::vector<double> without_dx, without_dx_bound, without_dw, without_dw_bound;  // their own magnitudes
};

inline GemvOracle gemv_oracle(const GemvInputs& d, const GemvCase& c) {
  const int64_t blocks = c.in_features / 32;
  GemvOracle o;
  const double k = 32.0 * double(blocks) + 2.0;
  for (int64_t r = 0; r < c.out_features; ++r) {
    double sum = 0, magnitude = 0, last = 0, tail = 0, lane0 = 0, no_dx = 0, no_dw = 0, no_dx_mag = 0, no_dw_mag = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      const BlockQ8_0& w = d.w[size_t(r * blocks + b)];
      const BlockQ8_0& x = d.x[size_t(b)];
      const double dw = f16(w.d), dx = f16(x.d), s = double(block_sum(w, x));
      double abs_products = 0;
      for (int j = 0; j < 32; ++j) abs_products += std::abs(double(w.qs[j]) * double(x.qs[j]));
      const double term = dw * dx * s;
      sum += term;
      magnitude += std::abs(dw * dx) * abs_products;
      if (b == blocks - 1) last = term;
      if (b >= blocks / 32 * 32) tail += term;
      if (b % 32 == 0) lane0 += term;
      no_dx += dw * s;
      no_dw += dx * s;
      no_dx_mag += std::abs(dw) * abs_products;
      no_dw_mag += std::abs(dx) * abs_products;
    }
    o.value.push_back(sum);
    o.bound.push_back(gamma_fp32(k) * magnitude + 1e-40);
    o.without_last_block.push_back(sum - last);
    o.without_tail_blocks.push_back(blocks >= 32 ? sum - tail : std::nan(""));
    o.lane0_only.push_back(blocks > 1 ? lane0 : std::nan(""));
    o.without_dx.push_back(no_dx);
    o.without_dx_bound.push_back(gamma_fp32(k) * no_dx_mag + 1e-40);
    o.without_dw.push_back(no_dw);
    o.without_dw_bound.push_back(gamma_fp32(k) * no_dw_mag + 1e-40);
  }
  return o;
}

/// Runs @p gemv on @p c's fresh data under every schedule (y poisoned each time) and compares
/// each output with the float64 oracle within its bound; a wrong output is named with the
/// mistake it matches when one does.
inline ::testing::AssertionResult gemv_matches_oracle(const GemvFn& gemv, const GemvCase& c) {
  SeededRng rng;
  const GemvInputs d = gemv_data(rng, c);
  const std::string name = "gemv_q8_0 " + c.name();
  Tensor<float> y;
  const ::testing::AssertionResult ran = host_same_under_schedules_seeded(
      name, rng.seed(), [&](Tensor<float>& out) { gemv(d.w, c.out_features, d.x, out, c.rows_per_block); },
      {c.out_features}, {"row"}, y);
  if (!ran) return ran;
  const GemvOracle o = gemv_oracle(d, c);
  const int64_t blocks = c.in_features / 32;
  for (int64_t r = 0; r < c.out_features; ++r) {
    const double got = double(y[r]);
    if (std::abs(got - o.value[size_t(r)]) <= o.bound[size_t(r)]) continue;
    ::testing::AssertionResult failure = ::testing::AssertionFailure();
    failure << name << ": y[" << r << "] = " << show(got) << ", expected " << show(o.value[size_t(r)])
            << " within the fp32 rounding bound ±" << show(o.bound[size_t(r)]) << " (row " << r << " of "
            << c.out_features << ", " << blocks << (blocks == 1 ? " block" : " blocks") << " a row, "
            << c.rows_per_block << (c.rows_per_block == 1 ? " row" : " rows") << " a grid block)";
    const auto near = [&](const std::vector<double>& alt, const std::vector<double>* alt_bound = nullptr) {
      const double bound = alt_bound ? (*alt_bound)[size_t(r)] : o.bound[size_t(r)];
      return std::isfinite(alt[size_t(r)]) && std::abs(got - alt[size_t(r)]) <= bound;
    };
    const int64_t grid = (c.out_features + c.rows_per_block - 1) / c.rows_per_block;
    if (std::isnan(got)) {
      failure << "\n  NaN: y is poisoned before every launch, so no warp wrote row " << r
              << ". The launcher's grid is ⌈" << c.out_features << " / " << c.rows_per_block << "⌉ = " << grid
              << (grid == 1 ? " block" : " blocks") << "; warp w of block i owns row i·" << c.rows_per_block << " + w";
      if (r >= c.out_features / c.rows_per_block * c.rows_per_block)
        failure << " — row " << r << " is in the last, partial grid block";
      return failure << "\n  " << seed_note(rng.seed());
    }
    // Every mistake that gives this value (on extreme data two may coincide: each is named).
    bool recognised = false;
    const auto mistake = [&](bool matches, const std::string& what) {
      if (!matches) return;
      failure << "\n  that is " << what;
      recognised = true;
    };
    mistake(near(o.without_last_block), "the row's sum without its last block (block " + std::to_string(blocks - 1) +
                                            "): the lanes take b = lane, lane + 32, … while b < blocks");
    mistake(near(o.without_tail_blocks), "the row's sum without the blocks past the last multiple of 32 (" +
                                             std::to_string(blocks / 32 * 32) + " … " + std::to_string(blocks - 1) +
                                             "): a row may hold more blocks than a warp has lanes, and not a multiple");
    mistake(near(o.lane0_only),
            "lane 0's blocks alone: add the lanes' partial sums with warp_sum before lane 0 writes");
    mistake(near(o.without_dx, &o.without_dx_bound),
            "the sum without the activations' scales d_x: each block is d_w·d_x·Σ q_w·q_x");
    mistake(near(o.without_dw, &o.without_dw_bound),
            "the sum without the weights' scales d_w: each block is d_w·d_x·Σ q_w·q_x");
    if (!recognised)
      for (int64_t other = 0; other < c.out_features; ++other)
        if (other != r && std::abs(got - o.value[size_t(other)]) <= o.bound[size_t(other)]) {
          failure << "\n  that is row " << other << "'s value: check the row each warp computes and where it writes";
          break;
        }
    return failure << "\n  " << seed_note(rng.seed());
  }
  return ::testing::AssertionSuccess();
}

/// Odd shapes: out_features 1, 7, 33, 130 against in_features 32 (one block), 96, 544 (17) and
/// 1056 (33 blocks: more than a warp's lanes), four rows a grid block.
inline std::vector<GemvCase> odd_gemv_cases() {
  std::vector<GemvCase> cases;
  for (const int64_t out : {1, 7, 33, 130})
    for (const int64_t in : {32, 96, 544, 1056}) cases.push_back({out, in, 4, GemvData::quantized});
  return cases;
}

}  // namespace inferlab::testing::ch08
