// Chapter 02 exercises, graded on the sim backend: the student's kernels (run by the SIMT
// emulator) against float64 oracles, on odd shapes and on shapes drawn fresh each run, with
// outputs poisoned and every launch run under several thread schedules
// (tests/support/prefill_steps_check.h). Each TEST is one grading unit.
//
// Every call into the student's library runs in a sandboxed child process
// (tests/support/isolation.h): this process draws the inputs, computes the oracle and decides;
// the student's launcher only ever sends back its output, the number of kernels it launched and
// the name of the last one and its device-memory peak. These are kernel exercises: a launcher
// that launches no kernel fails, and so does one whose device memory is not what ch02.h says (at
// least the inputs, read on the device; at most the inputs and the output).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "02-gpu-prefill/ch02.h"
#include "simt/simt.h"
#include "tests/support/expect_all.h"
#include "tests/support/isolation.h"
#include "tests/support/prefill_steps_check.h"
#include "tests/support/seeded.h"
#include "tests/support/student_code.h"
#include "tests/support/warmup_check.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch02WarmupScaleAdd", "scale_add_2d"},
    {"Ch02WarmupVectorSum", "vector_sum"},
    {"Ch02WarmupTranspose", "transpose_tiled"},
    {"Ch02Scores", "attention_scores"},
    {"Ch02Softmax", "softmax_rows"},
    {"Ch02Gemm", "gemm_tiled"},
});

using testing::AttentionCase;
using testing::GemmCase;
using testing::MatrixCase;
using testing::SoftmaxCase;
using testing::SumCase;

using testing::expect_all;

// ---- the sandbox: the student's launchers as the shared checks' ScoresFn / SoftmaxFn / GemmFn ----

// What a sandboxed call sends back besides its output.
struct CallNote {
  uint8_t shape_kept = 0;       // the output tensor still had its shape after the call
  char kernel[160] = {};        // the last kernel the call launched ...
  char launched_at[160] = {};   // ... and where (for the race reports)
};

void copy_text(char (&to)[160], const std::string& from) {
  const size_t n = std::min(from.size(), sizeof to - 1);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

// The kernel the latest sandboxed call launched last: the shared checks' race report names the
// last kernel launched in *this* process, which never launches one, so noted() adds it.
std::string g_last_kernel;

// Runs @p call — one student launcher writing into the tensor it is given — in the sandbox on a
// copy of @p out (poisoned by the caller), and brings the result back into @p out. Throws, so
// that the shared check reports it with the shape and the seed, when the call launched no kernel,
// held device memory outside ch02.h's budget — at least the inputs (@p input_elements floats,
// read on the device), at most the inputs, the output and @p scratch_elements floats the given
// launcher holds besides (W2's partial sums) — or changed the output's shape.
void run_student_kernel(const char* exercise, int64_t input_elements, Tensor<float>& out,
                        const std::function<void(Tensor<float>&)>& call, int64_t scratch_elements = 0) {
  CallNote note;
  g_last_kernel.clear();
  const testing::IsolatedRun run = testing::run_isolated(
      [&] {
        Tensor<float> got = out;  // the student's own tensor: reassigning it cannot move the bytes sent back
        call(got);
        note.shape_kept = got.shape() == out.shape();
        if (note.shape_kept) std::copy_n(got.data(), got.size(), out.data());
        const simt::LaunchRecord last = simt::last_launch();
        copy_text(note.kernel, last.kernel);
        copy_text(note.launched_at, last.launched_at);
      },
      {testing::output_bytes(out.span()), testing::output_bytes(note)});
  if (run.launches == 0) {
    throw std::runtime_error(std::string("your function returned without launching a kernel — exercise ") + exercise +
                             " asks for a kernel: the answer must be computed by your __global__ function, "
                             "launched with simt::launch, not by host code");
  }
  g_last_kernel = note.kernel;
  if (g_last_kernel.find(note.launched_at) == std::string::npos)
    g_last_kernel =
        "'" + g_last_kernel + "', launched at " + note.launched_at + " (where it was launched, not the faulty line)";
  const uint64_t floor = sizeof(float) * uint64_t(input_elements);
  const uint64_t budget = floor + sizeof(float) * uint64_t(out.size() + scratch_elements);
  if (run.device_bytes_peak > budget) {
    throw std::runtime_error(std::string("exercise ") + exercise + " held " + std::to_string(run.device_bytes_peak) +
                             " bytes of device memory at its peak, over ch02.h's budget of " + std::to_string(budget) +
                             " bytes (the given launcher's buffers: the inputs, the output" +
                             (scratch_elements > 0 ? std::string(" and the partial sums") : std::string()) + ") by " +
                             std::to_string(run.device_bytes_peak - budget) + " bytes");
  }
  if (run.device_bytes_peak < floor) {
    throw std::runtime_error(std::string("exercise ") + exercise + " held only " +
                             std::to_string(run.device_bytes_peak) +
                             " bytes of device memory at its peak, less than its inputs (" + std::to_string(floor) +
                             " bytes, ch02.h's budget): your kernel must read them on the device — a launch that "
                             "leaves the work to host code does not count");
  }
  if (!note.shape_kept)
    throw std::runtime_error(std::string("exercise ") + exercise + ": the call changed the output's shape (expected " +
                             to_string(out.shape()) + ")");
}

void student_scale_add(const Tensor<float>& x, const Tensor<float>& row_scale, const Tensor<float>& col_bias,
                       Tensor<float>& out) {
  run_student_kernel("W1", x.size() + row_scale.size() + col_bias.size(), out,
                     [&](Tensor<float>& o) { sim::student::scale_add_2d(x, row_scale, col_bias, o); });
}

// W2's launcher holds one partial sum per block of its first pass: at most 32.
constexpr int64_t kVectorSumPartials = 32;

void student_vector_sum(const Tensor<float>& x, Tensor<float>& sum, int threads_per_block) {
  run_student_kernel(
      "W2", x.size(), sum, [&](Tensor<float>& o) { sim::student::vector_sum(x, o, threads_per_block); },
      kVectorSumPartials);
}

void student_transpose(const Tensor<float>& in, Tensor<float>& out) {
  run_student_kernel("W3", in.size(), out, [&](Tensor<float>& o) { sim::student::transpose_tiled(in, o); });
}

void student_scores(const Tensor<float>& q, const Tensor<float>& k, bool causal, Tensor<float>& scores) {
  run_student_kernel("2.1", q.size() + k.size(), scores,
                     [&](Tensor<float>& out) { sim::student::attention_scores(q, k, causal, out); });
}

void student_softmax(const Tensor<float>& scores, Tensor<float>& probs, int threads_per_block) {
  run_student_kernel("2.2", scores.size(), probs,
                     [&](Tensor<float>& out) { sim::student::softmax_rows(scores, out, threads_per_block); });
}

void student_gemm(const Tensor<float>& a, const Tensor<float>& b, Tensor<float>& c) {
  run_student_kernel("2.3", a.size() + b.size(), c, [&](Tensor<float>& out) { sim::student::gemm_tiled(a, b, out); });
}

// @p result, with the kernel the student's code launched last when it failed as a race (the
// shared report names the last kernel launched in this process, which launches none).
::testing::AssertionResult noted(::testing::AssertionResult result) {
  if (result || g_last_kernel.empty() || std::string(result.message()).find("thread order") == std::string::npos)
    return result;
  return ::testing::AssertionFailure() << result.message() << "\n  (the last kernel your code launched, in its "
                                       << "sandboxed process: " << g_last_kernel << ")";
}

// ---- W1 scale_add_2d: a 2-D grid-stride loop ----

void expect_scale_add(const std::vector<MatrixCase>& cases) {
  expect_all(cases, [](const MatrixCase& c) { return noted(testing::scale_add_matches_oracle(student_scale_add, c)); });
}

TEST(Ch02WarmupScaleAdd, OddShapes) {
  // rows ∈ {1, 7, 8, 33, 70} × cols ∈ {1, 31, 32, 33, 129, 300}, then two shapes drawn fresh.
  std::vector<MatrixCase> cases = testing::odd_matrix_cases();
  testing::SeededRng rng;
  for (int i = 0; i < 2; ++i) cases.push_back({rng.integer(1, 90), rng.integer(1, 400)});
  expect_scale_add(cases);
}

TEST(Ch02WarmupScaleAdd, LargerThanTheGrid) {
  // The grid is capped at 4 × 4 blocks of 32 × 8 threads (128 columns, 32 rows): here every
  // thread strides over several rows and columns.
  expect_scale_add({{100, 513}, {257, 129}, {33, 1000}});
}

// ---- W2 vector_sum: a shared-memory tree and a warp-shuffle finish ----

void expect_vector_sum(const std::vector<SumCase>& cases) {
  expect_all(cases, [](const SumCase& c) { return noted(testing::vector_sum_matches_oracle(student_vector_sum, c)); });
}

TEST(Ch02WarmupVectorSum, Lengths) {
  // Shorter than a warp, around a warp and a block, and longer than 32 blocks (grid-strided);
  // then a length drawn fresh.
  std::vector<SumCase> cases;
  for (int64_t n : {1, 2, 31, 33, 255, 256, 257, 1000, 8193, 100003}) cases.push_back({n, 256});
  testing::SeededRng rng;
  cases.push_back({rng.integer(1, 50000), 256});
  expect_vector_sum(cases);
}

TEST(Ch02WarmupVectorSum, BlockSizes) {
  // One warp (no tree step), two warps (one step), … 32 warps (five steps); then one drawn fresh.
  std::vector<SumCase> cases;
  for (int threads : {32, 64, 128, 512, 1024})
    for (int64_t n : {97, 5000}) cases.push_back({n, threads});
  testing::SeededRng rng;
  cases.push_back({rng.integer(1, 20000), 32 << rng.integer(0, 5)});
  expect_vector_sum(cases);
}

// ---- W3 transpose_tiled: a padded shared-memory tile ----

void expect_transpose(const std::vector<MatrixCase>& cases) {
  expect_all(cases, [](const MatrixCase& c) { return noted(testing::transpose_matches_oracle(student_transpose, c)); });
}

TEST(Ch02WarmupTranspose, OddShapes) {
  // The same 30 shapes as W1 (edges of partial 32 × 32 tiles), then two drawn fresh.
  std::vector<MatrixCase> cases = testing::odd_matrix_cases();
  testing::SeededRng rng;
  for (int i = 0; i < 2; ++i) cases.push_back({rng.integer(1, 100), rng.integer(1, 100)});
  expect_transpose(cases);
}

TEST(Ch02WarmupTranspose, SquareAndTall) {
  expect_transpose({{32, 32}, {64, 96}, {97, 3}, {3, 97}, {128, 1}});
}

// ---- 2.1 attention_scores: one thread per score ----

void expect_scores(const std::vector<AttentionCase>& cases) {
  expect_all(cases, [](const AttentionCase& c) { return noted(testing::scores_match_oracle(student_scores, c)); });
}

// A shape drawn fresh: any seq_len and head_dim, a GQA ratio of 1, 2, 4 or 8, causal or not.
AttentionCase fresh_attention_case(testing::SeededRng& rng, int64_t max_seq_len) {
  const int64_t ratio = int64_t(1) << rng.integer(0, 3);
  const int64_t kv_heads = rng.integer(1, 2);
  return {kv_heads * ratio, kv_heads, rng.integer(1, max_seq_len), rng.integer(1, 130), rng.integer(0, 1) == 1};
}

TEST(Ch02Scores, OddShapes) {
  // seq_len ∈ {1, 2, 31, 33, 127} × head_dim ∈ {64, 80, 96, 128}, GQA ratios 1/2/4/8, causal and
  // not, and Q scaled up to logits in the hundreds; then two shapes drawn fresh.
  std::vector<AttentionCase> cases = testing::odd_attention_cases(127);
  testing::SeededRng rng;
  for (int i = 0; i < 2; ++i) cases.push_back(fresh_attention_case(rng, 70));
  expect_scores(cases);
}

TEST(Ch02Scores, CausalMask) {
  std::vector<AttentionCase> cases = {{2, 2, 17, 64, true}, {1, 1, 33, 80, true}, {4, 2, 127, 64, true}};
  testing::SeededRng rng;
  AttentionCase fresh = fresh_attention_case(rng, 60);
  fresh.causal = true;
  cases.push_back(fresh);
  expect_scores(cases);
}

TEST(Ch02Scores, GroupedQueryAttention) {
  // Query head h reads KV head h / (num_heads / num_kv_heads).
  expect_scores({{8, 8, 17, 96, false},
                 {8, 4, 17, 96, true},
                 {8, 2, 17, 96, false},
                 {8, 1, 17, 96, true},
                 {6, 3, 31, 128, false}});
}

TEST(Ch02Scores, LongerSequence) {
  expect_scores({{2, 1, 127, 128, false}, {2, 2, 65, 80, true}});
}

TEST(Ch02Scores, SeqLenOne) {
  expect_scores({{1, 1, 1, 96, true}, {2, 1, 1, 64, false}});
}

// ---- 2.2 softmax_rows: warp shuffles and a block reduction ----

void expect_softmax(const std::vector<SoftmaxCase>& cases) {
  expect_all(cases, [](const SoftmaxCase& c) { return noted(testing::softmax_matches_oracle(student_softmax, c)); });
}

TEST(Ch02Softmax, RowLengths) {
  // Shorter than a warp, around a warp, around the block, and several times the block; then a
  // row length and a block size drawn fresh.
  std::vector<SoftmaxCase> cases;
  for (int64_t row_len : {1, 2, 17, 31, 32, 33, 64, 127, 128, 129, 257, 1000}) cases.push_back({5, row_len});
  testing::SeededRng rng;
  cases.push_back({rng.integer(1, 9), rng.integer(1, 700), 32 * int(rng.integer(1, 8))});
  expect_softmax(cases);
}

TEST(Ch02Softmax, BlockSizes) {
  // One warp (no cross-warp step needed), a few warps, an odd number of warps, 32 warps.
  std::vector<SoftmaxCase> cases;
  for (int threads : {32, 64, 96, 256, 1024})
    for (int64_t row_len : {33, 300}) cases.push_back({3, row_len, threads});
  cases.push_back({2, 2049, 1024});
  expect_softmax(cases);
}

TEST(Ch02Softmax, MaskedEntriesBecomeZero) {
  // Row r keeps its first (r mod row_len) + 1 entries: the rows of causal attention.
  expect_softmax({{17, 17, 128, true}, {66, 33, 128, true}, {127, 127, 64, true}, {40, 300, 256, true}});
}

TEST(Ch02Softmax, ExtremeLogits) {
  // Logits in the hundreds: exp() without subtracting the max overflows to Inf.
  expect_softmax({{4, 33, 128, false, 300.0f}, {4, 257, 128, false, 300.0f}, {33, 33, 32, true, 300.0f}});
}

// ---- 2.3 gemm_tiled: shared-memory tiles, any M, N, K ----

void expect_gemm(const std::vector<GemmCase>& cases) {
  expect_all(cases, [](const GemmCase& c) { return noted(testing::gemm_matches_oracle(student_gemm, c)); });
}

TEST(Ch02Gemm, OddShapes) {
  // M, N, K ∈ {1, 17, 31, 33, 64, 127}, then two shapes drawn fresh.
  std::vector<GemmCase> cases = testing::odd_gemm_cases();
  testing::SeededRng rng;
  for (int i = 0; i < 2; ++i) cases.push_back({rng.integer(1, 90), rng.integer(1, 90), rng.integer(1, 90)});
  expect_gemm(cases);
}

TEST(Ch02Gemm, TileMultiples) {
  expect_gemm({{16, 16, 16}, {32, 64, 48}, {64, 16, 32}});
}

TEST(Ch02Gemm, VectorsAndScalars) {
  // A row times a matrix, a matrix times a column, outer products (K = 1), 1×1×1.
  expect_gemm({{1, 33, 17}, {31, 1, 33}, {17, 31, 1}, {1, 1, 1}, {1, 1, 127}});
}

TEST(Ch02Gemm, LongK) {
  expect_gemm({{17, 33, 257}, {33, 17, 513}});
}

}  // namespace
}  // namespace inferlab
