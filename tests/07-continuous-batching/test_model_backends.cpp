// Chapter 07: the model's forward on the device backends (built for sim and cuda; the cuda build
// skips without a GPU). Two levels:
//   1. each device layer (kernels/layers/cuda_layers.h) against a float64 oracle on odd shapes,
//      outputs poisoned first; the device KV write and attention on a layer other than 0;
//   2. the resident model runner (model_runner.h) of a small random model against the cpu
//      runner: a mixed batch with fresh blocks and a copy-on-write fork; what crosses to and from
//      the device (sim: counted by the emulator); the whole engine on the backend, with
//      preemption, giving the cpu engine's greedy tokens.
// The device forward is not bit-identical to the cpu's: cuBLAS (on sim: the emulator's CPU GEMM)
// and the kernels sum in other orders than linear_cpu and cpu/prefill_with_cache. Its logits are
// held to the fp32 tolerance against the cpu's, and greedy tokens must agree wherever the cpu's
// top-2 margin is larger than what that tolerance lets the two logits move.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/compare.h"
#include "common/config.h"
#include "common/tolerance.h"
#include "kernels/kv/cuda_append.h"
#include "kernels/kv/kv_cache.h"
#include "kernels/kv/kv_factories.h"
#include "kernels/layers/cuda_layers.h"
#include "kernels/layers/layers.h"
#include "kernels/paged/cuda_prefill_with_cache.h"
#include "kernels/paged/prefill_with_cache.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/make_model_runner.h"
#include "runtime/model/llama_config.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/llama_weights.h"
#include "runtime/model/model_runner.h"
#include "tests/support/decode_check.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"
#include "tests/support/test_backend.h"
#if defined(INFERLAB_TEST_BACKEND_SIM)
#include "simt/simt.h"
#endif

namespace inferlab {
namespace {

using testing::kTestBackend;

// The entry points of the backend under test. A cuda build without nvcc has no cuda:: symbols;
// its tests skip before calling anything (INFERLAB_SKIP_WITHOUT_BACKEND), so it names sim's.
#if defined(INFERLAB_TEST_BACKEND_CUDA) && INFERLAB_WITH_CUDA
namespace device = ::inferlab::cuda;
#else
namespace device = ::inferlab::sim;
#endif

constexpr int64_t kRows[] = {1, 2, 7, 31, 37};
constexpr int64_t kWidths[] = {33, 172};

// ---- 1. the layers ----

TEST(ModelBackends, LinearMatchesTheFloat64Product) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  for (const int64_t rows : kRows)
    for (const int64_t in : kWidths)
      for (const int64_t out : {int64_t{1}, int64_t{33}, int64_t{172}}) {
        const Tensor<float> x = rng.normal_tensor({rows, in}), w = rng.normal_tensor({out, in}, 0.0f, 0.1f);
        Tensor<float> y({rows, out});
        y.poison();
        device::linear_cuda(x, w, y);
        Tensor<double> ref({rows, out});
        double sum_sq = 0.0, abs_sum_sq = 0.0;  // ‖Σ x·w‖² and ‖Σ |x·w|‖²: the product's condition
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t o = 0; o < out; ++o) {
            double s = 0.0, a = 0.0;
            for (int64_t k = 0; k < in; ++k) {
              const double term = double(x[r * in + k]) * double(w[o * in + k]);
              s += term;
              a += std::fabs(term);
            }
            ref[r * out + o] = s;
            sum_sq += s * s;
            abs_sum_sq += a * a;
          }
        const double condition = sum_sq > 0.0 ? std::sqrt(abs_sum_sq / sum_sq) : 1.0;
        const Comparison cmp = compare_to_oracle(y, ref, product_tolerance(Precision::fp32, condition));
        EXPECT_TRUE(cmp.ok) << "linear rows " << rows << ", in " << in << ", out " << out << "\n" << cmp.report();
      }
}

// The float64 RMSNorm of each row of x.
Tensor<double> rms_norm_oracle(const Tensor<float>& x, const std::vector<float>& weight, float eps) {
  const int64_t rows = x.dim(0), dim = x.dim(1);
  Tensor<double> ref({rows, dim});
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < dim; ++c) sum += double(x[r * dim + c]) * double(x[r * dim + c]);
    const double inv = 1.0 / std::sqrt(sum / double(dim) + double(eps));
    for (int64_t c = 0; c < dim; ++c) ref[r * dim + c] = double(weight[size_t(c)]) * double(x[r * dim + c]) * inv;
  }
  return ref;
}

TEST(ModelBackends, RmsNormMatchesTheFloat64Oracle) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  const float eps = 1e-5f;
  for (const int64_t rows : kRows)
    for (const int64_t dim : kWidths) {
      const Tensor<float> x = rng.normal_tensor({rows, dim}, 0.3f, 2.0f);
      std::vector<float> weight(static_cast<size_t>(dim));
      rng.fill_normal(weight, 1.0f, 0.1f);
      Tensor<float> y({rows, dim});
      y.poison();
      device::rms_norm_cuda(x, weight, eps, y);
      const Tensor<double> ref = rms_norm_oracle(x, weight, eps);
      const Comparison cmp = compare_to_oracle(y, ref, tolerance_for(Precision::fp32));
      EXPECT_TRUE(cmp.ok) << "rms_norm rows " << rows << ", dim " << dim << "\n" << cmp.report();
      Tensor<float> in_place = x;  // y may alias x, as for rms_norm_cpu
      device::rms_norm_cuda(in_place, weight, eps, in_place);
      EXPECT_TRUE(compare_to_oracle(in_place, ref, tolerance_for(Precision::fp32)).ok)
          << "rms_norm in place, rows " << rows << ", dim " << dim;
    }
}

// RoPE on the heads that start @p offset floats into rows of @p stride floats (as the model
// rotates q, then k, inside its qkv rows): the rotated elements against float64 rotations by the
// same (cos, sin) table, every other element unchanged bit for bit.
TEST(ModelBackends, RopeRotatesItsHeadsByTheTableAndNothingElse) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  const int64_t max_position = 97;
  for (const int64_t head_dim : {2, 10, 64}) {
    const std::vector<float> table = rope_table(max_position, head_dim, 10000.0);
    const int64_t half = head_dim / 2;
    for (const int64_t rows : kRows)
      for (const int64_t heads : {1, 3}) {
        const int64_t offset = 5, stride = offset + heads * head_dim + 7;
        const Tensor<float> before = rng.normal_tensor({rows, stride});
        std::vector<int64_t> positions(static_cast<size_t>(rows));
        for (int64_t& p : positions) p = rng.integer(0, max_position - 1);
        Tensor<float> got = before;
        device::rope_cuda(got.data() + offset, rows, stride, heads, head_dim, positions, table);

        Tensor<double> ref = convert<double>(before);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t i = 0; i < half; ++i) {
              const int64_t at = r * stride + offset + h * head_dim + 2 * i;
              const double c = table[size_t((positions[size_t(r)] * half + i) * 2)];
              const double s = table[size_t((positions[size_t(r)] * half + i) * 2 + 1)];
              const double a = before[at], b = before[at + 1];
              ref[at] = a * c - b * s;
              ref[at + 1] = a * s + b * c;
            }
        const Comparison cmp = compare_to_oracle(got, ref, tolerance_for(Precision::fp32));
        EXPECT_TRUE(cmp.ok) << "rope rows " << rows << ", heads " << heads << ", head_dim " << head_dim << "\n"
                            << cmp.report();
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < stride; ++c) {
            if (c >= offset && c < offset + heads * head_dim) continue;
            ASSERT_EQ(std::memcmp(&got[r * stride + c], &before[r * stride + c], sizeof(float)), 0)
                << "rope wrote outside its heads: row " << r << ", column " << c;
          }
      }
  }
}

TEST(ModelBackends, SwigluMatchesTheFloat64Oracle) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  for (const int64_t rows : kRows)
    for (const int64_t hidden : kWidths) {
      const Tensor<float> gate_up = rng.normal_tensor({rows, 2 * hidden}, 0.0f, 3.0f);
      Tensor<float> out({rows, hidden});
      out.poison();
      device::swiglu_cuda(gate_up, out);
      Tensor<double> ref({rows, hidden});
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < hidden; ++j) {
          const double a = gate_up[r * 2 * hidden + j], u = gate_up[r * 2 * hidden + hidden + j];
          ref[r * hidden + j] = a / (1.0 + std::exp(-a)) * u;
        }
      const Comparison cmp = compare_to_oracle(out, ref, tolerance_for(Precision::fp32));
      EXPECT_TRUE(cmp.ok) << "swiglu rows " << rows << ", hidden " << hidden << "\n" << cmp.report();
    }
}

// The hand-written layer kernels on the emulator under forward, reverse and shuffled thread
// orders: RMSNorm's block reduction (a missing barrier would change its sum) and the elementwise
// RoPE and SwiGLU give the same bits in every order (sim only: a GPU has one order per run).
TEST(ModelBackends, LayerKernelsGiveTheSameBitsUnderEveryThreadOrder) {
#if !defined(INFERLAB_TEST_BACKEND_SIM)
  GTEST_SKIP() << "thread orders are the emulator's";
#else
  testing::SeededRng rng;
  for (const int64_t rows : {int64_t{1}, int64_t{7}, int64_t{37}})
    for (const int64_t width : kWidths) {
      const Tensor<float> x = rng.normal_tensor({rows, width});
      const Tensor<float> weight_tensor = rng.normal_tensor({width});
      const std::vector<float> weight(weight_tensor.span().begin(), weight_tensor.span().end());
      EXPECT_TRUE(testing::host_same_under_schedules(
          [&](Tensor<float>& out) { sim::rms_norm_cuda(x, weight, 1e-5f, out); }, {rows, width}))
          << "rms_norm, rows " << rows << ", width " << width;
      const Tensor<float> gate_up = rng.normal_tensor({rows, 2 * width});
      EXPECT_TRUE(testing::host_same_under_schedules([&](Tensor<float>& out) { sim::swiglu_cuda(gate_up, out); },
                                                     {rows, width}))
          << "swiglu, rows " << rows << ", width " << width;
    }
  const int64_t heads = 3, head_dim = 8, rows = 9;
  const std::vector<float> table = rope_table(64, head_dim, 10000.0);
  std::vector<int64_t> positions;
  for (int64_t r = 0; r < rows; ++r) positions.push_back(rng.integer(0, 63));
  const Tensor<float> x = rng.normal_tensor({rows, heads * head_dim});
  EXPECT_TRUE(testing::host_same_under_schedules(
      [&](Tensor<float>& out) {
        out = x;
        sim::rope_cuda(out.data(), rows, heads * head_dim, heads, head_dim, positions, table);
      },
      {rows, heads * head_dim}))
      << "rope";
#endif
}

TEST(ModelBackends, BadShapesAreRejected) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  Tensor<float> x({3, 33}, 1.0f), w({5, 32}, 1.0f), y({3, 5});
  EXPECT_THROW(device::linear_cuda(x, w, y), std::invalid_argument);
  Tensor<float> wrong_out({3, 4});
  EXPECT_THROW(device::linear_cuda(x, Tensor<float>({5, 33}, 1.0f), wrong_out), std::invalid_argument);
  const std::vector<float> short_weight(32, 1.0f);
  EXPECT_THROW(device::rms_norm_cuda(x, short_weight, 1e-5f, x), std::invalid_argument);
  Tensor<float> odd({3, 33});
  EXPECT_THROW(device::swiglu_cuda(odd, y), std::invalid_argument);
  const std::vector<float> table = rope_table(4, 8, 10000.0);
  const std::vector<int64_t> past_the_table{0, 4, 1};
  EXPECT_THROW(device::rope_cuda(x.data(), 3, 33, 4, 8, past_the_table, table), std::invalid_argument);
}

// The device slot write and attention on layer 1 of a two-layer paged cache whose layer 0 holds
// other values: the write equals the cpu's byte for byte (both layers), the attention equals the
// float64 oracle over layer 1's values (and the 4-argument entry point reads layer 0).
TEST(ModelBackends, KvWriteAndAttentionUseTheirLayer) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  const int64_t G = 2, H = 4, d = 16, batch = 3, max_len = 12;
  const std::vector<int64_t> lengths{9, 1, 5}, chunk_lengths{4, 1, 0};
  KvCache two = to_paged(KvCache({batch, G, max_len, d, 2}, KvFormat::fp32()), 4, rng.seed());
  two.set_lengths(lengths);
  std::vector<int64_t> slots;  // every cached token of every sequence
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < lengths[size_t(b)]; ++t) slots.push_back(two.slot(b, t));
  const int64_t n = int64_t(slots.size());
  const Tensor<float> k0 = rng.normal_tensor({n, G, d}), v0 = rng.normal_tensor({n, G, d});
  const Tensor<float> k1 = rng.normal_tensor({n, G, d}), v1 = rng.normal_tensor({n, G, d});
  KvCache expected = two;
  expected.store_slots(k0, v0, slots, 0);
  expected.store_slots(k1, v1, slots, 1);
  device::kv_write_slots_cuda(two, k0, v0, slots);  // the default layer: 0
  device::kv_write_slots_cuda(two, k1, v1, slots, 1);
  EXPECT_EQ(testing::kv_cache_differences(two, expected), "") << "the device slot write vs the cpu's store_slots";
  EXPECT_THROW(device::kv_write_slots_cuda(two, k1, v1, slots, 2), std::invalid_argument);

  const Tensor<float> q = rng.normal_tensor({5, H, d});  // Σ chunk_lengths = 5 query tokens
  for (const int64_t layer : {0, 1}) {
    // The oracle's cache: one contiguous layer holding this layer's values.
    KvCache one({batch, G, max_len, d}, KvFormat::fp32());
    one.set_lengths(lengths);
    std::vector<int64_t> one_slots;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < lengths[size_t(b)]; ++t) one_slots.push_back(one.slot(b, t));
    one.store_slots(layer == 0 ? k0 : k1, layer == 0 ? v0 : v1, one_slots, 0);
    const Tensor<double> ref = prefill_with_cache_reference(q, chunk_lengths, one);
    double max_logit = 0.0;  // |q·k|/√d over every (query, key) pair: bounds the visible ones
    for (int64_t i = 0; i < q.dim(0) * H; ++i)
      for (int64_t j = 0; j < n * G; ++j) {
        double s = 0.0;
        const Tensor<float>& keys = layer == 0 ? k0 : k1;
        for (int64_t c = 0; c < d; ++c) s += double(q[i * d + c]) * double(keys[j * d + c]);
        max_logit = std::max(max_logit, std::fabs(s) / std::sqrt(double(d)));
      }
    Tensor<float> out(q.shape());
    out.poison();
    if (layer == 0) {
      device::prefill_with_cache_cuda(q, chunk_lengths, two, out);
    } else {
      device::prefill_with_cache_layer_cuda(q, chunk_lengths, two, layer, out);
    }
    const Comparison cmp = compare_to_oracle(out, ref, attention_tolerance(Precision::fp32, max_logit));
    EXPECT_TRUE(cmp.ok) << "prefill_with_cache on layer " << layer << "\n" << cmp.report();
  }
  Tensor<float> out(q.shape());
  EXPECT_THROW(device::prefill_with_cache_layer_cuda(q, chunk_lengths, two, 2, out), std::invalid_argument);
}

// ---- 2. the resident model runner (model_runner.h) ----

model::LlamaModel tiny_model(uint64_t seed, const std::string& spec = "random:tiny,layers=2") {
  return model::LlamaModel(model::random_llama(model::parse_random_spec(spec).config, seed));
}

// The runner tests' models: llama2.c's shape (adjacent RoPE, head_dim = dim / heads), and one
// with Hugging Face's half-split RoPE, θ = 1e5 and heads wider than dim / heads (q_dim 64 ≠ dim 32).
const char* const kRunnerModels[] = {"random:tiny,layers=2", "random:tiny,layers=2,rope=half_split,theta=1e5,head_dim=16"};

constexpr int64_t kBlockSize = 8;

// Block tables for the plans below: sequence b owns blocks order[b·per .. (b+1)·per) of a
// scattered order (no block after its logical predecessor), per = ⌈max_len / block size⌉.
struct Tables {
  std::vector<std::vector<int32_t>> blocks;
  int64_t num_blocks = 0;
  Tables(int64_t rows, int64_t max_len, uint64_t seed) {
    const int64_t per = (max_len + kBlockSize - 1) / kBlockSize;
    num_blocks = rows * per + 2;  // two spare blocks: copy-on-write targets
    const std::vector<int32_t> order = scattered_block_order(num_blocks, seed);
    for (int64_t b = 0; b < rows; ++b) blocks.emplace_back(order.begin() + b * per, order.begin() + (b + 1) * per);
    spares.assign(order.begin() + rows * per, order.end());
  }
  std::vector<int32_t> spares;  // the blocks of no table
  int64_t slot(const std::vector<int32_t>& table, int64_t position) const {
    return int64_t(table[size_t(position / kBlockSize)]) * kBlockSize + position % kBlockSize;
  }
};

// Sequence @p row's chunk: @p tokens after @p cached tokens, through @p table (its first
// ⌈context / block size⌉ blocks); with @p all_logits every token's logits, else the last's.
void add_chunk(model::StepPlan& plan, const Tables& tables, const std::vector<int32_t>& table,
               const std::vector<int32_t>& tokens, int64_t cached, bool all_logits) {
  const int64_t n = int64_t(tokens.size()), context = cached + n;
  std::vector<int64_t> slots;
  for (int64_t i = 0; i < n; ++i) slots.push_back(tables.slot(table, cached + i));
  const int64_t first = int64_t(plan.token_ids.size());
  plan.add_sequence(tokens, slots, context,
                    std::vector<int32_t>(table.begin(), table.begin() + (context + kBlockSize - 1) / kBlockSize),
                    !all_logits);
  if (all_logits)
    for (int64_t i = first; i < first + n; ++i) plan.logits_indices.push_back(i);
}

std::vector<int32_t> random_tokens(Rng& rng, int64_t count, int64_t vocab) {
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < count; ++i) tokens.push_back(int32_t(rng.integer(0, vocab - 1)));
  return tokens;
}

// Three steps on one pool of 3 rows, run by the backend's runner and by the cpu runner, every
// token's logits compared (not bit-exact — other summation orders —: the fp32 tolerance, the
// cpu's logits as reference): (1) prompt chunks of 6 and 3 tokens, every block fresh (poisoned);
// (2) the mixed batch — sequence 0's second prompt chunk (5 tokens), a decode token for sequence
// 1, a fresh 2-token prompt for sequence 2; (3) sequence 2 forks sequence 0 — its first block
// copied (copy-on-write) into a spare block, two new tokens written there — next to decodes of
// sequences 0 and 1. A device copy, poison or table that went wrong shows in the logits.
TEST(ModelBackends, RunnerOfAMixedBatchMatchesTheCpuRunner) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  for (const char* spec : kRunnerModels) {
    SCOPED_TRACE(spec);
    const model::LlamaModel model = tiny_model(rng.seed(), spec);
    const int64_t vocab = model.config().vocab_size, rows = 3, max_len = 40;
    const Tables t(rows, max_len, rng.seed());
    const KvPaging paging{kBlockSize, t.num_blocks};
    const auto cpu = engine::make_model_runner(model, Backend::cpu, rows, max_len, paging);
    const auto device = engine::make_model_runner(model, kTestBackend, rows, max_len, paging);
    EXPECT_EQ(device->backend(), kTestBackend);

    std::vector<model::StepPlan> plans(3);
    add_chunk(plans[0], t, t.blocks[0], random_tokens(rng, 6, vocab), 0, true);
    add_chunk(plans[0], t, t.blocks[1], random_tokens(rng, 3, vocab), 0, true);
    for (const auto& table : t.blocks)
      plans[0].fresh_blocks.insert(plans[0].fresh_blocks.end(), table.begin(), table.end());
    add_chunk(plans[1], t, t.blocks[0], random_tokens(rng, 5, vocab), 6, true);
    add_chunk(plans[1], t, t.blocks[1], random_tokens(rng, 1, vocab), 3, true);
    add_chunk(plans[1], t, t.blocks[2], random_tokens(rng, 2, vocab), 0, true);
    // Step 3: sequence 0 (11 tokens) decodes; sequence 2 becomes a fork of sequence 0's first 6
    // tokens (block 0 of sequence 0, copied into the spare block), then 2 tokens of its own.
    const int32_t spare = t.spares.front();
    std::vector<int32_t> fork{spare};
    add_chunk(plans[2], t, t.blocks[0], random_tokens(rng, 1, vocab), 11, true);
    add_chunk(plans[2], t, t.blocks[1], random_tokens(rng, 1, vocab), 4, true);
    add_chunk(plans[2], t, fork, random_tokens(rng, 2, vocab), 6, true);
    plans[2].block_copies.push_back({t.blocks[0].front(), spare});

    for (size_t step = 0; step < plans.size(); ++step) {
      const Tensor<float> expected = cpu->run(plans[step]);
      const Tensor<float> got = device->run(plans[step]);
      ASSERT_EQ(got.shape(), expected.shape());
      const Comparison cmp = compare_to_oracle(got, convert<double>(expected), tolerance_for(Precision::fp32));
      EXPECT_TRUE(cmp.ok) << "step " << step << " (" << plans[step].token_ids.size() << " tokens)\n" << cmp.report();
      std::cout << "[ info     ] " << spec << ": " << to_string(kTestBackend) << " vs cpu logits, step " << step
                << ": relative error " << cmp.rel_frobenius << ", max abs error " << cmp.max_abs_error
                << " (max |logit| " << cmp.max_abs_reference << ")\n";
    }
    // A malformed plan is refused before the device runs anything (the pool is left as it was).
    model::StepPlan bad = plans[2];
    bad.slot_mapping[0] = bad.slot_mapping[1];
    EXPECT_THROW((void)device->run(bad), std::invalid_argument);
  }
}

#if defined(INFERLAB_TEST_BACKEND_SIM)
// Residency, counted by the emulator itself (simt::transfer_counts(): every cudaMemcpy): the
// weights cross once, when the runner is made; a step uploads no more than its plan — per token
// its id, position, slot, row and key count, per row its length and block table, the logit
// indices — and downloads exactly its logits.
TEST(ModelBackends, ResidentRunnerMovesOnlyThePlanUpAndTheLogitsDown) {
  testing::SeededRng rng;
  const model::LlamaModel model = tiny_model(rng.seed());
  const int64_t vocab = model.config().vocab_size, rows = 4, max_len = 48;
  const Tables t(rows, max_len, rng.seed());
  const int64_t max_blocks = (max_len + kBlockSize - 1) / kBlockSize;
  const simt::TransferCounts before = simt::transfer_counts();
  const auto device = engine::make_model_runner(model, Backend::sim, rows, max_len, {kBlockSize, t.num_blocks});
  const simt::TransferCounts made = simt::transfer_counts();
  int64_t weight_bytes = 0;
  for (const auto& l : model.weights().layers)
    for (const Weight* w : {&l.wqkv, &l.wo, &l.w13, &l.w2}) weight_bytes += 4 * w->out_features() * w->in_features();
  EXPECT_GE(int64_t(made.host_to_device - before.host_to_device), weight_bytes) << "the weights go up once";

  int64_t cached = 0;
  for (const int64_t chunk : {7, 1, 1, 12}) {
    model::StepPlan plan;
    for (int64_t b = 0; b < rows; ++b) add_chunk(plan, t, t.blocks[size_t(b)], random_tokens(rng, chunk, vocab), cached, false);
    const int64_t T = int64_t(plan.token_ids.size()), n = int64_t(plan.logits_indices.size());
    const simt::TransferCounts start = simt::transfer_counts();
    const Tensor<float> logits = device->run(plan);
    const simt::TransferCounts end = simt::transfer_counts();
    const int64_t plan_bytes = T * (4 + 8 + 8 + 4 + 4) + 4 * n + 4 * rows * (1 + max_blocks);
    EXPECT_LE(int64_t(end.host_to_device - start.host_to_device), plan_bytes) << "a step of " << T << " tokens";
    EXPECT_EQ(int64_t(end.device_to_host - start.device_to_host), 4 * n * vocab) << "a step downloads its logits";
    EXPECT_EQ(logits.size(), n * vocab);
    cached += chunk;
  }
}
#endif

// Index of the largest logit of row @p row and its margin over the second largest.
std::pair<int32_t, double> top_with_margin(const Tensor<float>& logits, int64_t row) {
  const int64_t vocab = logits.dim(1);
  const float* l = logits.data() + row * vocab;
  const int32_t best = int32_t(std::max_element(l, l + vocab) - l);
  float second = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i)
    if (i != best) second = std::max(second, l[i]);
  return {best, double(l[best]) - double(second)};
}

// The cpu's logits of the token after @p prefix (a contiguous cache, the whole prefix at once).
Tensor<float> next_logits_cpu(const model::LlamaModel& model, const std::vector<int32_t>& prefix) {
  KvCache cache(model.kv_shape(1, int64_t(prefix.size())), KvFormat::fp32());
  model::StepPlan plan;
  std::vector<int64_t> slots;
  for (int64_t i = 0; i < int64_t(prefix.size()); ++i) slots.push_back(i);
  plan.add_sequence(prefix, slots, int64_t(prefix.size()), {}, true);
  return model.forward(plan, cache);
}

// The whole engine on the backend (EngineConfig::backend: weights and pool resident there),
// continuous batching in a pool small enough to preempt, against the same engine on cpu: every
// request's greedy tokens are equal, or differ first where the cpu's top-2 margin (recomputed
// from the prefix) is within what the fp32 tolerance lets both logits move.
TEST(ModelBackends, EngineOnTheBackendGeneratesTheCpuTokensWhereTheMarginIsClear) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  const model::LlamaModel model = tiny_model(rng.seed());
  engine::EngineConfig config;
  config.max_num_seqs = 4;
  config.max_num_batched_tokens = 24;
  config.chunk_size = 8;
  config.block_size = 4;
  config.num_blocks = 14;
  config.max_seq_len = 40;
  config.clock = engine::ClockMode::simulated;
  config.check_invariants = true;
  std::vector<engine::Request> requests;
  for (int i = 0; i < 6; ++i) {
    engine::Request r;
    r.prompt = random_tokens(rng, rng.integer(3, 13), model.config().vocab_size);
    r.sampling.max_new_tokens = 12;
    requests.push_back(r);
  }
  const auto serve_on = [&](Backend backend, int64_t* preemptions) {
    engine::EngineConfig c = config;
    c.backend = backend;
    engine::Engine e(model, c);
    for (const engine::Request& r : requests) e.add_request(r);
    e.run();
    *preemptions = e.stats().preemptions;
    std::map<int64_t, std::vector<int32_t>> tokens;
    for (const engine::RequestOutput& out : e.take_outputs()) tokens[out.id] = out.tokens;
    return tokens;
  };
  int64_t cpu_preemptions = 0, device_preemptions = 0;
  const auto cpu = serve_on(Backend::cpu, &cpu_preemptions);
  const auto got = serve_on(kTestBackend, &device_preemptions);
  std::cout << "[ info     ] preemptions: cpu " << cpu_preemptions << ", " << to_string(kTestBackend) << " "
            << device_preemptions << "\n";
  ASSERT_EQ(got.size(), requests.size());
  const double bound = 2.0 * tolerance_for(Precision::fp32).max_abs;
  for (const auto& [id, expected] : cpu) {
    const std::vector<int32_t>& tokens = got.at(id);
    ASSERT_EQ(tokens.size(), expected.size()) << "request " << id;
    const auto diverged = std::mismatch(expected.begin(), expected.end(), tokens.begin());
    if (diverged.first == expected.end()) continue;
    std::vector<int32_t> prefix = requests[size_t(id)].prompt;
    prefix.insert(prefix.end(), expected.begin(), diverged.first);
    const Tensor<float> logits = next_logits_cpu(model, prefix);
    const double margin = top_with_margin(logits, 0).second;
    double max_logit = 0.0;
    for (int64_t v = 0; v < logits.size(); ++v) max_logit = std::max(max_logit, std::fabs(double(logits[v])));
    std::cout << "[ info     ] request " << id << ": first different token at " << (diverged.first - expected.begin())
              << ", cpu top-2 margin " << margin << "\n";
    EXPECT_LE(margin, bound * std::max(1.0, max_logit)) << "request " << id << " differs though the margin is clear";
  }
}

}  // namespace
}  // namespace inferlab
