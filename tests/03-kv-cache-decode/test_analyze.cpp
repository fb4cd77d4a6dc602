// The analytic calculator (analysis/, `inferlab analyze`) against values computed by hand
// in the comments: KV-cache sizes, parameter counts, weights bytes, decode and prefill floors.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "analysis/article_audit.h"
#include "analysis/inference_cost.h"
#include "analysis/report.h"
#include "analysis/units.h"
#include "common/cost.h"
#include "common/json.h"
#include "common/roofline.h"

namespace inferlab::analysis {
namespace {

constexpr double KiB = 1024.0;
constexpr double MiB = 1024.0 * KiB;
constexpr double GiB = 1024.0 * MiB;

Workload workload(const std::string& model, const std::string& device, int64_t batch, int64_t context,
                  WeightFormat weights = WeightFormat::fp16, KvFormat kv = KvFormat::fp16) {
  Workload w;
  w.model = find_model(model);
  w.device = find_device(device);
  w.batch = batch;
  w.context = context;
  w.weights = weights;
  w.kv = kv;
  return w;
}

// Expects @p call to throw std::invalid_argument whose message contains @p text.
template <class Call>
void expect_invalid(Call call, const std::string& text) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one mentioning '" << text << "'";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(text), std::string::npos) << error.what();
  }
}

// ---- model shapes and parameter counts ---------------------------------------------------------

TEST(AnalyzeModel, Llama7bParameterCountIs6_74Billion) {
  const ModelShape& m = find_model("llama-7b");
  // Attention: 4 · 4096² = 67,108,864. MLP: 3 · 4096 · 11008 = 135,266,304. Norms: 2 · 4096.
  EXPECT_EQ(m.attention_params_per_layer(), 67'108'864);
  EXPECT_EQ(m.mlp_params_per_layer(), 135'266'304);
  // 32 layers · (67,108,864 + 135,266,304 + 8,192) = 6,476,267,520; embedding and LM head
  // 2 · 32000 · 4096 = 262,144,000; final norm 4096.  Total 6,738,415,616 ≈ 6.74 B.
  EXPECT_EQ(m.total_params(), 6'738'415'616);
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_EQ(m.gqa_group_size(), 1);
}

TEST(AnalyzeModel, Llama2_13bAndLlama3_8bParameterCounts) {
  // 13B: 40 · (4 · 5120² + 3 · 5120 · 13824 + 2 · 5120) + 2 · 32000 · 5120 + 5120
  //    = 40 · (104,857,600 + 212,336,640 + 10,240) + 327,680,000 + 5120 = 13,015,864,320.
  EXPECT_EQ(find_model("llama-2-13b").total_params(), 13'015'864'320);
  // Llama-3-8B (GQA, 8 KV heads of 128): attention 2 · 4096² + 2 · 4096 · 1024 = 41,943,040;
  // MLP 3 · 4096 · 14336 = 176,160,768; 32 · (41,943,040 + 176,160,768 + 8,192) = 6,979,584,000;
  // plus 2 · 128256 · 4096 = 1,050,673,152 and 4096: 8,030,261,248 ≈ 8.03 B.
  const ModelShape& m = find_model("llama3-8b");  // alias
  EXPECT_EQ(m.attention_params_per_layer(), 41'943'040);
  EXPECT_EQ(m.total_params(), 8'030'261'248);
  EXPECT_EQ(m.gqa_group_size(), 4);
}

TEST(AnalyzeModel, DefaultFfnIsLlamasRule) {
  // ceil(8 · 4096 / 3) = 10923, rounded up to a multiple of 256: 11008 (LLaMA-7B's FFN).
  EXPECT_EQ(default_ffn_size(4096), 11008);
  // ceil(8 · 5120 / 3) = 13654 → 13824 (LLaMA-2-13B's FFN).
  EXPECT_EQ(default_ffn_size(5120), 13824);
}

// ---- the KV cache ------------------------------------------------------------------------------

TEST(AnalyzeKvCache, Llama7bFp16Is16KiBPerTokenPerLayerAnd1GiBPerSequenceAt2048) {
  const KvCacheSize kv = kv_cache_size(find_model("llama-7b"), KvFormat::fp16, 1, 2048);
  // 2 (K, V) · 4096 · 2 bytes = 16,384 B = 16 KiB — not the article's 32 KB.
  EXPECT_EQ(kv.bytes_per_token_per_layer, 16 * 1024);
  EXPECT_EQ(kv.scale_bytes_per_token_per_layer, 0);
  // 32 layers: 512 KiB per token.
  EXPECT_EQ(kv.bytes_per_token, 512 * 1024);
  // One layer at 2048 tokens: 16 KiB · 2048 = 32 MiB — not the article's 64 MB.
  EXPECT_EQ(kv.bytes_per_layer, 32LL * 1024 * 1024);
  // All 32 layers: 1 GiB.
  EXPECT_EQ(kv.bytes_per_sequence, 1LL << 30);
  EXPECT_EQ(kv.total_bytes, 1LL << 30);
  // Batch 8 at 2048: 8 GiB.
  EXPECT_EQ(kv_cache_size(find_model("llama-7b"), KvFormat::fp16, 8, 2048).total_bytes, 8LL << 30);
}

TEST(AnalyzeKvCache, GqaLlama3_8bIs4KiBPerTokenPerLayer) {
  const KvCacheSize kv = kv_cache_size(find_model("llama-3-8b"), KvFormat::fp16, 1, 8192);
  // 2 (K, V) · 8 KV heads · 128 · 2 B = 4096 B = 4 KiB: a quarter of MHA's 16 KiB.
  EXPECT_EQ(kv.bytes_per_token_per_layer, 4 * 1024);
  // 32 layers · 4 KiB = 128 KiB per token; 8192 tokens: 1 GiB.
  EXPECT_EQ(kv.bytes_per_token, 128 * 1024);
  EXPECT_EQ(kv.bytes_per_sequence, 1LL << 30);
}

TEST(AnalyzeKvCache, Llama2_13bIs20KiBPerTokenPerLayer) {
  // 2 · 5120 · 2 B = 20,480 B; 40 layers: 800 KiB per token — the article's "800 KB" is this
  // kind of figure: per token, not per decode step.
  const KvCacheSize kv = kv_cache_size(find_model("llama-2-13b"), KvFormat::fp16, 1, 1);
  EXPECT_EQ(kv.bytes_per_token_per_layer, 20 * 1024);
  EXPECT_EQ(kv.bytes_per_token, 800 * 1024);
}

TEST(AnalyzeKvCache, Int8AddsPerTokenPerHeadScalesFp8DoesNot) {
  const ModelShape& m = find_model("llama-7b");
  // int8: 2 · 4096 · 1 B = 8192 B of data + one fp16 scale per token per KV head for K and for
  // V: 2 · 32 · 2 B = 128 B. 8320 B is 50.8 % of fp16's 16384 B, not 50 %.
  const KvCacheSize int8 = kv_cache_size(m, KvFormat::int8, 1, 1);
  EXPECT_EQ(int8.data_bytes_per_token_per_layer, 8192);
  EXPECT_EQ(int8.scale_bytes_per_token_per_layer, 128);
  EXPECT_EQ(int8.bytes_per_token_per_layer, 8320);
  EXPECT_EQ(kv_cache_size(m, KvFormat::fp8, 1, 1).bytes_per_token_per_layer, 8192);
  EXPECT_EQ(kv_cache_size(m, KvFormat::bf16, 1, 1).bytes_per_token_per_layer, 16384);
}

// ---- weights -----------------------------------------------------------------------------------

TEST(AnalyzeWeights, Llama7bFp16Is13_5GBHeldAnd13_2GBStreamed) {
  const WeightBytes w = weight_bytes(find_model("llama-7b"), WeightFormat::fp16);
  // Held: 6,738,415,616 · 2 B = 13,476,831,232 B ≈ 13.5 GB.
  EXPECT_DOUBLE_EQ(w.held, 13'476'831'232.0);
  // Streamed per forward pass: all but the embedding table (a lookup of a few rows):
  // (6,738,415,616 − 131,072,000) · 2 = 13,214,687,232 B.
  EXPECT_DOUBLE_EQ(w.streamed, 13'214'687'232.0);
}

TEST(AnalyzeWeights, Int8AndInt4QuantizeTheBlocksLinearLayers) {
  const ModelShape& m = find_model("llama-7b");
  // Blocks' linear layers: 32 · 202,375,168 = 6,476,005,376 weights. LM head and norms stay
  // 16-bit: (131,072,000 + 32 · 8192 + 4096) · 2 = 262,676,480 B.
  const WeightBytes int8 = weight_bytes(m, WeightFormat::int8);
  EXPECT_DOUBLE_EQ(int8.quantized, 6'476'005'376.0);
  EXPECT_DOUBLE_EQ(int8.kept_16bit, 262'676'480.0);
  EXPECT_DOUBLE_EQ(int8.streamed, 6'738'681'856.0);
  // int4 with an fp16 scale per 128 weights: 0.5 + 2/128 = 0.515625 B per weight.
  EXPECT_DOUBLE_EQ(bytes_per_weight(WeightFormat::int4), 0.515625);
  EXPECT_DOUBLE_EQ(weight_bytes(m, WeightFormat::int4).quantized, 6'476'005'376.0 * 0.515625);
}

// ---- decode ------------------------------------------------------------------------------------

TEST(AnalyzeDecode, Batch1Llama7bOnA100_40IsWeightBoundAtAbout115TokensPerSecond) {
  const Analysis a = analyze(workload("llama-7b", "a100-40", 1, 1));
  // Weights 13,214,687,232 B + KV of 1 cached token read and 1 written, 2 · 524,288 B.
  const double bytes = 13'214'687'232.0 + 2 * 524'288.0;
  EXPECT_DOUBLE_EQ(a.decode.bytes(), bytes);
  EXPECT_TRUE(a.decode.memory_bound());
  // 1555e9 / 13,215,735,808 = 117.66 token/s. (The curriculum's round "≈ 115" divides by all
  // 6.74 B parameters, 13.48 GB, embedding table included.)
  EXPECT_NEAR(a.decode.tokens_per_second(), 1555e9 / bytes, 1e-9);
  EXPECT_NEAR(a.decode.tokens_per_second(), 117.66, 0.01);
  EXPECT_GT(a.decode.tokens_per_second(), 110.0);
  EXPECT_LT(a.decode.tokens_per_second(), 120.0);
}

TEST(AnalyzeDecode, StepReadsTheKvOfEveryCachedTokenAndTheWeightsSeparately) {
  const Analysis a = analyze(workload("llama-7b", "a100-40", 1, 2048));
  EXPECT_DOUBLE_EQ(a.decode.weight_bytes, 13'214'687'232.0);
  // All 2048 cached tokens: 2048 · 512 KiB = 1 GiB, not 800 KB.
  EXPECT_DOUBLE_EQ(a.decode.kv_read_bytes, 1.0 * GiB);
  EXPECT_DOUBLE_EQ(a.decode.kv_write_bytes, 512 * KiB);
  // Linear FLOPs: 2 · (6,476,005,376 + 131,072,000) = 13,214,154,752. Attention: 4 · 2049 · 128
  // per head (context + the new token), · 32 heads · 32 layers = 1,074,266,112.
  EXPECT_DOUBLE_EQ(a.decode.linear_flops, 13'214'154'752.0);
  EXPECT_DOUBLE_EQ(a.decode.attention_flops, 1'074'266'112.0);
  // 14,288,953,344 B / 1555 GB/s = 9.189 ms → 108.8 token/s; the article measured 102 (94 %).
  EXPECT_NEAR(a.decode.tokens_per_second(), 1555e9 / (13'214'687'232.0 + 2049 * 524'288.0), 1e-9);
  EXPECT_NEAR(a.decode.tokens_per_second(), 108.83, 0.01);
  // The attention's own bytes agree with common/cost.h (whose count adds the query and output).
  const Cost per_layer = decode_attention_cost({32, 32, 2048, 128}, 2.0);
  EXPECT_DOUBLE_EQ(per_layer.bytes - 32 * 2 * 128 * 2.0, a.decode.kv_read_bytes / 32);
}

TEST(AnalyzeDecode, Int8WeightsNearlyDoubleTheBatch1FloorInt8KvDoesNot) {
  const double fp16 = analyze(workload("llama-7b", "a100-40", 1, 2048)).decode.tokens_per_second();
  const double w8 = analyze(workload("llama-7b", "a100-40", 1, 2048, WeightFormat::int8)).decode.tokens_per_second();
  const double kv8 =
      analyze(workload("llama-7b", "a100-40", 1, 2048, WeightFormat::fp16, KvFormat::int8)).decode.tokens_per_second();
  // int8 weights: (13,214,687,232 + 2049 · 524,288) / (6,738,681,856 + 2049 · 524,288) = 1.829 —
  // the article's 187 / 102 = 1.833.
  EXPECT_NEAR(w8 / fp16, 14'288'953'344.0 / 7'812'947'968.0, 1e-12);
  EXPECT_NEAR(w8 / fp16, 187.0 / 102.0, 0.01);
  // At context 1 the weights are everything: 13,215,735,808 / 6,739,730,432 = 1.961.
  const double fp16_short = analyze(workload("llama-7b", "a100-40", 1, 1)).decode.tokens_per_second();
  const double w8_short = analyze(workload("llama-7b", "a100-40", 1, 1, WeightFormat::int8)).decode.tokens_per_second();
  EXPECT_GE(w8_short / fp16_short, 1.9);
  EXPECT_LE(w8_short / fp16_short, 2.0);
  // int8 KV only: the KV is 7.5 % of the bytes; 8320/16384 of it saves 3.7 %: x1.04.
  // (13,214,687,232 + 2049 · 524,288) / (13,214,687,232 + 2049 · 266,240) = 1.039.
  EXPECT_NEAR(kv8 / fp16, 14'288'953'344.0 / (13'214'687'232.0 + 2049 * 266'240.0), 1e-12);
  EXPECT_LT(kv8 / fp16, 1.05);
}

TEST(AnalyzeDecode, KvBytesEqualWeightBytesAtTheCrossover) {
  const Analysis a = analyze(workload("llama-7b", "a100-40", 1, 2048));
  // 13,214,687,232 B of weights / 524,288 B of KV per token = 25,205.02 cached tokens (batch ×
  // context), e.g. batch 12 at 2048 or batch 1 at 25K.
  EXPECT_NEAR(a.kv_equals_weights_tokens, 13'214'687'232.0 / 524'288.0, 1e-9);
  EXPECT_NEAR(a.kv_equals_weights_tokens, 25'205.02, 0.01);
  const Analysis below = analyze(workload("llama-7b", "a100-40", 12, 2048));  // 24,576 tokens
  const Analysis above = analyze(workload("llama-7b", "a100-40", 13, 2048));  // 26,624 tokens
  EXPECT_LT(below.decode.kv_read_bytes, below.decode.weight_bytes);
  EXPECT_GT(above.decode.kv_read_bytes, above.decode.weight_bytes);
  // Past the crossover int8 KV pays: at batch 16, context 4096 (65,536 cached tokens) it buys
  // (13,214,687,232 + 16 · 4097 · 524,288) / (13,214,687,232 + 16 · 4097 · 266,240) = 1.55×.
  const double fp16 = analyze(workload("llama-7b", "a100-80", 16, 4096)).decode.tokens_per_second();
  const double kv8 =
      analyze(workload("llama-7b", "a100-80", 16, 4096, WeightFormat::fp16, KvFormat::int8)).decode.tokens_per_second();
  EXPECT_NEAR(kv8 / fp16, (13'214'687'232.0 + 16 * 4097 * 524'288.0) / (13'214'687'232.0 + 16 * 4097 * 266'240.0),
              1e-12);
  EXPECT_GT(kv8 / fp16, 1.5);
  // GQA shrinks the KV 4×, so Llama-3-8B's crossover is far out: weights (8,030,261,248 −
  // 525,336,576) · 2 = 15,009,849,344 B over 131,072 B per token = 114,516.6 tokens.
  EXPECT_NEAR(analyze(workload("llama-3-8b", "a100-40", 1, 2048)).kv_equals_weights_tokens,
              15'009'849'344.0 / 131'072.0, 1e-9);
}

TEST(AnalyzeDecode, AiIsAboutTheBatchWhileWeightsDominate) {
  // At context 1, FLOPs ≈ 2 · weights · batch and bytes ≈ 2 · weights: AI ≈ batch (fp16).
  for (int64_t batch : {1, 2, 4, 8, 16, 64}) {
    const Analysis a = analyze(workload("llama-7b", "h100", batch, 1));
    EXPECT_NEAR(a.decode.arithmetic_intensity() / static_cast<double>(batch), 1.0, 0.01) << "batch " << batch;
    // Below the H100's ridge (989e12 / 3.35e12 = 295 FLOP/byte) every one of these is memory-bound.
    EXPECT_TRUE(a.decode.memory_bound()) << "batch " << batch;
  }
  // Batch 512 at context 1 is past the ridge: compute-bound.
  EXPECT_FALSE(analyze(workload("llama-7b", "h100", 512, 1)).decode.memory_bound());
}

TEST(AnalyzeDecode, GqaAttentionDoesGroupSizeFlopsPerKvByte) {
  // Llama-3-8B: 4 · (L + 1) · 128 · 32 heads FLOPs per layer over 2 · L · 128 · 8 · 2 bytes:
  // 4 (the group size) · (L + 1) / L.
  const Analysis a = analyze(workload("llama-3-8b", "a100-80", 4, 8191));
  EXPECT_NEAR(a.decode.attention_flops / a.decode.kv_read_bytes, 4.0 * 8192.0 / 8191.0, 1e-12);
}

// ---- prefill -----------------------------------------------------------------------------------

TEST(AnalyzePrefill, AiGrowsWithThePromptAndCrossesTheRidge) {
  double previous = 0.0;
  for (int64_t prompt : {1, 16, 64, 256, 1024, 4096, 16384}) {
    Workload w = workload("llama-7b", "a100-40", 1, 2048);
    w.prompt = prompt;
    const Analysis a = analyze(w);
    EXPECT_GT(a.prefill.arithmetic_intensity(), previous) << "prompt " << prompt;
    previous = a.prefill.arithmetic_intensity();
  }
  // Each prompt token does 2 FLOPs per 2-byte weight: AI ≈ prompt for short prompts. Prompt 16:
  // memory-bound; prompt 2048 (AI ≈ 1681 ≫ the A100's ridge of 201): compute-bound.
  Workload w = workload("llama-7b", "a100-40", 1, 2048);
  w.prompt = 16;
  EXPECT_TRUE(analyze(w).prefill.memory_bound());
  const Analysis a = analyze(workload("llama-7b", "a100-40", 1, 2048));
  EXPECT_FALSE(a.prefill.memory_bound());
  EXPECT_DOUBLE_EQ(a.prefill.seconds(), a.prefill.flops() / 312e12);
}

TEST(AnalyzePrefill, CountsWeightsOnceKvWrittenAndFusedCausalAttention) {
  const Analysis a = analyze(workload("llama-7b", "a100-40", 2, 2048));
  // Weights once per prefill, whatever the number of tokens.
  EXPECT_DOUBLE_EQ(a.prefill.weight_bytes, 13'214'687'232.0);
  // K and V written for 2 · 2048 tokens: 2 GiB.
  EXPECT_DOUBLE_EQ(a.prefill.kv_write_bytes, 2.0 * GiB);
  // Linear: 2 · 6,476,005,376 · 4096 tokens + the LM head for the last position of each
  // sequence, 2 · 131,072,000 · 2.
  EXPECT_DOUBLE_EQ(a.prefill.linear_flops, 2.0 * 6'476'005'376.0 * 4096 + 2.0 * 131'072'000.0 * 2);
  // Attention: cost.h's fused causal count for one layer and sequence, · 32 layers · 2 sequences.
  const Cost attention =
      prefill_attention_cost({32, 32, 2048, 128}, TrafficModel::fused, 2.0, FlopConvention::causal_useful);
  EXPECT_DOUBLE_EQ(a.prefill.attention_flops, attention.flops * 64);
  // 2 · 128 · 2048 · 2049 · 32 heads = 34,376,269,824 per layer and sequence.
  EXPECT_DOUBLE_EQ(attention.flops, 34'376'515'584.0);
  EXPECT_DOUBLE_EQ(a.prefill.attention_bytes, attention.bytes * 64);
  EXPECT_DOUBLE_EQ(a.prefill.tokens, 4096.0);
}

// ---- devices -----------------------------------------------------------------------------------

TEST(AnalyzeDevice, RidgePointsMatchTheCurriculumTable) {
  EXPECT_NEAR(find_device("a100-40").ridge_point(), 201, 0.5);  // 312e12 / 1.555e12
  EXPECT_NEAR(find_device("a100-80").ridge_point(), 153, 0.5);  // 312e12 / 2.039e12
  EXPECT_NEAR(find_device("h100").ridge_point(), 295, 0.5);     // 989e12 / 3.35e12
  EXPECT_NEAR(find_device("H200").ridge_point(), 206, 0.5);     // 989e12 / 4.8e12
  EXPECT_NEAR(find_device("rtx4090").ridge_point(), 164, 0.5);  // 165.2e12 / 1.008e12
}

TEST(AnalyzeDevice, Fp8WeightsUseTheFp8PeakWhereTheDeviceHasOne) {
  EXPECT_DOUBLE_EQ(compute_peak_gflops(find_device("h100"), WeightFormat::fp8), 1979e3);
  EXPECT_DOUBLE_EQ(compute_peak_gflops(find_device("h100"), WeightFormat::fp16), 989e3);
  EXPECT_DOUBLE_EQ(compute_peak_gflops(find_device("a100-40"), WeightFormat::fp8), 312e3);  // no FP8: 16-bit math
  EXPECT_DOUBLE_EQ(compute_peak_gflops(find_device("h100"), WeightFormat::int8), 989e3);    // weight-only
}

TEST(AnalyzeDevice, ThisMachineComesFromTheSavedRoofline) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("inferlab_analyze_roofline_" + std::to_string(::getpid()) + ".json");
  Roofline r;
  r.peak_gflops = 480.0;
  r.triad_gbs = 30.0;
  r.read_gbs = 31.0;
  r.threads = 2;
  r.simd = "avx512";
  r.cpu = "Test CPU";
  save_roofline(r, path);
  const DeviceSpec device = find_device("this", path.string());
  EXPECT_TRUE(device.measured);
  EXPECT_DOUBLE_EQ(device.peak_gflops, 480.0);
  EXPECT_DOUBLE_EQ(device.bandwidth_gbs, 30.0);
  EXPECT_DOUBLE_EQ(device.ridge_point(), 16.0);
  EXPECT_NE(device.peak_note.find("fp32"), std::string::npos);
  std::filesystem::remove(path);
  expect_invalid([&] { find_device("this", path.string()); }, "inferlab roofline");
}

TEST(AnalyzeDevice, ACpuNameWithQuotesBackslashesAndControlCharactersRoundTripsThroughTheJson) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("inferlab_analyze_name_" + std::to_string(::getpid()) + ".json");
  Roofline r;
  r.peak_gflops = 480.0;
  r.triad_gbs = 30.0;
  r.read_gbs = 31.0;
  r.cpu = "Evil \"Lake\" C:\\cpu\tv2\n\x01";
  save_roofline(r, path);
  const std::optional<Roofline> back = load_roofline(path);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->cpu, r.cpu) << "roofline.json";
  Workload w = workload("llama-7b", "a100-40", 1, 2048);
  w.device = find_device("this", path.string());
  std::filesystem::remove(path);
  const Json parsed = Json::parse(to_json(analyze(w)));  // throws if the text is not JSON
  EXPECT_EQ(parsed["device"]["name"], "this machine (" + r.cpu + ")");
  EXPECT_EQ(parsed["device"]["key"], w.device.key);
}

// ---- bad input ---------------------------------------------------------------------------------

TEST(AnalyzeInput, BadInputNamesTheArgumentAndValue) {
  expect_invalid([] { find_model("gpt-9"); }, "model = gpt-9: unknown");
  expect_invalid([] { find_device("tpu-v5"); }, "device = tpu-v5: unknown");
  expect_invalid([] { parse_weight_format("int3"); }, "weights = int3");
  expect_invalid([] { parse_kv_format("int4"); }, "kv = int4");
  expect_invalid([] { analyze(workload("llama-7b", "a100-40", 0, 2048)); }, "batch = 0");
  expect_invalid([] { analyze(workload("llama-7b", "a100-40", 1, 0)); }, "context = 0");
  Workload w = workload("llama-7b", "a100-40", 1, 2048);
  w.model.num_kv_heads = 5;
  expect_invalid([&] { analyze(w); }, "num_kv_heads = 5: must divide num_heads = 32");
  w.model.num_kv_heads = 32;
  w.model.num_heads = 48;
  expect_invalid([&] { analyze(w); }, "num_heads = 48: must divide hidden_size = 4096");
}

// ---- reports -----------------------------------------------------------------------------------

TEST(AnalyzeReport, UnitsReadAsInTheLesson) {
  EXPECT_EQ(format_binary_bytes(16384), "16.00 KiB");
  EXPECT_EQ(format_binary_bytes(32 * MiB), "32.00 MiB");
  EXPECT_EQ(format_binary_bytes(GiB), "1.000 GiB");
  EXPECT_EQ(format_si(13'214'687'232.0, "B"), "13.21 GB");
  EXPECT_EQ(format_count(25'204.9), "25,205");
  EXPECT_EQ(format_count(-1'234'567), "-1,234,567");
  EXPECT_EQ(format_seconds(9.189e-3), "9.189 ms");
}

TEST(AnalyzeReport, TextAndJsonCarryTheNumbers) {
  const Analysis a = analyze(workload("llama-7b", "a100-40", 1, 2048));
  std::ostringstream text;
  print_report(text, a);
  for (const char* expected : {"16.00 KiB", "32.00 MiB", "1.000 GiB", "13.21 GB", "memory-bound", "compute-bound",
                               "108.8 tokens/s", "25,205", "int8 weights"}) {
    EXPECT_NE(text.str().find(expected), std::string::npos) << expected << "\n" << text.str();
  }
  const std::string json = to_json(a);
  EXPECT_NE(json.find("\"bytes_per_token_per_layer\": 16384"), std::string::npos) << json;
  EXPECT_NE(json.find("\"kv_read_bytes\": 1073741824"), std::string::npos) << json;
  EXPECT_NE(json.find("\"bound\": \"memory\""), std::string::npos) << json;
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
}

TEST(AnalyzeAudit, CorrectsTheArticlesKvFiguresAndAttributesItsSpeedUp) {
  const std::vector<AuditRow> rows = article_audit();
  ASSERT_GE(rows.size(), 10u);
  bool saw_32kb = false, saw_64mb = false, saw_2000 = false, saw_187 = false;
  for (const AuditRow& r : rows) {
    EXPECT_FALSE(r.section.empty() || r.claim.empty() || r.article.empty() || r.correct.empty() || r.why.empty());
    if (r.article == "32 KB") {
      saw_32kb = true;
      EXPECT_EQ(r.verdict, Verdict::wrong);
      EXPECT_EQ(r.correct.rfind("16.00 KiB", 0), 0u) << r.correct;
    }
    if (r.article == "64 MB") {
      saw_64mb = true;
      EXPECT_NE(r.correct.find("32.00 MiB"), std::string::npos) << r.correct;
      EXPECT_NE(r.correct.find("1.000 GiB"), std::string::npos) << r.correct;
    }
    if (r.article.find("2000 token/s") != std::string::npos) {
      saw_2000 = true;
      EXPECT_EQ(r.verdict, Verdict::wrong);
      EXPECT_NE(r.correct.find("108.8 token/s"), std::string::npos) << r.correct;
    }
    if (r.article.find("187") != std::string::npos) {
      saw_187 = true;
      EXPECT_NE(r.correct.find("int8 weights: floor 199.0 token/s (x1.83)"), std::string::npos) << r.correct;
      EXPECT_NE(r.correct.find("(x1.04)"), std::string::npos) << r.correct;
    }
  }
  EXPECT_TRUE(saw_32kb && saw_64mb && saw_2000 && saw_187);
  std::ostringstream markdown;
  print_audit_markdown(markdown, rows);
  EXPECT_EQ(markdown.str().rfind("| § |", 0), 0u);
}

// ---- as an engineer uses it --------------------------------------------------------------------

TEST(AnalyzeEngineer, SmolLM2_135mHasTiedEmbeddingsAnd134_5MParameters) {
  // HuggingFaceTB/SmolLM2-135M: H 576, 30 layers, 9 heads of 64, 3 KV heads, FFN 1536, vocab
  // 49152, tied embeddings. Per layer: W_q, W_o 576 x 576 each, W_k, W_v 576 x 192 each, the MLP
  // 3 x 576 x 1536, two norms of 576.
  const double per_layer = 2.0 * 576 * 576 + 2.0 * 576 * 192 + 3.0 * 576 * 1536 + 2.0 * 576;
  const double embedding = 49152.0 * 576;
  const double expected = 30 * per_layer + embedding + 576;  // + the final norm; the head is the table
  const ModelShape& m = find_model("smollm2-135m");
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_EQ(m.head_dim(), 64);
  EXPECT_DOUBLE_EQ(static_cast<double>(m.total_params()), expected);
  EXPECT_NEAR(expected / 1e6, 134.5, 0.05);
  // Untied it would be 163 M: the count analyze gave before tied embeddings existed.
  ModelShape untied = m;
  untied.tied_embeddings = false;
  EXPECT_DOUBLE_EQ(static_cast<double>(untied.total_params()), expected + embedding);
  // fp16: held once (2 B per parameter) and streamed whole (the head reads the whole table).
  const WeightBytes bytes = weight_bytes(m, WeightFormat::fp16);
  EXPECT_DOUBLE_EQ(bytes.held, 2.0 * expected);
  EXPECT_DOUBLE_EQ(bytes.streamed, 2.0 * expected);
  // KV: 2 x 3 KV heads x 64 x 2 B = 768 B per token per layer.
  EXPECT_EQ(kv_cache_size(m, KvFormat::fp16, 1, 1).bytes_per_token_per_layer, 768);
}

TEST(AnalyzeEngineer, HeadDimOtherThanHiddenOverHeads) {
  // A Gemma-7B-like shape: H 3072, 16 heads of 256 (H_q = 4096 > H), MHA.
  ModelShape m;
  m.hidden_size = 3072;
  m.num_layers = 28;
  m.num_heads = 16;
  m.num_kv_heads = 16;
  m.head_dim_size = 256;
  m.ffn_size = 24576;
  m.vocab_size = 256000;
  m.validate();
  EXPECT_EQ(m.q_dim(), 4096);
  EXPECT_EQ(m.attention_params_per_layer(), 4 * int64_t{3072} * 4096);  // W_q, W_k, W_v: 3072 x 4096; W_o back
  EXPECT_EQ(kv_cache_size(m, KvFormat::fp16, 1, 1).bytes_per_token_per_layer, 2 * 16 * 256 * 2);
  // With head_dim given, heads need not divide H; without it they must.
  m.hidden_size = 1000;
  m.num_heads = 3;
  m.num_kv_heads = 1;
  m.head_dim_size = 64;
  EXPECT_NO_THROW(m.validate());
  m.head_dim_size = 0;
  expect_invalid([&] { m.validate(); }, "num_heads = 3: must divide hidden_size = 1000");
  m.head_dim_size = -4;
  expect_invalid([&] { m.validate(); }, "head_dim = -4");
}

TEST(AnalyzeEngineer, Fp32WeightsAndKvForACpu) {
  EXPECT_DOUBLE_EQ(bytes_per_weight(WeightFormat::fp32), 4.0);
  EXPECT_EQ(parse_weight_format("fp32"), WeightFormat::fp32);
  EXPECT_EQ(parse_kv_format("fp32"), KvFormat::fp32);
  const ModelShape& m = find_model("llama-7b");
  // fp32: every parameter 4 bytes, the embedding table too (6,738,415,616 x 4 held).
  const WeightBytes bytes = weight_bytes(m, WeightFormat::fp32);
  EXPECT_DOUBLE_EQ(bytes.held, 4.0 * 6738415616.0);
  EXPECT_DOUBLE_EQ(bytes.streamed, 4.0 * (6738415616.0 - 32000.0 * 4096));
  EXPECT_EQ(kv_cache_size(m, KvFormat::fp32, 1, 1).bytes_per_token_per_layer, 2 * 4096 * 4);  // 32 KiB
  // On a GPU fp32 math runs at the non-tensor fp32 peak (A100: 19.5 TFLOP/s).
  EXPECT_DOUBLE_EQ(compute_peak_gflops(find_device("a100-40"), WeightFormat::fp32), 19.5e3);
  EXPECT_DOUBLE_EQ(compute_peak_gflops(find_device("h100"), WeightFormat::fp32), 67e3);
}

TEST(AnalyzeEngineer, Fp8WeightsOnAnA100WarnAndUseThe16BitPeak) {
  const Analysis a100 = analyze(workload("llama-7b", "a100-40", 1, 2048, WeightFormat::fp8));
  EXPECT_DOUBLE_EQ(a100.decode.peak_gflops, 312e3);
  EXPECT_DOUBLE_EQ(a100.prefill.peak_gflops, 312e3);
  ASSERT_EQ(a100.warnings.size(), 1u);
  EXPECT_NE(a100.warnings[0].find("no FP8"), std::string::npos) << a100.warnings[0];
  EXPECT_NE(a100.warnings[0].find("312.0 TFLOP/s"), std::string::npos) << a100.warnings[0];
  std::ostringstream text;
  print_report(text, a100);
  EXPECT_NE(text.str().find("WARNING: A100 40GB SXM has no FP8 math"), std::string::npos) << text.str();
  const Analysis h100 = analyze(workload("llama-7b", "h100", 1, 2048, WeightFormat::fp8));
  EXPECT_DOUBLE_EQ(h100.decode.peak_gflops, 1979e3);
  EXPECT_TRUE(h100.warnings.empty());
}

TEST(AnalyzeEngineer, ThisMachineDecodesAtReadBandwidthAndWarnsWhenMeasuredUnderLoad) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("inferlab_analyze_busy_" + std::to_string(::getpid()) + ".json");
  Roofline r;
  r.peak_gflops = 80.0;
  r.triad_gbs = 20.0;
  r.read_gbs = 18.0;
  r.threads = 2;
  r.simd = "avx2";
  r.load_average = 4.5;  // > 2 threads: measured under load
  r.runs = 3;
  save_roofline(r, path);
  Workload w = workload("smollm2-135m", "a100-40", 1, 4096, WeightFormat::fp32, KvFormat::fp32);
  w.device = find_device("this", path.string());
  const Analysis a = analyze(w);
  EXPECT_DOUBLE_EQ(a.decode.bandwidth_gbs, 18.0);   // read
  EXPECT_DOUBLE_EQ(a.prefill.bandwidth_gbs, 20.0);  // triad
  EXPECT_DOUBLE_EQ(a.decode.peak_gflops, 80.0);     // a CPU's peak is fp32 already
  // The decode floor from independent arithmetic: fp32 weights streamed (134,515,008 x 4 B, the
  // tied head included) + 4096 cached tokens x 30 layers x 2 x 192 x 4 B, + the new token's KV.
  const double kv_per_token = 30.0 * 2 * 192 * 4;
  const double bytes = 134515008.0 * 4 + 4097.0 * kv_per_token;
  EXPECT_NEAR(a.decode.memory_seconds(), bytes / 18e9, 1e-12);
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_NE(a.warnings[0].find("measured under load (load average 4.50 > 2 threads)"), std::string::npos)
      << a.warnings[0];
  EXPECT_NE(w.device.peak_note.find("medians of 3 runs"), std::string::npos) << w.device.peak_note;
  // An idle measurement: no warning.
  r.load_average = 0.5;
  save_roofline(r, path);
  w.device = find_device("this", path.string());
  EXPECT_TRUE(analyze(w).warnings.empty());
  std::filesystem::remove(path);
}

TEST(AnalyzeEngineer, CustomDeviceFromItsCeilings) {
  const DeviceSpec d = custom_device(400, 50, 16);
  EXPECT_DOUBLE_EQ(d.bandwidth_gbs, 400);
  EXPECT_DOUBLE_EQ(d.peak_gflops, 50e3);
  EXPECT_DOUBLE_EQ(d.memory_gb, 16.0 * 1024 * 1024 * 1024 / 1e9);  // 17.18 GB
  EXPECT_DOUBLE_EQ(d.ridge_point(), 125.0);
  expect_invalid([] { custom_device(0, 50, 16); }, "bandwidth = 0");
  expect_invalid([] { custom_device(400, -1, 16); }, "peak = -1");
  expect_invalid([] { custom_device(400, 50, -2); }, "memory = -2");
  // Batch-1 decode of LLaMA-7B on it: 13,214,687,232 + 2049 x 524,288 B at 400 GB/s.
  Workload w = workload("llama-7b", "a100-40", 1, 2048);
  w.device = d;
  EXPECT_NEAR(analyze(w).decode.seconds(), (13214687232.0 + 2049.0 * 524288) / 400e9, 1e-12);
}

TEST(AnalyzeEngineer, LargestBatchAndContextThatFit) {
  // LLaMA-7B fp16 on an A100 80GB: 80e9 - 6,738,415,616 x 2 B of weights = 66,523,168,768 B for
  // KV at 524,288 B per token.
  const double budget = 80e9 - 2.0 * 6738415616.0;
  const Analysis a = analyze(workload("llama-7b", "a100-80", 4, 2048));
  ASSERT_TRUE(a.memory_known);
  EXPECT_EQ(a.max_batch_fits, static_cast<int64_t>(budget / (524288.0 * 2048)));  // 61
  EXPECT_EQ(a.max_batch_fits, 61);
  EXPECT_EQ(a.max_context_fits, static_cast<int64_t>(budget / (524288.0 * 4)));
  EXPECT_TRUE(a.fits);
  EXPECT_TRUE(analyze(workload("llama-7b", "a100-80", a.max_batch_fits, 2048)).fits);
  EXPECT_FALSE(analyze(workload("llama-7b", "a100-80", a.max_batch_fits + 1, 2048)).fits);
  EXPECT_TRUE(analyze(workload("llama-7b", "a100-80", 4, a.max_context_fits)).fits);
  EXPECT_FALSE(analyze(workload("llama-7b", "a100-80", 4, a.max_context_fits + 1)).fits);
  // Weights that do not fit: no batch fits, and a warning says so (LLaMA-2-13B fp32 on a 4090).
  const Analysis big = analyze(workload("llama-2-13b", "rtx4090", 1, 2048, WeightFormat::fp32));
  EXPECT_EQ(big.max_batch_fits, 0);
  EXPECT_FALSE(big.fits);
  ASSERT_FALSE(big.warnings.empty());
  EXPECT_NE(big.warnings[0].find("do not fit"), std::string::npos);
  // A custom device without memory: unknown.
  Workload w = workload("llama-7b", "a100-40", 1, 2048);
  w.device = custom_device(1000, 100, 0);
  EXPECT_FALSE(analyze(w).memory_known);
}

TEST(AnalyzeEngineer, KvEqualsWeightsCrossoverAsABatchSize) {
  // Llama-3-8B fp16: streamed = 32 x (2·4096² + 2·4096·1024 + 3·4096·14336) + 32·8192 + 4096 +
  // 128256·4096 parameters x 2 B; KV per token = 32 layers x 2 x 8 x 128 x 2 B = 131,072 B.
  const double streamed = 2.0 * (32.0 * (2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 14336) +
                                 32.0 * 8192 + 4096 + 128256.0 * 4096);
  const Analysis a = analyze(workload("llama-3-8b", "h100", 8, 8192));
  EXPECT_DOUBLE_EQ(a.weights.streamed, streamed);
  EXPECT_NEAR(a.kv_equals_weights_batch, streamed / 131072.0 / 8192.0, 1e-9);  // ≈ 14.0 sequences
  EXPECT_NEAR(a.kv_equals_weights_batch, 13.98, 0.01);
  // At that batch a step reads as many KV bytes as weight bytes.
  const Analysis at = analyze(workload("llama-3-8b", "h100", 14, 8192));
  EXPECT_NEAR(at.decode.kv_read_bytes / at.decode.weight_bytes, 14.0 / a.kv_equals_weights_batch, 1e-9);
}

TEST(AnalyzeEngineer, TokenCountsTakeK) {
  EXPECT_EQ(parse_token_count("context", "4096"), 4096);
  EXPECT_EQ(parse_token_count("context", "32k"), 32 * 1024);
  EXPECT_EQ(parse_token_count("context", "128K"), 128 * 1024);
  EXPECT_EQ(parse_token_count("prompt", "1.5k"), 1536);
  for (const char* bad : {"32x", "1.5", "k", "", "1.0001k", "2e3", "32 k"}) {
    expect_invalid([&] { parse_token_count("context", bad); }, std::string("context = ") + bad + ": must be a token count");
  }
}

TEST(AnalyzeEngineer, JsonCarriesFormatsFitsWarningsAndAssumptions) {
  const std::string json = to_json(analyze(workload("llama-7b", "a100-40", 1, 2048, WeightFormat::fp8)));
  const Json parsed = Json::parse(json);
  ASSERT_TRUE(parsed["other_formats"].is_array());
  EXPECT_EQ(parsed["other_formats"].front()["label"], "as given");
  EXPECT_EQ(parsed["other_formats"].back()["label"], "int4 weights + int8 KV");
  for (const char* part :
       {"\"label\": \"int4 weights + int8 KV\"", "\"fits\": {\"memory_bytes\": 40000000000, \"fits\": true",
        "\"max_batch\": ", "\"kv_equals_weights_batch\": ", "\"warnings\": [\"A100 40GB SXM has no FP8 math",
        "\"assumptions\": [\"a forward pass streams every weight once", "\"tied_embeddings\": false"}) {
    EXPECT_NE(json.find(part), std::string::npos) << part << "\n" << json;
  }
  const std::string catalog = catalog_json();
  const Json parsed_catalog = Json::parse(catalog);
  EXPECT_EQ(parsed_catalog.begin().key(), "models");
  EXPECT_TRUE(parsed_catalog["models"].is_array());
  for (const char* part : {"\"key\": \"smollm2-135m\"", "\"params\": 134515008", "\"devices\": [", "\"key\": \"h200\"",
                           "\"weight_formats\": [\"fp32\""}) {
    EXPECT_NE(catalog.find(part), std::string::npos) << part << "\n" << catalog;
  }
}

TEST(AnalyzeEngineer, AuditNamesTheArticleByTitleAndPointsInsideTheRepository) {
  std::ostringstream text;
  print_audit(text, article_audit());
  EXPECT_NE(text.str().find("《大模型推理优化：Prefill与Decode机制详解》"), std::string::npos);
  EXPECT_NE(text.str().find("LLM inference optimization: Prefill and Decode explained"), std::string::npos);
  EXPECT_NE(text.str().find("docs/pages/article-errata.md"), std::string::npos);
  std::ostringstream markdown;
  print_audit_markdown(markdown, article_audit());
  for (const std::string& out : {text.str(), markdown.str()}) {
    EXPECT_EQ(out.find("seed/"), std::string::npos);
    EXPECT_EQ(out.find("../"), std::string::npos);
    EXPECT_EQ(out.find(".txt"), std::string::npos);
  }
}

}  // namespace
}  // namespace inferlab::analysis
