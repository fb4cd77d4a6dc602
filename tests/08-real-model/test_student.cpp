// Chapter 08 exercises, graded: the student's Q4_1 decoder (8.1), Q4_1 × Q8_1 dot product (8.2)
// and BPE merge loop (8.3), each compared with the lab's own implementation (kernels/quant,
// runtime/tokenizer) and a version written in student_check.h, on hand-worked cases that each
// teach one rule and, beside them, fresh random inputs (the seed is printed on failure;
// INFERLAB_SEED replays it); and the quantized GEMV kernel (8.4) on the sim backend, under
// several thread orders with its output poisoned, against the float64 oracle within the derived
// fp32 bound. The checks live in student_check.h, shared with the wrong fixtures of
// tests/wrong/wrong_ch08_exercises.cpp and wrong_ch08_gemv.cpp that they must reject. Each TEST
// is one grading unit.
//
// Student code never runs in this process. For 8.1–8.3 a check draws all its inputs here and
// hands them to an adapter below, which converts them to the contract's types (ch08.h declares
// its own block structs, byte for byte ggml's) and runs the student's function on every one of
// them in ONE sandboxed child process (tests/support/isolation.h); the child sends back the
// answers as bytes, and only then does this process compute the expected answers and compare.
// For 8.4 every launch runs in a child of its own, which must launch the kernel and hold exactly
// the given launcher's device buffers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "08-real-model/ch08.h"
#include "common/check.h"
#include "common/tensor.h"
#include "runtime/gguf/gguf.h"
#include "tests/08-real-model/student_check.h"
#include "tests/support/expect_all.h"
#include "tests/support/isolated_batch.h"
#include "tests/support/isolation.h"
#include "tests/support/seeded.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch08Dequantize", "dequantize_q4_1"},
    {"Ch08Dot", "dot_q4_1_q8_1"},
    {"Ch08Bpe", "bpe_merge"},
    {"Ch08Gemv", "gemv_q8_0"},
});

namespace ch08 = testing::ch08;
using testing::isolated_result;

static_assert(sizeof(student::BlockQ4_1) == sizeof(quant::BlockQ4_1) &&
                  sizeof(student::BlockQ8_1) == sizeof(quant::BlockQ8_1) &&
                  sizeof(student::BlockQ8_0) == sizeof(quant::BlockQ8_0),
              "ch08.h's blocks are ggml's, byte for byte");

// ---- running a batch in the sandbox ----

// Runs `answer(k)` for every input k in one sandboxed child and brings the answers back
// (tests/support/isolated_batch.h: the input a call throws on, or crashes on, is found and run alone).
template <class AnswerOne>
ch08::Answers<std::string> isolated_answers(size_t count, const AnswerOne& answer) {
  testing::BatchAnswers got = testing::isolated_batch(count, answer);
  return {std::move(got.answers), std::move(got.error)};
}

// The bytes of @p values, and back.
template <class T>
std::string to_bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}
template <class T>
std::vector<T> from_bytes(const std::string& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

// The lab's blocks as the contract's (the same bytes).
template <class To, class From>
std::vector<To> as_contract(std::span<const From> blocks) {
  static_assert(sizeof(To) == sizeof(From));
  std::vector<To> out(blocks.size());
  if (!blocks.empty()) std::memcpy(out.data(), blocks.data(), blocks.size() * sizeof(From));
  return out;
}

// ---- adapters: the lab's types ↔ the contract's, and the sandbox ----

// Exercise 8.1 on a batch: each answer is the row's values, written into an output poisoned with NaN.
ch08::Answers<std::vector<float>> student_dequantize(std::span<const std::vector<quant::BlockQ4_1>> rows) {
  std::vector<std::vector<student::BlockQ4_1>> inputs;  // converted here, before the fork
  inputs.reserve(rows.size());
  for (const auto& row : rows) inputs.push_back(as_contract<student::BlockQ4_1>(std::span(row)));
  const auto flat = isolated_answers(inputs.size(), [&](size_t k) {
    std::vector<float> out(inputs[k].size() * 32, std::numeric_limits<float>::quiet_NaN());
    student::dequantize_q4_1(inputs[k], out);
    return to_bytes(out);
  });
  ch08::Answers<std::vector<float>> values{{}, flat.error};
  for (const std::string& one : flat.answers) values.answers.push_back(from_bytes<float>(one));
  return values;
}

// Exercise 8.2 on a batch: each answer is one float.
ch08::Answers<float> student_dots(std::span<const ch08::DotCase> cases) {
  struct Input {
    std::vector<student::BlockQ4_1> w;
    std::vector<student::BlockQ8_1> x;
  };
  std::vector<Input> inputs;
  inputs.reserve(cases.size());
  for (const ch08::DotCase& c : cases)
    inputs.push_back(
        {as_contract<student::BlockQ4_1>(std::span(c.w)), as_contract<student::BlockQ8_1>(std::span(c.x))});
  const auto flat = isolated_answers(inputs.size(), [&](size_t k) {
    return to_bytes(std::vector<float>{student::dot_q4_1_q8_1(inputs[k].w, inputs[k].x)});
  });
  ch08::Answers<float> dots{{}, flat.error};
  for (const std::string& one : flat.answers) {
    const std::vector<float> v = from_bytes<float>(one);
    dots.answers.push_back(v.size() == 1 ? v[0] : std::numeric_limits<float>::quiet_NaN());
  }
  return dots;
}

// Exercise 8.3 on a batch: each answer is its tokens, [8-byte length, bytes] each.
ch08::Answers<std::vector<std::string>> student_merges(std::span<const ch08::BpeCase> cases) {
  const auto flat = isolated_answers(cases.size(), [&](size_t k) {
    std::string bytes;
    for (const std::string& token : student::bpe_merge(cases[k].symbols, cases[k].vocabulary->ranks)) {
      const uint64_t length = token.size();
      bytes.append(reinterpret_cast<const char*>(&length), sizeof length);
      bytes += token;
    }
    return bytes;
  });
  ch08::Answers<std::vector<std::string>> merges{{}, flat.error};
  for (const std::string& one : flat.answers) {
    std::vector<std::string>& tokens = merges.answers.emplace_back();
    for (size_t at = 0; at + sizeof(uint64_t) <= one.size();) {
      uint64_t length = 0;
      std::memcpy(&length, one.data() + at, sizeof length);
      at += sizeof length;
      if (length > one.size() - at) break;
      tokens.push_back(one.substr(at, size_t(length)));
      at += size_t(length);
    }
  }
  return merges;
}

// Exercise 8.4's device-memory budget (ch08.h): the given launcher's buffers, W, x and y.
uint64_t gemv_budget(size_t w_blocks, size_t x_blocks, int64_t out_features) {
  return uint64_t(w_blocks + x_blocks) * sizeof(student::BlockQ8_0) + uint64_t(out_features) * sizeof(float);
}

// sim::student::gemv_q8_0 as the check's GemvFn, run in the sandbox. Throws (with the reason) when
// the call launched no kernel or its device memory is not the launcher's buffers; the check
// reports that as the shape's failure.
void student_gemv(std::span<const quant::BlockQ8_0> w, int64_t out_features, std::span<const quant::BlockQ8_0> x,
                  Tensor<float>& y, int rows_per_block) {
  const std::vector<student::BlockQ8_0> w_s = as_contract<student::BlockQ8_0>(w),
                                        x_s = as_contract<student::BlockQ8_0>(x);
  const testing::IsolatedRun run = testing::run_isolated(
      [&] { sim::student::gemv_q8_0(w_s, out_features, x_s, y, rows_per_block); }, {testing::output_bytes(y.span())});
  const std::string shape = "out_features " + std::to_string(out_features) + ", in_features " +
                            std::to_string(32 * x.size()) + ", rows_per_block " + std::to_string(rows_per_block);
  if (run.launches == 0)
    throw std::runtime_error(
        "no kernel launched: your gemv_q8_0 returned without launching a kernel — exercise 8.4 "
        "asks for one (gemv_q8_0_kernel, launched by the given launcher) [" +
        shape + "]");
  const uint64_t budget = gemv_budget(w.size(), x.size(), out_features);
  if (run.device_bytes_peak != budget)
    throw std::runtime_error(
        "exercise 8.4's device memory is the given launcher's buffers — W and x in Q8_0 (34 bytes "
        "a block) and y in fp32: " +
        std::to_string(budget) + " bytes for " + shape + "; the call's device-memory peak was " +
        std::to_string(run.device_bytes_peak) + " bytes (" +
        (run.device_bytes_peak > budget ? "more: a dequantized copy of W, or scratch, is not needed"
                                        : "less: the kernel must read W and x on the device") +
        ")");
}

// ---- 8.1 dequantize_q4_1 ----

TEST(Ch08Dequantize, WorkedExampleInNibbleOrder) {
  // ch08.h's worked example (d 0.25, m −1, byte j = j | (15 − j) << 4) and two blocks built by
  // hand around it; then fresh random rows beside them.
  testing::SeededRng rng;
  EXPECT_TRUE(ch08::rows_decode(student_dequantize, ch08::worked_example_rows()));
  EXPECT_TRUE(ch08::rows_decode(student_dequantize, ch08::random_rows(rng, 20, {.min_blocks = 1, .max_blocks = 3})));
}

TEST(Ch08Dequantize, RandomRowsMatchTheLibrary) {
  // Rows of 1 … 48 blocks: random bytes (every nibble value, random fp16 d and m) and the lab's
  // quantizer on random floats, every value bit-identical to quant::dequantize_row_q4_1.
  testing::SeededRng rng;
  EXPECT_TRUE(ch08::rows_decode(student_dequantize, ch08::random_rows(rng, 400)));
}

TEST(Ch08Dequantize, LargeMinimaAndTinyScales) {
  // Values far from 0 (m in the hundreds, d down to 2^−14): q·d + m must round once.
  testing::SeededRng rng;
  EXPECT_TRUE(ch08::rows_decode(student_dequantize, ch08::random_rows(rng, 200, {.large_minimum = true})));
}

// ---- 8.2 dot_q4_1_q8_1 ----

TEST(Ch08Dot, WorkedExample) {
  // ch08.h's worked example (14) and hand cases around it; then fresh short rows.
  testing::SeededRng rng;
  EXPECT_TRUE(ch08::dots_match(student_dots, ch08::worked_example_dots()));
  EXPECT_TRUE(ch08::dots_match(student_dots, ch08::random_dots(rng, 50, {.min_blocks = 1, .max_blocks = 2})));
}

TEST(Ch08Dot, TheMinimumTermCounts) {
  // Weights far from 0 (m dominates q·d): without m_w·s_x the value is far off.
  testing::SeededRng rng;
  EXPECT_TRUE(ch08::dots_match(student_dots, ch08::random_dots(rng, 300, {.large_minimum = true})));
}

TEST(Ch08Dot, BitIdenticalToTheLabsMatmul) {
  // Random and quantized weight rows of 1 … 64 blocks against activations the lab quantized:
  // every value equal, bit for bit, to quant_matmul_cpu's (scalar kernel) on the same row.
  testing::SeededRng rng;
  EXPECT_TRUE(ch08::dots_match(student_dots, ch08::random_dots(rng, 400, {.min_blocks = 1, .max_blocks = 64})));
}

TEST(Ch08Dot, RandomBlocksWithinTheFloat64Bound) {
  // Random bytes on both sides (codes −128 … 127, any s): within γ_{2B} of the float64 oracle and
  // equal to the contract's chain.
  testing::SeededRng rng;
  EXPECT_TRUE(ch08::dots_match(student_dots, ch08::random_dots(rng, 400, {.min_blocks = 1, .max_blocks = 64}, true)));
}

TEST(Ch08Dot, RealRowsOfSmolLM2) {
  // Rows of SmolLM2's own Q4_1 matrices (attention, FFN up and down, three layers) against fresh
  // activations: bit-identical to quant_matmul_cpu on the same rows.
  const std::string path = INFERLAB_SMOLLM2_GGUF;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "the model " << path << " is not installed: run ./inferlab setup (it installs chapter 08's model)";
    return;
  }
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  testing::SeededRng rng;
  std::vector<ch08::DotQuestion> questions;
  for (const char* name :
       {"blk.0.attn_q.weight", "blk.14.ffn_up.weight", "blk.29.ffn_down.weight", "blk.7.attn_v.weight"}) {
    const gguf::TensorInfo& info = file.tensor(name);
    ASSERT_EQ(info.type, quant::GgmlType::q4_1) << name << " (lab bug: SmolLM2's matrices are Q4_1)";
    const int64_t in = info.ne[0], rows = info.ne[1], row_bytes = quant::row_bytes(info.type, in);
    const std::span<const uint8_t> bytes = file.data(info);
    for (int i = 0; i < 40; ++i) {
      const int64_t r = rng.integer(0, rows - 1);
      ch08::DotQuestion& q = questions.emplace_back();
      q.input.w.resize(size_t(in / 32));
      std::memcpy(q.input.w.data(), bytes.data() + r * row_bytes, size_t(row_bytes));
      ch08::random_activations(rng, q.input, q.input.w.size());
      q.lesson = std::string(name) + " row " + std::to_string(r);
    }
  }
  EXPECT_TRUE(ch08::dots_match(student_dots, questions));
}

// ---- 8.3 bpe_merge ----

TEST(Ch08Bpe, WorkedExample) {
  // ch08.h's worked example (" the" → "Ġthe") and its words; then random words on random
  // vocabularies.
  testing::SeededRng rng;
  EXPECT_TRUE(ch08::merges_match(student_merges, ch08::worked_example_words()));
  EXPECT_TRUE(ch08::merges_match(student_merges, ch08::random_words(rng, 20, 20, {})));
}

TEST(Ch08Bpe, TiesMergeLeftmostFirst) {
  // "aaa", "aaaa", "aaaaa", space runs: the same pair at several places merges leftmost first.
  // Hand cases, then random words of long runs of one letter.
  testing::SeededRng rng;
  EXPECT_TRUE(ch08::merges_match(student_merges, ch08::tie_words()));
  EXPECT_TRUE(ch08::merges_match(student_merges, ch08::random_words(rng, 30, 30, {.runs = true})));
}

TEST(Ch08Bpe, LowestRankFirstUntilNoneApplies) {
  // The rank decides, not the position; a merged symbol merges again; pairs are looked up as
  // pairs. Hand cases, then random vocabularies whose merge lists are shuffled (ranks unrelated to
  // the order the tokens were built in).
  testing::SeededRng rng;
  EXPECT_TRUE(ch08::merges_match(student_merges, ch08::rank_words()));
  EXPECT_TRUE(ch08::merges_match(student_merges, ch08::random_words(rng, 60, 30, {.shuffled = true})));
}

TEST(Ch08Bpe, RandomVocabulariesMatchTheTokenizer) {
  // 100 random vocabularies (merges in learned and shuffled order) × 40 random words: tokens equal
  // to BpeTokenizer::encode_piece's.
  testing::SeededRng rng;
  EXPECT_TRUE(ch08::merges_match(student_merges, ch08::random_words(rng, 50, 40, {})));
  EXPECT_TRUE(ch08::merges_match(student_merges, ch08::random_words(rng, 50, 40, {.shuffled = true})));
}

TEST(Ch08Bpe, SmolLM2Vocabulary) {
  // SmolLM2's 49,152 tokens and 48,900 merges from the model file: the pieces of texts of every
  // kind and 2000 random words, tokens equal to the model's tokenizer (encode_piece).
  std::string problem;
  const auto smollm2 = ch08::smollm2_vocabulary(INFERLAB_SMOLLM2_GGUF, problem);
  if (!smollm2) {
    ADD_FAILURE() << problem;
    return;
  }
  testing::SeededRng rng;
  EXPECT_TRUE(ch08::merges_match(student_merges, ch08::smollm2_words(rng, smollm2, 2000)));
}

// ---- 8.4 gemv_q8_0 (sim) ----

void expect_gemv(const std::vector<ch08::GemvCase>& cases) {
  testing::expect_all(cases, [](const ch08::GemvCase& c) { return ch08::gemv_matches_oracle(student_gemv, c); });
}

TEST(Ch08Gemv, OddShapes) {
  // out_features 1, 7, 33, 130 × in_features 32, 96, 544, 1056 (1 to 33 blocks a row), 4 rows a
  // grid block.
  expect_gemv(ch08::odd_gemv_cases());
}

TEST(Ch08Gemv, PartialLastGridBlock) {
  // rows_per_block 1, 3, 5, 8, 32 with out_features not a multiple of it: the last grid block's
  // extra warps must leave, the rows before them must be written.
  expect_gemv({{1, 64, 1}, {10, 64, 3}, {11, 160, 5}, {17, 96, 8}, {33, 64, 32}, {31, 128, 32}, {65, 32, 8}});
}

TEST(Ch08Gemv, MoreBlocksThanLanes) {
  // 31, 32, 33, 65 and 66 blocks a row: lanes take several blocks, and not all the same number.
  expect_gemv({{9, 32 * 31, 4}, {9, 32 * 32, 4}, {9, 32 * 33, 4}, {5, 32 * 65, 2}, {3, 32 * 66, 3}});
}

TEST(Ch08Gemv, ExtremeCodesAndZeroScales) {
  // Codes ±127 and −128 everywhere (block sums up to 32·128²), scales from 2^−10 to 2^6 with random
  // signs, blocks with a zero scale.
  const ch08::GemvData extreme = ch08::GemvData::extreme;
  expect_gemv({{7, 96, 4, extreme}, {33, 1056, 4, extreme}, {12, 64, 5, extreme}, {1, 2112, 1, extreme}});
}

TEST(Ch08Gemv, SmolLM2Shapes) {
  // The decode step's matrices of SmolLM2: wk / wv (576 → 192), wo (576 → 576), ffn_down
  // (1536 → 576: 48 blocks a row).
  expect_gemv({{192, 576, 4}, {576, 576, 8}, {576, 1536, 4}});
}

}  // namespace
}  // namespace inferlab
