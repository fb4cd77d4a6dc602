// Chapter 11 exercises, graded: the student's Q8_0 repacking (11.1) byte for byte against the lab's
// quant::PackedMatrix (kernels/quant/packed_matrix.h), and the student's micro-kernel (11.2) bit for
// bit against chapter 08's scalar quant_matmul_cpu() on the lab's own repacked groups — on the
// hand-worked case of ch11.h and fresh random matrices (the seed is printed on failure;
// INFERLAB_SEED replays it). The checks live in student_check.h, shared with the wrong fixtures of
// tests/wrong/wrong_ch11_exercises.cpp that they must reject. Each TEST is one grading unit.
//
// Student code never runs in this process: an adapter below runs the student's function on a whole
// batch of inputs in ONE sandboxed child process (tests/support/isolated_batch.h), which sends back
// what it answered as bytes; only then does this process compute the expected answers and compare.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "11-compute-roof/ch11.h"
#include "tests/11-compute-roof/student_check.h"
#include "tests/support/isolated_batch.h"
#include "tests/support/seeded.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch11Repack", "repack_q8_0"},
    {"Ch11MicroKernel", "micro_kernel_q8_0"},
});

namespace ch11 = testing::ch11;
using testing::isolated_batch;

// Exercise 11.1 on a batch: each answer is the packed bytes.
ch11::Answers<std::vector<uint8_t>> student_repacks(std::span<const ch11::RepackCase> cases) {
  const testing::BatchAnswers flat = isolated_batch(cases.size(), [&](size_t k) {
    const std::vector<uint8_t> packed = student::repack_q8_0(cases[k].rows, cases[k].out, cases[k].in);
    return std::string(packed.begin(), packed.end());
  });
  ch11::Answers<std::vector<uint8_t>> got{{}, flat.error};
  for (const std::string& bytes : flat.answers) got.answers.emplace_back(bytes.begin(), bytes.end());
  return got;
}

// Exercise 11.1's refusals on a batch: each answer is "returned" or "refused: <message>".
ch11::Answers<std::string> student_refusals(std::span<const ch11::BadRepackCall> calls) {
  const testing::BatchAnswers flat = isolated_batch(calls.size(), [&](size_t k) {
    const ch11::BadRepackCall& c = calls[k];
    const std::vector<uint8_t> bytes(size_t(c.bytes), 0);
    try {
      student::repack_q8_0(bytes, c.out, c.in);
    } catch (const std::invalid_argument& e) {
      return std::string(ch11::kRefused) + e.what();
    }
    return std::string(ch11::kReturned);
  });
  return {flat.answers, flat.error};
}

// Exercise 11.2 on a batch: each answer is the 16 · num_rows outputs, poisoned with NaN first.
ch11::Answers<std::vector<float>> student_kernels(std::span<const ch11::KernelCase> cases) {
  const testing::BatchAnswers flat = isolated_batch(cases.size(), [&](size_t k) {
    const ch11::KernelCase& c = cases[k];
    const int64_t blocks = c.in / 32;
    std::vector<const student::ActivationBlock*> rows;
    for (int r = 0; r < c.num_rows; ++r) rows.push_back(c.act.data() + r * blocks);
    std::vector<float> y(size_t(16 * c.num_rows), std::numeric_limits<float>::quiet_NaN());
    student::micro_kernel_q8_0(c.packed.data(), blocks, rows.data(), c.num_rows, y.data());
    return std::string(reinterpret_cast<const char*>(y.data()), y.size() * sizeof(float));
  });
  ch11::Answers<std::vector<float>> got{{}, flat.error};
  for (const std::string& bytes : flat.answers) {
    std::vector<float> y(bytes.size() / sizeof(float));
    if (!y.empty()) std::memcpy(y.data(), bytes.data(), y.size() * sizeof(float));
    got.answers.push_back(std::move(y));
  }
  return got;
}

TEST(Ch11Repack, TheWorkedExample) {
  EXPECT_TRUE(ch11::repacks_match(student_repacks, {ch11::worked_repack_case()}));
}

TEST(Ch11Repack, RandomMatricesEqualTheLabsPackedMatrixByteForByte) {
  testing::SeededRng rng;
  EXPECT_TRUE(ch11::repacks_match(student_repacks, ch11::random_repack_cases(rng)));
}

TEST(Ch11Repack, BadShapesAreRefusedNamingTheArgument) {
  EXPECT_TRUE(ch11::refusals_match(student_refusals, ch11::bad_repack_calls()));
}

TEST(Ch11MicroKernel, EqualsTheScalarReferenceBitForBit) {
  testing::SeededRng rng;
  EXPECT_TRUE(ch11::kernels_match(student_kernels, ch11::random_kernel_cases(rng)));
}

}  // namespace
}  // namespace inferlab
