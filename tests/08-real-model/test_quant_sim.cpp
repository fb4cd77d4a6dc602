// Chapter 08: the quantized matmul on the device backends (kernels/quant/cuda_quant_matmul.h) —
// the activation quantizer and the __dp4a matmul. Built for sim and cuda
// (tests/08-real-model/quant_sim.cmake); the cuda build skips without a GPU.
//
// What is checked, all on fresh random data with outputs poisoned first (quant_device_check.h):
//   - the device quantizer's Q8_0 / Q8_1 blocks equal quantize_row()'s byte for byte (d, s, every
//     code), including an all-zero block, exact ties (round half away from zero), an fp16 d that
//     underflows and an s that overflows;
//   - every matmul output equals quant_matmul_cpu() with the scalar kernel bit for bit, and lies
//     within the derived bound of the float64 oracle (block_dot_f64), for Q8_0, Q4_0 and Q4_1 on
//     in = 32, 96, 544 (1, 3, 17 blocks: a partial chunk of the kernel's 8-block staging, two full
//     chunks and a tail), out = 1, 7, 33, 130 (a partial warp, two warps, two thread blocks),
//     rows = 1, 3, 17 (the decode kernel, one row tile, five with a tail) — and on weights of
//     random code bytes (every int8 and nibble);
//   - batch invariance: a row's bits are the same alone, in any sub-batch and at any offset;
//   - sim only: the same bits under forward, reverse and shuffled thread orders (a missing
//     __syncwarp around the staged weight tile shows up here);
//   - bad arguments throw std::invalid_argument naming the argument and its value;
//   - the resident model runner (runtime/model/device_runner.cu) keeps block-format matrices as
//     blocks and runs them through this matmul: its logits against the cpu runner's, and (sim)
//     the bytes it uploads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/config.h"
#include "common/tolerance.h"
#include "kernels/layers/weight.h"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/cuda_quant_matmul.cuh"
#include "kernels/quant/cuda_quant_matmul.h"
#include "kernels/quant/quant_matmul.h"
#include "runtime/engine/make_model_runner.h"
#include "runtime/model/llama_config.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/llama_weights.h"
#include "runtime/model/model_runner.h"
#include "simt/device_buffer.h"
#include "tests/08-real-model/quant_device_check.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"
#include "tests/support/test_backend.h"

namespace inferlab {
namespace {

using quant::GgmlType;
using testing::QuantCase;

// The entry points of the backend under test. A cuda build without nvcc has no cuda:: symbols;
// its tests skip before calling anything (INFERLAB_SKIP_WITHOUT_BACKEND), so it names sim's.
#if defined(INFERLAB_TEST_BACKEND_CUDA) && INFERLAB_WITH_CUDA
namespace device = ::inferlab::cuda;
#else
namespace device = ::inferlab::sim;
#endif

const GgmlType kWeightTypes[] = {GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_1};
constexpr int64_t kIns[] = {32, 96, 544};
constexpr int64_t kOuts[] = {1, 7, 33, 130};
constexpr int64_t kRows[] = {1, 3, 17};

testing::QuantMatmulFn device_matmul() {
  return [](const Tensor<float>& x, const quant::BlockMatrix& w, Tensor<float>& y) { device::quant_matmul_cuda(x, w, y); };
}

TEST(QuantDevice, QuantizerEqualsTheCpuQuantizerByteForByte) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  for (const GgmlType type : {GgmlType::q8_0, GgmlType::q8_1})
    for (const int64_t in : {int64_t{32}, int64_t{96}, int64_t{160}, int64_t{544}})
      for (const int64_t rows : kRows)
        EXPECT_TRUE(testing::quantize_rows_matches_cpu(device::quantize_rows_cuda, type, rows, in, rng));
}

TEST(QuantDevice, MatmulEqualsTheScalarCpuKernelBitForBitAndTheOracleBound) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  for (const GgmlType type : kWeightTypes)
    for (const int64_t in : kIns)
      for (const int64_t out : kOuts)
        for (const int64_t rows : kRows)
          EXPECT_TRUE(testing::quant_matmul_matches_cpu(device_matmul(), {type, rows, out, in}, rng));
}

TEST(QuantDevice, MatmulOverRandomCodeBytesEqualsTheCpu) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  for (const GgmlType type : kWeightTypes)
    for (const QuantCase shape : {QuantCase{type, 3, 33, 544, true}, QuantCase{type, 17, 130, 96, true},
                                  QuantCase{type, 1, 7, 288, true}})
      EXPECT_TRUE(testing::quant_matmul_matches_cpu(device_matmul(), shape, rng));
}

// As tests/07-continuous-batching/linear_invariance_check.h, on the device: one call of N rows,
// then sub-batches of M rows at offsets 0, 1, N − M and a random one (across the 4-row tiles and
// the 1-row decode kernel), each row compared with memcmp, outputs poisoned first.
TEST(QuantDevice, MatmulRowsAreBatchInvariant) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  const int64_t N = 21, in = 32 * 5, out = 37;
  for (const GgmlType type : kWeightTypes) {
    const std::vector<uint8_t> w = testing::random_block_weights(type, out, in, rng, false);
    const quant::BlockMatrix m{type, out, in, w};
    const Tensor<float> x = rng.normal_tensor({N, in});
    Tensor<float> all({N, out});
    all.poison();
    device::quant_matmul_cuda(x, m, all);
    for (const int64_t M : {1, 2, 3, 4, 5, 8, 13, 20})
      for (const int64_t off : {int64_t{0}, int64_t{1}, N - M, rng.integer(0, N - M)}) {
        Tensor<float> xs({M, in}), y({M, out});
        std::memcpy(xs.data(), x.data() + off * in, size_t(M * in) * sizeof(float));
        y.poison();
        device::quant_matmul_cuda(xs, m, y);
        ASSERT_EQ(std::memcmp(y.data(), all.data() + off * out, size_t(M * out) * sizeof(float)), 0)
            << quant::to_string(type) << ": rows " << off << " … " << off + M - 1 << " alone differ from the same rows in "
            << N;
      }
  }
}

// Sim only (a GPU has one order per run): the quantizer (warp reductions) and the matmul (the
// staged tile, its two __syncwarp) give the same bytes under forward, reverse and shuffled orders.
TEST(QuantDevice, SameBitsUnderEveryThreadOrder) {
#if !defined(INFERLAB_TEST_BACKEND_SIM)
  GTEST_SKIP() << "thread orders are the emulator's";
#else
  testing::SeededRng rng;
  for (const GgmlType type : kWeightTypes)
    for (const QuantCase c : {QuantCase{type, 17, 130, 544}, QuantCase{type, 1, 33, 288}, QuantCase{type, 3, 7, 96}}) {
      const Tensor<float> x = rng.normal_tensor({c.rows, c.in});
      const std::vector<uint8_t> w = testing::random_block_weights(type, c.out, c.in, rng, false);
      const quant::BlockMatrix m{type, c.out, c.in, w};
      EXPECT_TRUE(testing::host_same_under_schedules([&](Tensor<float>& y) { sim::quant_matmul_cuda(x, m, y); },
                                                     {c.rows, c.out}))
          << c.name();
    }
  for (const GgmlType type : {GgmlType::q8_0, GgmlType::q8_1}) {
    const int64_t rows = 5, in = 32 * 9;
    const Tensor<float> x = testing::quantizer_inputs(rows, in, rng);
    const sim::DeviceBuffer<float> d_x(x);
    const size_t bytes = size_t(rows * quant::row_bytes(type, in));
    const sim::DeviceBuffer<uint8_t> d_blocks(bytes);
    EXPECT_TRUE(testing::same_under_schedules(
        [&] {
          sim::quantize_rows_device(type, d_x.data(), rows, in, d_blocks.data());
          return cudaDeviceSynchronize();
        },
        {testing::DeviceOutput{"blocks", d_blocks.data(), bytes}}))
        << quant::to_string(type);
  }
#endif
}

// Throws std::invalid_argument whose message contains @p names (the argument and its value).
template <class Call>
void expect_invalid(Call call, const std::string& names) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one naming '" << names << "'";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(names), std::string::npos) << error.what();
  }
}

TEST(QuantDevice, BadArgumentsThrowNamingThem) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  const int64_t rows = 2, out = 5, in = 96;
  const Tensor<float> x = rng.normal_tensor({rows, in});
  const std::vector<uint8_t> w = testing::random_block_weights(GgmlType::q8_0, out, in, rng, false);
  Tensor<float> y({rows, out});
  expect_invalid([&] { device::quant_matmul_cuda(x, {GgmlType::q8_1, out, in, w}, y); }, "w.type = Q8_1");
  expect_invalid([&] { device::quant_matmul_cuda(x, {GgmlType::f32, out, in, w}, y); }, "w.type = F32");
  expect_invalid([&] { device::quant_matmul_cuda(x, {GgmlType::q8_0, out, 48, w}, y); }, "w.in = 48");
  expect_invalid([&] { device::quant_matmul_cuda(x, {GgmlType::q8_0, -1, in, w}, y); }, "w.out = -1");
  expect_invalid([&] { device::quant_matmul_cuda(x, {GgmlType::q8_0, out, in, std::span(w).first(w.size() - 1)}, y); },
                 "w.bytes.size() = " + std::to_string(w.size() - 1));
  expect_invalid([&] { device::quant_matmul_cuda(x, {GgmlType::q4_0, out, in, w}, y); },
                 "w.bytes.size() = " + std::to_string(w.size()));  // Q8_0's bytes, read as Q4_0
  const Tensor<float> x_short = rng.normal_tensor({rows, 64});
  expect_invalid([&] { device::quant_matmul_cuda(x_short, {GgmlType::q8_0, out, in, w}, y); }, "x.shape[1] = 64");
  const Tensor<float> x_flat = rng.normal_tensor({in});
  expect_invalid([&] { device::quant_matmul_cuda(x_flat, {GgmlType::q8_0, out, in, w}, y); }, "x.shape");
  Tensor<float> y_wide({rows, out + 1});
  expect_invalid([&] { device::quant_matmul_cuda(x, {GgmlType::q8_0, out, in, w}, y_wide); }, "y.shape");
  // The quantizer.
  std::vector<uint8_t> blocks(size_t(rows * quant::row_bytes(GgmlType::q8_0, in)));
  expect_invalid([&] { device::quantize_rows_cuda(GgmlType::q4_0, x, blocks); }, "type = Q4_0");
  expect_invalid([&] { device::quantize_rows_cuda(GgmlType::q8_0, x, std::span(blocks).first(10)); },
                 "blocks.size() = 10");
  expect_invalid([&] { device::quantize_rows_cuda(GgmlType::q8_0, rng.normal_tensor({rows, 40}), blocks); },
                 "x.shape[1] = 40");
}

// The device level (cuda_quant_matmul.cuh: device pointers), on sim — a g++ test sees only sim's
// device-level declarations: misaligned pointers, negative rows, a type without a matmul.
TEST(QuantDevice, DeviceLevelRejectsMisalignedPointersAndBadSizes) {
#if !defined(INFERLAB_TEST_BACKEND_SIM)
  GTEST_SKIP() << "the device level is declared for the translation unit's own backend: sim in a g++ test";
#else
  testing::SeededRng rng;
  const int64_t rows = 2, out = 5, in = 96;
  const std::vector<uint8_t> w = testing::random_block_weights(GgmlType::q8_0, out, in, rng, false);
  const sim::DeviceBuffer<uint8_t> d_w(w), d_x(size_t(rows * quant::row_bytes(GgmlType::q8_0, in)) + 4);
  const sim::DeviceBuffer<float> d_y(size_t(rows * out)), d_in(size_t(rows * in));
  expect_invalid([&] { sim::quant_matmul_blocks_device({GgmlType::q8_0, out, in, d_w.data() + 2}, d_x.data(), rows, d_y.data()); },
                 "w.bytes = ");
  expect_invalid([&] { sim::quant_matmul_blocks_device({GgmlType::q8_0, out, in, d_w.data()}, d_x.data() + 1, rows, d_y.data()); },
                 "x_blocks = ");
  expect_invalid([&] { sim::quant_matmul_blocks_device({GgmlType::q8_0, out, in, d_w.data()}, d_x.data(), -3, d_y.data()); },
                 "rows = -3");
  expect_invalid([&] { sim::quant_matmul_blocks_device({GgmlType::q8_1, out, in, d_w.data()}, d_x.data(), rows, d_y.data()); },
                 "w.type = Q8_1");
  expect_invalid([&] { sim::quantize_rows_device(GgmlType::q8_0, d_in.data(), rows, in, d_x.data() + 2); }, "blocks = ");
  expect_invalid([&] { sim::quantize_rows_device(GgmlType::q8_0, d_in.data(), rows, 33, d_x.data()); }, "in = 33");
  expect_invalid([&] { sim::quant_activation_bytes(GgmlType::q8_1, rows, in); }, "weight type = Q8_1");
  EXPECT_EQ(sim::quant_activation_bytes(GgmlType::q4_1, 3, 64), 3 * 2 * 36);
#endif
}

// The empty cases do nothing and throw nothing: no rows, no outputs.
TEST(QuantDevice, EmptyShapesAreAccepted) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  const std::vector<uint8_t> w = testing::random_block_weights(GgmlType::q4_1, 3, 64, rng, false);
  Tensor<float> none({0, 3});
  device::quant_matmul_cuda(Tensor<float>({0, 64}), {GgmlType::q4_1, 3, 64, w}, none);
  Tensor<float> no_out({2, 0});
  device::quant_matmul_cuda(rng.normal_tensor({2, 64}), {GgmlType::q4_1, 0, 64, {}}, no_out);
  EXPECT_EQ(no_out.size(), 0);
}

// ---- the resident model runner with block weights (runtime/model/device_runner.cu) ----

// Two steps of a small random model on one paged pool, by the backend's runner and the cpu runner:
// prompts of 6 and 3 tokens (every token's logits), then a decode token each. Returns the steps'
// logits, cpu first.
std::pair<std::vector<Tensor<float>>, std::vector<Tensor<float>>> run_two_steps(const model::LlamaModel& cpu_model,
                                                                                const model::LlamaModel& device_model,
                                                                                Rng& rng) {
  const int64_t rows = 2, max_len = 16, block = 4, per = max_len / block, vocab = cpu_model.config().vocab_size;
  const KvPaging paging{block, rows * per};
  const auto cpu = engine::make_model_runner(cpu_model, Backend::cpu, rows, max_len, paging);
  const auto device = engine::make_model_runner(device_model, testing::kTestBackend, rows, max_len, paging);
  std::vector<model::StepPlan> plans(2);
  std::vector<int64_t> cached(static_cast<size_t>(rows), 0);
  auto add = [&](model::StepPlan& plan, int64_t b, int64_t n, bool fresh) {
    std::vector<int32_t> tokens, table;
    std::vector<int64_t> slots;
    for (int64_t i = 0; i < n; ++i) tokens.push_back(int32_t(rng.integer(0, vocab - 1)));
    for (int64_t k = 0; k < per; ++k) table.push_back(int32_t(b * per + k));
    const int64_t context = cached[size_t(b)] + n;
    for (int64_t p = cached[size_t(b)]; p < context; ++p) slots.push_back(table[size_t(p / block)] * block + p % block);
    const int64_t first = int64_t(plan.token_ids.size());
    table.resize(size_t((context + block - 1) / block));
    if (fresh) plan.fresh_blocks.insert(plan.fresh_blocks.end(), table.begin(), table.end());
    plan.add_sequence(tokens, slots, context, table, false);
    for (int64_t i = first; i < first + n; ++i) plan.logits_indices.push_back(i);
    cached[size_t(b)] = context;
  };
  add(plans[0], 0, 6, true);
  add(plans[0], 1, 3, true);
  add(plans[1], 0, 1, false);
  add(plans[1], 1, 1, false);
  std::pair<std::vector<Tensor<float>>, std::vector<Tensor<float>>> logits;
  for (const model::StepPlan& plan : plans) {
    logits.first.push_back(cpu->run(plan));
    logits.second.push_back(device->run(plan));
  }
  return logits;
}

// The resident runner keeps Q8_0 / Q4_0 / Q4_1 matrices as blocks and runs them through the
// quantized matmul — the cpu forward's linear_cpu arithmetic — where it used to widen them to fp32
// at upload and run cuBLAS, i.e. x · dequant(W)ᵀ without the activations' 8-bit rounding. Against
// the cpu runner on the same quantized model (untied head, and tied: the Q8_0 / Q4 embedding both
// gathered as fp32 rows and used as blocks for the logits):
//   - sim: within the fp32 tolerance (measured: the same bits — with the matmul bit-identical, the
//     emulator's norm and attention kernels sum as the cpu's do on these shapes);
//   - cuda: within 1e-3 relative (Frobenius). A GPU's norm, RoPE and attention round differently
//     from the cpu's in the last bit, and where such a difference moves an activation across a
//     rounding boundary of its 8-bit code the output moves by one quantization step d_x·|w| — rare
//     (~1e-5 a value) and ~1e-4 of the step's logits each. An estimate: no GPU has run it yet.
// The widened upload (the same model converted to fp32) is ~1e-2 off — the activation quantization
// error — and must fail the same tolerance: the check tells the two paths apart.
// On sim the logits are the same bits — nearly always: the emulator's attention kernels sum in
// another order than the cpu's, and on this tiny model an activation that lands next to a rounding
// boundary of its 8-bit code flips now and then, moving that token's logits ~0.5% — and, through
// the K and V it writes, the later tokens of its sequence (measured: 5 of 34 fresh seeds, in the
// prefill step or the decode one, on the lab's main as well as chapter 11's; the earlier "same
// bits" claim held for most seeds only). So on sim each step must have some token's logits
// bit-identical to the cpu's — the widened upload has none: that is what tells the two paths
// apart — and the whole step within a few such flips (2e-2 relative; measured up to 0.9e-2).
TEST(QuantDevice, ResidentRunnerWithBlockWeightsMatchesTheCpuRunner) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  const Tolerance tolerance =
      testing::kTestBackend == Backend::sim ? tolerance_for(Precision::fp32) : Tolerance{1e-3, 1e-2};
  for (const WeightFormat format : {WeightFormat::q8_0, WeightFormat::q4_0, WeightFormat::q4_1})
    for (const bool tied : {false, true}) {
      SCOPED_TRACE(std::string(to_string(format)) + (tied ? ", tied head" : ", own head"));
      model::LlamaConfig config = model::parse_random_spec("random:tiny,layers=2").config;
      config.shared_classifier = tied;
      const model::LlamaModel quantized(model::convert_weights(model::random_llama(config, rng.seed()), format));
      const model::LlamaModel widened(model::convert_weights(quantized.weights(), WeightFormat::f32));
      const auto [cpu, device] = run_two_steps(quantized, quantized, rng);
      const auto [cpu_again, old] = run_two_steps(quantized, widened, rng);
      for (size_t step = 0; step < cpu.size(); ++step) {
        const bool sim = testing::kTestBackend == Backend::sim;  // the comment above
        const Comparison cmp =
            compare_to_oracle(device[step], convert<double>(cpu[step]), sim ? Tolerance{2e-2, 1e-1} : tolerance);
        EXPECT_TRUE(cmp.ok) << "step " << step << "\n" << cmp.report();
        const int64_t tokens = cpu[step].dim(0), vocab = cpu[step].dim(1);
        const auto identical_tokens = [&](const Tensor<float>& a, const Tensor<float>& b) {
          int64_t same = 0;
          for (int64_t t = 0; t < tokens; ++t)
            same += std::memcmp(a.data() + t * vocab, b.data() + t * vocab, size_t(vocab) * 4) == 0;
          return same;
        };
        if (sim) {
          EXPECT_GE(identical_tokens(device[step], cpu[step]), 1)
              << "step " << step << ": no token's logits are the cpu's bits";
          EXPECT_EQ(identical_tokens(old[step], cpu_again[step]), 0)
              << "step " << step << ": the widened fp32 upload gives some token the cpu's bits — the check cannot "
              << "tell the quantized matmul from cuBLAS on dequantized weights";
        }
        const Comparison before = compare_to_oracle(old[step], convert<double>(cpu_again[step]), tolerance);
        EXPECT_FALSE(before.ok) << "step " << step << ": the widened fp32 upload passes too — the check cannot "
                                << "tell the quantized matmul from cuBLAS on dequantized weights";
        std::cout << "[ info     ] " << to_string(format) << (tied ? " tied" : "") << " step " << step
                  << ", relative error vs cpu: blocks resident " << cmp.rel_frobenius << " (same bits: "
                  << (std::memcmp(device[step].data(), cpu[step].data(), size_t(cpu[step].size()) * 4) == 0 ? "yes"
                                                                                                            : "no")
                  << "), widened to fp32 " << before.rel_frobenius << "\n";
      }
    }
}

#if defined(INFERLAB_TEST_BACKEND_SIM)
// What the runner uploads when it is made, counted by the emulator (simt::transfer_counts()): for
// the quantized model, each block matrix's own bytes instead of 4 bytes a weight. The difference
// from the same model widened to fp32 is exactly Σ (4·out·in − bytes) over the matmul-only
// matrices, less the tied embedding's blocks (uploaded besides its fp32 rows, which both keep).
TEST(QuantDevice, ResidentRunnerUploadsBlockMatricesAsTheirBytes) {
  testing::SeededRng rng;
  for (const WeightFormat format : {WeightFormat::q8_0, WeightFormat::q4_1})
    for (const bool tied : {false, true}) {
      model::LlamaConfig config = model::parse_random_spec("random:tiny,layers=2").config;
      config.shared_classifier = tied;
      const model::LlamaModel quantized(model::convert_weights(model::random_llama(config, rng.seed()), format));
      const model::LlamaModel widened(model::convert_weights(quantized.weights(), WeightFormat::f32));
      auto uploaded = [](const model::LlamaModel& m) {
        const uint64_t before = simt::transfer_counts().host_to_device;
        const auto runner = engine::make_model_runner(m, Backend::sim, 2, 16, KvPaging{4, 8});
        return int64_t(simt::transfer_counts().host_to_device - before);
      };
      const model::LlamaWeights& w = quantized.weights();
      int64_t saved = 0;
      auto matmul_only = [&](const Weight& m) { saved += 4 * m.out_features() * m.in_features() - m.bytes(); };
      for (const model::LlamaLayerWeights& l : w.layers)
        for (const Weight* m : {&l.wqkv, &l.wo, &l.w13, &l.w2}) matmul_only(*m);
      if (tied)
        saved -= w.embedding.bytes();
      else
        matmul_only(w.classifier);
      EXPECT_EQ(uploaded(widened) - uploaded(quantized), saved) << to_string(format) << (tied ? " tied" : "");
    }
}
#endif

}  // namespace
}  // namespace inferlab
