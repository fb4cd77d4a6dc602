// Chapter 05 exercises, graded: the student's online-softmax update (CPU) and kernels (run by
// the SIMT emulator) against the float64 oracles of chapters 02 and 03, on fresh random inputs
// and odd shapes, with outputs poisoned and the kernels run under several thread schedules.
// Every kernel call must launch a kernel and keep its device memory within the budget of
// ch05.h (no L×L score buffer for 5.2, no scratch for 5.3). The three exercises are graded
// separately. Each TEST is one grading unit.
//
// Every call into the student's library runs in a sandboxed child process
// (tests/support/isolation.h): this process draws the inputs (the scores, the blocks, the
// partial states), computes the oracle and decides; the student's code only ever returns
// outputs — for 5.1, the final state of every row, or the state after every block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "05-fused-attention/ch05.h"
#include "common/compare.h"
#include "kernels/attention/attention.h"
#include "kernels/decode/decode.h"
#include "kernels/kv/kv_cache.h"
#include "tests/support/attention_check.h"
#include "tests/support/expect_all.h"
#include "tests/support/isolation.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch05Update", "online_softmax_update"},
    {"Ch05Flash", "flash_attention"},
    {"Ch05Reduce", "split_kv_reduce"},
});

using testing::AttentionCase;
using testing::expect_all;
using testing::isolated_result;
using testing::IsolatedRun;
using testing::output_bytes;
using testing::run_isolated;

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// ---- 5.1 online_softmax_update: one query row, its keys in blocks ----

// How the keys of a row are cut into blocks and fed to the update.
enum class BlockOrder { forward, reversed, shuffled };

// One 5.1 shape: the attention problem whose rows are computed block by block, the largest
// block (0: the whole row in one block), whether blocks may be empty, and their order.
struct UpdateCase {
  AttentionCase shape;
  int64_t max_block = 0;
  bool empty_blocks = false;
  BlockOrder order = BlockOrder::forward;

  std::string name() const {
    static const char* const orders[] = {"forward", "reversed", "shuffled"};
    std::ostringstream out;
    out << "update " << shape.name() << "_blocks" << (max_block == 0 ? std::string("all") : std::to_string(max_block))
        << (empty_blocks ? "_with_empty" : "") << "_" << orders[int(order)];
    return out.str();
  }
};

// [start, end) of each block of a row of @p seq_len keys, cut and ordered as @p c says.
std::vector<std::pair<int64_t, int64_t>> blocks_of(const UpdateCase& c, int64_t seq_len, Rng& rng) {
  std::vector<std::pair<int64_t, int64_t>> blocks;
  if (c.max_block == 0) {
    blocks.push_back({0, seq_len});
  } else {
    for (int64_t start = 0; start < seq_len;) {
      const int64_t size = rng.integer(c.empty_blocks ? 0 : 1, c.max_block);
      const int64_t end = std::min(seq_len, start + size);
      blocks.push_back({start, end});
      start = end;
    }
    if (c.empty_blocks) blocks.push_back({seq_len, seq_len});  // an empty block after the last key too
  }
  if (c.order == BlockOrder::reversed) std::reverse(blocks.begin(), blocks.end());
  if (c.order == BlockOrder::shuffled) std::shuffle(blocks.begin(), blocks.end(), rng.engine());
  return blocks;
}

// student::online_softmax_update(@p state, @p scores, @p values), for code running in the
// sandbox: an exception other than NotImplemented comes back naming @p what (which block).
void update_naming(student::OnlineSoftmaxState& state, std::span<const float> scores, std::span<const float> values,
                   const std::string& what) {
  try {
    student::online_softmax_update(state, scores, values);
  } catch (const NotImplemented&) {
    throw;
  } catch (const std::exception& error) {
    throw std::runtime_error(what + ": " + error.what());
  }
}

// Attention computed row by row with the student's update: for query i of head h, the scaled
// scores (−∞ above the diagonal when causal) are fed block by block with their V rows, and
// out = acc / l. The scores and the blocks (drawn afresh for every row) are made here; every
// row's updates then run in one sandboxed call, which sends back each row's final (m, l, acc).
AttentionFn attention_by_updates(const UpdateCase& c, Rng& rng) {
  return [&c, &rng](const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                    Tensor<float>& out) {
    const AttentionShape s = attention_shape(q, k, v, causal);
    const int64_t H = s.num_heads, L = s.seq_len, d = s.head_dim;
    const double scale = 1.0 / std::sqrt(double(d));
    std::vector<float> scores(static_cast<size_t>(H * L * L));  // [h][i][j]
    std::vector<std::vector<std::pair<int64_t, int64_t>>> blocks(static_cast<size_t>(H * L));  // of row (h, i)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / s.group_size();
      for (int64_t i = 0; i < L; ++i) {
        for (int64_t j = 0; j < L; ++j) {
          double dot = 0.0;
          for (int64_t x = 0; x < d; ++x) dot += double(q[(h * L + i) * d + x]) * double(k[(g * L + j) * d + x]);
          scores[size_t((h * L + i) * L + j)] = causal && j > i ? kMasked : float(dot * scale);
        }
        blocks[size_t(h * L + i)] = blocks_of(c, L, rng);
      }
    }
    // The final state of every row: m, l, then acc[d].
    std::vector<float> states(static_cast<size_t>(H * L * (d + 2)), std::numeric_limits<float>::quiet_NaN());
    run_isolated([&] {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / s.group_size();
        const std::span<const float> values = v.span().subspan(size_t(g * L * d), size_t(L * d));
        for (int64_t i = 0; i < L; ++i) {
          const std::span<const float> row(scores.data() + (h * L + i) * L, size_t(L));
          student::OnlineSoftmaxState state(d);
          for (const auto& [start, end] : blocks[size_t(h * L + i)]) {
            update_naming(state, row.subspan(size_t(start), size_t(end - start)),
                          values.subspan(size_t(start * d), size_t((end - start) * d)),
                          "head " + std::to_string(h) + ", row " + std::to_string(i) + ", keys [" +
                              std::to_string(start) + ", " + std::to_string(end) + ")");
          }
          if (state.acc.size() != size_t(d))
            throw std::runtime_error("online_softmax_update changed the size of state.acc from " + std::to_string(d) +
                                     " to " + std::to_string(state.acc.size()));
          float* out_state = states.data() + (h * L + i) * (d + 2);
          out_state[0] = state.max;
          out_state[1] = state.sum;
          std::copy(state.acc.begin(), state.acc.end(), out_state + 2);
        }
      }
    }, {output_bytes(std::span<float>(states))});
    for (int64_t r = 0; r < H * L; ++r) {
      const float* state = states.data() + r * (d + 2);
      for (int64_t x = 0; x < d; ++x) out[r * d + x] = float(double(state[2 + x]) / state[1]);
    }
  };
}

void expect_updates(const std::vector<UpdateCase>& cases) {
  expect_all(cases, [](const UpdateCase& c) {
    testing::SeededRng rng;  // the block sizes and orders
    const ::testing::AssertionResult result =
        testing::attention_matches_oracle(attention_by_updates(c, rng), Precision::fp32, c.shape);
    if (result) return result;
    return ::testing::AssertionFailure() << c.name() << ": " << result.message() << " (blocks drawn with seed "
                                         << rng.seed() << ")";
  });
}

// The 5.1 cases: every shape of @p shapes with every way of cutting and ordering its rows.
std::vector<UpdateCase> update_cases(const std::vector<AttentionCase>& shapes) {
  std::vector<UpdateCase> cases;
  for (const AttentionCase& shape : shapes) {
    cases.push_back({shape, 0, false, BlockOrder::forward});
    cases.push_back({shape, 1, false, BlockOrder::forward});
    cases.push_back({shape, 7, true, BlockOrder::forward});
    cases.push_back({shape, 16, false, BlockOrder::reversed});
    cases.push_back({shape, 5, true, BlockOrder::shuffled});
  }
  return cases;
}

TEST(Ch05Update, OneBlockIsTheSoftmax) {
  // The whole row in one block, starting from the initial state: one ordinary softmax·V.
  expect_updates({{{1, 1, 1, 64, false}}, {{2, 2, 33, 80, false}}, {{2, 1, 31, 96, true}}, {{1, 1, 127, 128, true}}});
}

TEST(Ch05Update, AnySplitOfTheKeys) {
  // Blocks of one key, of random sizes with empty blocks among them, reversed and shuffled:
  // each split and order must give the one-pass softmax·V.
  expect_updates(update_cases({{2, 1, 33, 64, false},
                               {2, 2, 31, 80, true},
                               {1, 1, 127, 96, false},
                               {4, 2, 17, 128, true},
                               {1, 1, 2, 7, true}}));
}

TEST(Ch05Update, MaskedBlocksFirst) {
  // Causal rows with their blocks reversed or shuffled: for row i every block after the
  // diagonal is wholly masked, and it arrives before any finite score.
  std::vector<UpdateCase> cases;
  for (const AttentionCase& shape : {AttentionCase{1, 1, 33, 64, true}, AttentionCase{2, 1, 127, 80, true}}) {
    cases.push_back({shape, 1, false, BlockOrder::reversed});
    cases.push_back({shape, 4, true, BlockOrder::reversed});
    cases.push_back({shape, 9, true, BlockOrder::shuffled});
  }
  expect_updates(cases);
}

TEST(Ch05Update, ExtremeLogits) {
  // Logits in the hundreds: each block that raises the max must rescale l and acc, and exp()
  // of an unshifted score overflows.
  expect_updates(
      update_cases({{1, 1, 33, 64, false, 40.0f}, {2, 1, 31, 80, true, 400.0f}, {1, 1, 127, 128, false, 400.0f}}));
}

TEST(Ch05Update, StateHoldsTheMaxAndTheSum) {
  // After every block, m is exactly the largest score seen so far and l = Σ exp(s_j − m) over
  // them: split-KV decode exports this state, so its meaning is part of the contract. The
  // student's state after every block comes back as a trace, compared here block by block.
  testing::SeededRng rng;
  for (const int64_t head_dim : {int64_t(1), int64_t(64), int64_t(96), rng.integer(2, 128)}) {
    const int64_t L = rng.integer(30, 90);
    const Tensor<float> scores = rng.normal_tensor({L}, 0.0f, 30.0f);
    const Tensor<float> values = rng.normal_tensor({L, head_dim});
    double max_abs_logit = 0.0;
    for (float s : scores.span()) max_abs_logit = std::max(max_abs_logit, std::abs(double(s)));
    std::vector<std::pair<int64_t, int64_t>> blocks;  // drawn here, before the student's code runs
    for (int64_t start = 0; start < L;) {
      const int64_t end = std::min(L, start + rng.integer(1, 9));
      blocks.push_back({start, end});
      start = end;
    }
    const std::vector<float> trace = isolated_result([&] {
      std::vector<float> t;  // (m, l) after each block
      student::OnlineSoftmaxState state(head_dim);
      for (const auto& [start, end] : blocks) {
        update_naming(state, scores.span().subspan(size_t(start), size_t(end - start)),
                      values.span().subspan(size_t(start * head_dim), size_t((end - start) * head_dim)),
                      "the update of keys [" + std::to_string(start) + ", " + std::to_string(end) + ")");
        t.push_back(state.max);
        t.push_back(state.sum);
      }
      return t;
    });
    ASSERT_EQ(trace.size(), 2 * blocks.size()) << "the trace of " << blocks.size() << " updates";
    double seen_max = -std::numeric_limits<double>::infinity();
    for (size_t b = 0; b < blocks.size(); ++b) {
      const auto [start, end] = blocks[b];
      for (int64_t j = start; j < end; ++j) seen_max = std::max(seen_max, double(scores[j]));
      const float got_max = trace[2 * b], got_sum = trace[2 * b + 1];
      ASSERT_EQ(got_max, float(seen_max)) << "head_dim " << head_dim << ", L " << L << ": state.max after block " << b
                                          << " (keys [0, " << end << ")) must be the largest score seen, "
                                          << float(seen_max);
      double sum = 0.0;
      for (int64_t j = 0; j < end; ++j) sum += std::exp(double(scores[j]) - seen_max);
      const Comparison c = compare_to_oracle(std::span<const float>(&got_sum, 1), std::span<const double>(&sum, 1),
                                             attention_tolerance(Precision::fp32, max_abs_logit));
      ASSERT_TRUE(c.ok) << "head_dim " << head_dim << ", L " << L << ": state.sum after block " << b << " (keys [0, "
                        << end << ")) must be Σ exp(s_j − m) = " << sum << ": " << c.report();
    }
  }
}

TEST(Ch05Update, MaskedOrEmptyBlockBeforeAnyScoreChangesNothing) {
  // From the initial state, empty blocks and wholly masked blocks leave m = −∞, l = 0 and
  // acc = 0 (exp(−∞ − (−∞)) is NaN); a first block with one finite score then starts the row:
  // m = that score, l = 1, acc = its value row. Worked by hand (head_dim 33, one empty and one
  // masked block of 3, the finite score in the middle of 3), then fresh random variants.
  testing::SeededRng rng;
  for (int trial = 0; trial < 4; ++trial) {
    const bool by_hand = trial == 0;
    const int64_t head_dim = by_hand ? 33 : rng.integer(1, 128);
    const int64_t before = by_hand ? 2 : rng.integer(1, 4);          // empty or masked blocks first
    const int64_t n = by_hand ? 3 : rng.integer(1, 9);               // keys of the first finite block
    const int64_t at = by_hand ? 1 : rng.integer(0, n - 1);          // its one finite score
    std::vector<std::vector<float>> masked_blocks;                   // drawn here
    for (int64_t b = 0; b < before; ++b)
      masked_blocks.push_back(std::vector<float>(size_t(by_hand ? (b == 0 ? 0 : 3) : rng.integer(0, 5)), kMasked));
    const int64_t rows = std::max<int64_t>(n, 5);
    const Tensor<float> values = rng.normal_tensor({rows, head_dim});
    std::vector<float> first(size_t(n), kMasked);
    first[size_t(at)] = rng.normal(0.0f, 3.0f);
    std::ostringstream what;
    what << "head_dim " << head_dim << ", blocks of";
    for (const auto& m : masked_blocks) what << " " << m.size() << (m.empty() ? " (empty)" : " masked");
    what << ", then " << n << " keys whose only finite score s[" << at << "] = " << first[size_t(at)];

    // The trace: (m, l, acc[head_dim]) after the masked blocks, then after the first finite block.
    const std::vector<float> trace = isolated_result([&] {
      std::vector<float> t;
      student::OnlineSoftmaxState state(head_dim);
      const auto record = [&] {
        t.push_back(state.max);
        t.push_back(state.sum);
        t.insert(t.end(), state.acc.begin(), state.acc.end());
      };
      for (size_t b = 0; b < masked_blocks.size(); ++b)
        update_naming(state, masked_blocks[b], values.span().subspan(0, masked_blocks[b].size() * size_t(head_dim)),
                      "the update with masked block " + std::to_string(b));
      record();
      update_naming(state, first, values.span().subspan(0, size_t(n * head_dim)), "the first finite block");
      record();
      return t;
    });
    const size_t per_state = size_t(head_dim) + 2;
    ASSERT_EQ(trace.size(), 2 * per_state) << what.str() << ": state.acc must keep head_dim elements";
    EXPECT_EQ(trace[0], kMasked) << what.str() << ": m after the masked blocks";
    EXPECT_EQ(trace[1], 0.0f) << what.str() << ": l after the masked blocks";
    for (int64_t c = 0; c < head_dim; ++c)
      ASSERT_EQ(trace[2 + size_t(c)], 0.0f) << what.str() << ": acc[" << c << "] changed by a masked or empty block";
    const float* after = trace.data() + per_state;
    EXPECT_EQ(after[0], first[size_t(at)]) << what.str() << ": m after the first finite block";
    EXPECT_EQ(after[1], 1.0f) << what.str() << ": l = exp(s − m) = exp(0) for the block's only visible key";
    for (int64_t c = 0; c < head_dim; ++c)
      ASSERT_EQ(after[2 + c], values[at * head_dim + c])
          << what.str() << ": acc[" << c << "] must be V[" << at << "][" << c << "]";
    if (HasFailure()) return;  // one failing trial says enough
  }
}

// ---- 5.2 flash_attention: the fused kernel on the sim backend ----

// Throws (with the reason) when an isolated call of exercise @p exercise launched no kernel, or
// when its device-memory peak is not exactly what its launcher's buffers (@p buffers, described
// by @p named) take: more is scratch the budget of ch05.h forbids, less means the kernel does
// not read its inputs from device memory.
void check_kernel_call(const IsolatedRun& run, const std::string& exercise, const std::string& function,
                       const std::string& shape, uint64_t buffers, const std::string& named,
                       const std::string& budget, const std::string& example) {
  if (run.launches == 0)
    throw std::runtime_error("no kernel launched: your " + function + " returned without launching a kernel — exercise " +
                             exercise + " asks for a kernel [" + shape + "]");
  if (run.device_bytes_peak > buffers)
    throw std::runtime_error("exercise " + exercise + "'s budget (ch05.h): " + budget + " — device memory for " +
                             named + " only, " + std::to_string(buffers) + " bytes for " + shape +
                             "; the call's device-memory peak was " + std::to_string(run.device_bytes_peak) +
                             " bytes" + example);
  if (run.device_bytes_peak < buffers)
    throw std::runtime_error("exercise " + exercise + ": the kernel reads its inputs from device memory and writes its "
                             "output there (" + named + ": " + std::to_string(buffers) + " bytes for " + shape +
                             "), but the call held only " + std::to_string(run.device_bytes_peak) +
                             " bytes of device memory at its peak: keep the given launcher's buffers");
}

// sim::student::flash_attention in the sandbox, as an AttentionFn for the shared checks; throws
// (and the check reports it for the shape) when it launched no kernel or held more device memory
// than q, k, v and out.
void isolated_flash(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                    Tensor<float>& out) {
  const IsolatedRun run =
      run_isolated([&] { sim::student::flash_attention(q, k, v, causal, out); }, {output_bytes(out.span())});
  const uint64_t L = uint64_t(q.dim(1)), H = uint64_t(q.dim(0));
  std::ostringstream shape;
  shape << "q " << to_string(q.shape()) << ", k " << to_string(k.shape()) << (causal ? ", causal" : "");
  check_kernel_call(run, "5.2", "flash_attention", shape.str(),
                    uint64_t(q.size() + k.size() + v.size() + out.size()) * sizeof(float), "q, k, v and out",
                    "no global scratch at all (the scores live in registers)",
                    " (the L×L scores of every head alone would take " + std::to_string(H * L * L * sizeof(float)) +
                        " bytes)");
}

void expect_flash(const std::vector<AttentionCase>& cases) {
  expect_all(cases, [](const AttentionCase& c) {
    return testing::attention_matches_oracle(isolated_flash, Precision::fp32, c);
  });
}

TEST(Ch05Flash, OddShapes) {
  // seq_len ∈ {1, 2, 31, 33, 127, 257} × head_dim ∈ {64, 80, 96, 128}, GQA ratios 1/2/4/8,
  // causal and not, and Q scaled up to logits in the hundreds.
  expect_flash(testing::odd_attention_cases(257));
}

TEST(Ch05Flash, TileEdges) {
  // seq_len just below, at and just above the 32-key and 64-query tiles: the last tile is
  // partial, and causal block skipping must stop exactly at the block's last row.
  std::vector<AttentionCase> cases;
  for (const int64_t seq_len : {31, 32, 63, 64, 65, 96, 97, 128, 129})
    for (const bool causal : {false, true}) cases.push_back({2, 1, seq_len, 64, causal});
  expect_flash(cases);
}

TEST(Ch05Flash, GroupedQueryAttention) {
  // Query head h reads KV head h / (num_heads / num_kv_heads).
  expect_flash(
      {{8, 8, 45, 64, true}, {8, 4, 45, 64, false}, {8, 2, 45, 64, true}, {8, 1, 45, 64, false}, {6, 3, 70, 80, true}});
}

TEST(Ch05Flash, SmallAndOddHeadDims) {
  // head_dim below a warp, not a multiple of anything, and the largest the tiles hold.
  std::vector<AttentionCase> cases;
  for (const int64_t head_dim : {1, 7, 33, 100, 128}) cases.push_back({2, 2, 70, head_dim, head_dim % 2 == 1});
  expect_flash(cases);
}

TEST(Ch05Flash, ExtremeLogits) {
  // Logits in the hundreds across several key tiles: each tile that raises a row's max must
  // rescale its l and acc.
  expect_flash({{2, 1, 127, 64, false, 40.0f},
                {2, 2, 100, 80, true, 400.0f},
                {1, 1, 257, 128, false, 400.0f},
                {4, 2, 65, 96, true, 200.0f}});
}

TEST(Ch05Flash, SameOutputUnderEverySchedule) {
  // Forward, reverse and shuffled thread orders must give the same bits: a missing
  // __syncthreads() around the shared tiles makes the result depend on the order.
  expect_all(
      std::vector<AttentionCase>{{2, 1, 97, 64, true}, {2, 2, 70, 80, false}, {1, 1, 33, 128, true}},
      [](const AttentionCase& c) { return testing::attention_same_under_schedules(isolated_flash, c); });
}

// ---- 5.3 split_kv_reduce: the partial states of the KV slices merged ----

// One 5.3 shape: a ragged batch cut into num_splits slices of ⌈max length / num_splits⌉
// tokens (a short sequence has empty trailing slices), optionally handed over in a shuffled
// slice order (so that empty slices may come first).
struct ReduceCase {
  std::vector<int64_t> lengths{1};
  int64_t num_heads = 1;
  int64_t num_kv_heads = 1;
  int64_t head_dim = 64;
  int64_t num_splits = 1;
  float logit_scale = 1.0f;
  bool shuffled = false;

  std::string name() const {
    std::ostringstream out;
    out << "reduce b" << lengths.size() << "_L";
    for (size_t b = 0; b < lengths.size(); ++b) out << (b > 0 ? "-" : "") << lengths[b];
    out << "_h" << num_heads << "_kv" << num_kv_heads << "_d" << head_dim << "_splits" << num_splits
        << (shuffled ? "_shuffled" : "");
    if (logit_scale != 1.0f) out << "_logits_x" << int(logit_scale);
    return out.str();
  }
};

// The inputs of the reduce: every slice's partial state computed in float64 from the cache
// and rounded to float; an empty slice gets m = −∞, l = 0 and a NaN partial output.
struct Partials {
  Tensor<float> out, max, sum;
  double max_abs_logit = 0.0;
};

Partials split_partials(const Tensor<float>& q, const KvCache& cache, const ReduceCase& c, Rng& rng) {
  const int64_t batch = int64_t(c.lengths.size()), H = c.num_heads, S = c.num_splits, d = c.head_dim;
  const int64_t chunk = (*std::max_element(c.lengths.begin(), c.lengths.end()) + S - 1) / S;
  const double scale = 1.0 / std::sqrt(double(d));
  Partials p{Tensor<float>({batch, H, S, d}, std::numeric_limits<float>::quiet_NaN()), Tensor<float>({batch, H, S}),
             Tensor<float>({batch, H, S})};
  std::vector<int64_t> slot(static_cast<size_t>(S));  // slice s is handed over at slot[s]
  std::iota(slot.begin(), slot.end(), 0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      if (c.shuffled) std::shuffle(slot.begin(), slot.end(), rng.engine());
      const int64_t g = h / (H / c.num_kv_heads), row = b * H + h;
      for (int64_t s = 0; s < S; ++s) {
        const int64_t at = row * S + slot[size_t(s)];
        const int64_t start = std::min(s * chunk, c.lengths[size_t(b)]);
        const int64_t end = std::min(start + chunk, c.lengths[size_t(b)]);
        std::vector<double> scores;
        for (int64_t t = start; t < end; ++t) {
          double dot = 0.0;
          for (int64_t x = 0; x < d; ++x) dot += double(q[row * d + x]) * cache.key(b, g, t, x);
          scores.push_back(dot * scale);
          p.max_abs_logit = std::max(p.max_abs_logit, std::abs(dot * scale));
        }
        if (scores.empty()) {  // an empty slice
          p.max[at] = kMasked;
          p.sum[at] = 0.0f;
          continue;
        }
        const double m = *std::max_element(scores.begin(), scores.end());
        double l = 0.0;
        std::vector<double> acc(size_t(d), 0.0);
        for (int64_t t = start; t < end; ++t) {
          const double weight = std::exp(scores[size_t(t - start)] - m);
          l += weight;
          for (int64_t x = 0; x < d; ++x) acc[size_t(x)] += weight * cache.value(b, g, t, x);
        }
        p.max[at] = float(m);
        p.sum[at] = float(l);
        for (int64_t x = 0; x < d; ++x) p.out[at * d + x] = float(acc[size_t(x)] / l);
      }
    }
  }
  return p;
}

// sim::student::split_kv_reduce in the sandbox; throws (and the schedule check reports it) when
// it launched no kernel or held device memory beyond its four buffers.
void isolated_reduce(const Tensor<float>& partial_out, const Tensor<float>& partial_max, const Tensor<float>& partial_sum,
                     Tensor<float>& out) {
  const IsolatedRun run =
      run_isolated([&] { sim::student::split_kv_reduce(partial_out, partial_max, partial_sum, out); },
                   {output_bytes(out.span())});
  check_kernel_call(run, "5.3", "split_kv_reduce", "partial_out " + to_string(partial_out.shape()),
                    uint64_t(partial_out.size() + partial_max.size() + partial_sum.size() + out.size()) * sizeof(float),
                    "partial_out, partial_max, partial_sum and out", "no scratch beyond the launcher's buffers", "");
}

// Runs the student's reduce under every schedule (output poisoned each time, each run in the
// sandbox) and compares with the float64 decode oracle over the whole context.
::testing::AssertionResult reduce_matches_decode(const ReduceCase& c) {
  testing::SeededRng rng;
  const int64_t batch = int64_t(c.lengths.size());
  KvCache cache({batch, c.num_kv_heads, *std::max_element(c.lengths.begin(), c.lengths.end()), c.head_dim},
                KvDtype::fp32);
  for (int64_t b = 0; b < batch; ++b) {
    const Shape tokens{c.num_kv_heads, c.lengths[size_t(b)], c.head_dim};
    cache.prefill(b, rng.normal_tensor(tokens), rng.normal_tensor(tokens));
  }
  const Tensor<float> q = rng.normal_tensor({batch, c.num_heads, c.head_dim}, 0.0f, c.logit_scale);
  const Partials p = split_partials(q, cache, c, rng);

  Tensor<float> out;
  const AxisNames axes{"sequence", "head", "channel"};  // out [batch, num_heads, head_dim]
  const ::testing::AssertionResult same =
      testing::host_same_under_schedules([&](Tensor<float>& o) { isolated_reduce(p.out, p.max, p.sum, o); }, q.shape(),
                                         &out, testing::default_schedules(), testing::element_name(q.shape(), axes));
  if (!same)
    return ::testing::AssertionFailure() << c.name() << ": " << same.message() << "\n  "
                                         << testing::seed_note(rng.seed());
  const Comparison comparison =
      compare_to_oracle(out, decode_reference(q, cache), attention_tolerance(Precision::fp32, p.max_abs_logit), axes);
  if (!comparison.ok) {
    return ::testing::AssertionFailure() << c.name() << ": " << comparison.report() << "\n  "
                                         << testing::seed_note(rng.seed());
  }
  return ::testing::AssertionSuccess();
}

void expect_reduce(const std::vector<ReduceCase>& cases) {
  expect_all(cases, reduce_matches_decode);
}

TEST(Ch05Reduce, OddShapes) {
  // Ragged batches, head_dim 64/80/96/128, GQA 1/2/4/8, slices of a few tokens to a few dozen.
  expect_reduce({{{33, 1, 17}, 4, 2, 64, 3},
                 {{127, 31}, 8, 1, 80, 5},
                 {{2, 257, 64}, 2, 2, 96, 8},
                 {{100}, 4, 1, 128, 7},
                 {{45, 46, 9, 1}, 8, 2, 80, 4}});
}

TEST(Ch05Reduce, OneSlice) {
  // One slice: the output is its partial output.
  expect_reduce({{{31, 5}, 2, 1, 64, 1}, {{1}, 1, 1, 128, 1}});
}

TEST(Ch05Reduce, EmptySlices) {
  // Short sequences beside a long one, more slices than tokens, and the slices shuffled so that
  // empty ones (NaN partial outputs, m = −∞) can come first.
  expect_reduce({{{1, 200}, 2, 1, 64, 16},
                 {{3, 2, 1}, 2, 2, 80, 8},
                 {{5, 129}, 4, 2, 96, 33, 1.0f, true},
                 {{1, 2, 40}, 2, 1, 64, 256, 1.0f, true}});
}

TEST(Ch05Reduce, ManySlicesAndOddHeadDims) {
  // Up to 256 slices (more than the block's threads); head_dim below and above the block.
  expect_reduce({{{1000}, 1, 1, 64, 256}, {{300, 77}, 2, 1, 7, 100, 1.0f, true}, {{65}, 2, 2, 200, 13}});
}

TEST(Ch05Reduce, ExtremeLogits) {
  // Logits in the hundreds: the slices' maxima differ by hundreds, so exp(m_s) overflows and
  // only exp(m_s − M) is usable.
  expect_reduce(
      {{{64, 33}, 4, 2, 64, 4, 40.0f}, {{127}, 2, 1, 128, 9, 400.0f, true}, {{20, 3, 50}, 2, 2, 80, 12, 200.0f}});
}

}  // namespace
}  // namespace inferlab
