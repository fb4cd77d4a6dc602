// `inferlab attention` and `inferlab tour` as a user runs them: .npy files in, .npy out,
// compared with the float64 oracle; bad input gives a clear message and a non-zero exit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/compare.h"
#include "common/half.h"
#include "common/json.h"
#include "common/npy.h"
#include "kernels/attention/attention.h"
#include "kernels/decode/decode.h"
#include "kernels/kv/kv_factories.h"
#include "tests/support/run_inferlab.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using Result = testing::CommandResult;

Result run(const std::string& arguments, const std::string& environment = "") {
  return testing::run_command(INFERLAB_EXE, arguments, environment);
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("inferlab_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(Cli, AttentionOnNpyFilesMatchesTheOracleOnEveryBackendItNames) {
  testing::SeededRng rng;
  const Tensor<float> q = rng.normal_tensor({4, 37, 80});
  const Tensor<float> k = rng.normal_tensor({2, 37, 80});
  const Tensor<float> v = rng.normal_tensor({2, 37, 80});
  write_npy(path("q.npy"), q);
  write_npy(path("k.npy"), k);
  write_npy(path("v.npy"), v);
  const Tensor<double> expected = attention_reference(q, k, v, true);
  for (const char* choice : {"--version cpu/naive --backend cpu", "--version cuda/tiled --backend sim"}) {
    const Result r = run("attention --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy") +
                         " --causal " + choice + " --out " + path("o.npy"));
    ASSERT_EQ(r.exit_code, 0) << choice << "\n" << r.output;
    const Tensor<float> out = read_npy_float(path("o.npy"));
    const Comparison c = compare_to_oracle(out, expected, tolerance_for(Precision::fp32));
    EXPECT_TRUE(c.ok) << choice << ": " << c.report();
    std::filesystem::remove(path("o.npy"));
  }
}

// `inferlab attention --backend sim` with no --version runs the sim default, chapter 02's first
// CUDA kernel (it once asked for cpu/naive on sim and failed), as `decode` does.
TEST_F(Cli, AttentionOnSimWithoutAVersionRunsTheCudaKernel) {
  testing::SeededRng rng;
  const Tensor<float> q = rng.normal_tensor({4, 11, 16});
  const Tensor<float> k = rng.normal_tensor({2, 11, 16});
  const Tensor<float> v = rng.normal_tensor({2, 11, 16});
  write_npy(path("q.npy"), q);
  write_npy(path("k.npy"), k);
  write_npy(path("v.npy"), v);
  const Result r = run("attention --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("v.npy") +
                       " --causal --backend sim --out " + path("o.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cuda/naive (sim)"), std::string::npos) << r.output;
  const Comparison c =
      compare_to_oracle(read_npy_float(path("o.npy")), attention_reference(q, k, v, true), tolerance_for(Precision::fp32));
  EXPECT_TRUE(c.ok) << c.report();
}

TEST_F(Cli, BadInputGivesAClearMessage) {
  testing::SeededRng rng;
  write_npy(path("q.npy"), rng.normal_tensor({4, 5, 16}));
  write_npy(path("k.npy"), rng.normal_tensor({3, 5, 16}));
  const Result gqa = run("attention --q " + path("q.npy") + " --k " + path("k.npy") + " --v " + path("k.npy") +
                         " --out " + path("o.npy"));
  EXPECT_EQ(gqa.exit_code, 2);
  EXPECT_NE(gqa.output.find("num_heads = 4: must be a multiple of num_kv_heads = 3"), std::string::npos) << gqa.output;
  const Result missing = run("attention --q " + path("nope.npy") + " --k x --v y --out z");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("cannot be opened"), std::string::npos) << missing.output;
  const Result version = run("attention --q " + path("q.npy") + " --k " + path("q.npy") + " --v " + path("q.npy") +
                             " --version cpu/nope --out " + path("o.npy"));
  EXPECT_EQ(version.exit_code, 2);
  EXPECT_NE(version.output.find("known: cpu/naive"), std::string::npos) << version.output;
  const Result option = run("attention --bogus 1");
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_NE(option.output.find("--bogus"), std::string::npos) << option.output;
  EXPECT_EQ(run("no-such-command").exit_code, 2);
}

TEST_F(Cli, QuickTourRunsAndEndsWithTheTable) {
  // A private roofline file: the tour measures one (quickly) instead of reading the user's.
  const Result r = run("tour --quick", "INFERLAB_ROOFLINE=" + path("roofline.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Chapter 01"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Chapter 06"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Chapter 08"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Chapter 09"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Chapter 10"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Chapter 11"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("chapter 11, packed"), std::string::npos) << r.output;  // the GEMM, both kernels
  EXPECT_NE(r.output.find("The split models are the model"), std::string::npos) << r.output;  // tp 3, pp 2, tp 2
  EXPECT_NE(r.output.find("Chapter 12"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("with and without speculation: the same"), std::string::npos) << r.output;  // checked
  EXPECT_EQ(r.output.find("DIFFERENT"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("WRONG"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("% roof"), std::string::npos) << r.output;
}

// `inferlab decode` (chapter 03): a ragged batch with GQA, caches written as full
// [batch, num_kv_heads, max_seq_len, head_dim] arrays whose unused tail holds garbage the
// versions must not read, lengths as int32 and int64; fp32 and float16 files.
TEST_F(Cli, DecodeOnNpyFilesMatchesTheOracleOnEveryBackendItNames) {
  testing::SeededRng rng;
  const int64_t batch = 3, heads = 8, kv_heads = 2, max_seq_len = 21, d = 80;
  const Tensor<float> q = rng.normal_tensor({batch, heads, d});
  Tensor<float> k = rng.normal_tensor({batch, kv_heads, max_seq_len, d});
  Tensor<float> v = rng.normal_tensor({batch, kv_heads, max_seq_len, d});
  const std::vector<int64_t> lengths{5, 21, 1};
  for (int64_t b = 0; b < batch; ++b)  // garbage past each length: a version that reads it fails
    for (int64_t g = 0; g < kv_heads; ++g)
      for (int64_t i = (b * kv_heads + g) * max_seq_len * d + lengths[size_t(b)] * d;
           i < (b * kv_heads + g + 1) * max_seq_len * d; ++i)
        k[i] = v[i] = 1e30f;
  write_npy(path("q.npy"), q);
  write_npy(path("k.npy"), k);
  write_npy(path("v.npy"), v);
  write_npy(path("lengths32.npy"), Tensor<int32_t>({batch}, std::vector<int32_t>{5, 21, 1}));
  write_npy(path("lengths64.npy"), Tensor<int64_t>({batch}, lengths));
  const Tensor<double> expected = decode_reference(q, make_kv_cache(k, v, lengths, KvDtype::fp32));
  for (const char* choice : {"--version cpu/decode --backend cpu", "--version cpu/decode_simd --backend cpu",
                             "--version cuda/decode --backend sim"}) {
    for (const char* lengths_file : {"lengths32.npy", "lengths64.npy"}) {
      const Result r = run("decode --q " + path("q.npy") + " --k-cache " + path("k.npy") + " --v-cache " +
                           path("v.npy") + " --lengths " + path(lengths_file) + " " + choice + " --out " + path("o.npy"));
      ASSERT_EQ(r.exit_code, 0) << choice << "\n" << r.output;
      EXPECT_NE(r.output.find("fp32 cache"), std::string::npos) << r.output;
      const Tensor<float> out = read_npy_float(path("o.npy"));
      const Comparison c = compare_to_oracle(out, expected, tolerance_for(Precision::fp32));
      EXPECT_TRUE(c.ok) << choice << " " << lengths_file << ": " << c.report();
      std::filesystem::remove(path("o.npy"));
    }
  }
  // --block-size N (chapter 06): the same cache paged over scattered blocks gives the same output
  // (the same bits: cpu/decode's loops do not depend on where a row lives), and says so.
  const std::string base = "decode --q " + path("q.npy") + " --k-cache " + path("k.npy") + " --v-cache " +
                           path("v.npy") + " --lengths " + path("lengths64.npy") + " --version cpu/decode --out ";
  ASSERT_EQ(run(base + path("contiguous.npy")).exit_code, 0);
  for (const char* block : {"1", "7", "16"}) {
    const Result r = run(base + path("paged.npy") + " --block-size " + block);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("paged: "), std::string::npos) << r.output;
    const Tensor<float> paged = read_npy_float(path("paged.npy")), contiguous = read_npy_float(path("contiguous.npy"));
    EXPECT_EQ(std::memcmp(paged.data(), contiguous.data(), size_t(paged.size()) * sizeof(float)), 0)
        << "block size " << block << ": the paged output differs from the contiguous one";
  }
  const Result bad = run(base + path("paged.npy") + " --block-size 0");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--block-size"), std::string::npos) << bad.output;
  // float16 files: an fp16 cache, checked with the fp16 tolerance.
  auto write_f16 = [&](const std::string& name, const Tensor<float>& x) {
    std::vector<uint16_t> bits(size_t(x.size()));
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = float_to_half_bits(x[int64_t(i)]);
    write_npy_f16(path(name), x.shape(), bits);
  };
  write_f16("k16.npy", k);
  write_f16("v16.npy", v);
  const Result r = run("decode --q " + path("q.npy") + " --k-cache " + path("k16.npy") + " --v-cache " +
                       path("v16.npy") + " --lengths " + path("lengths32.npy") +
                       " --version cuda/decode --backend sim --out " + path("o.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("fp16 cache"), std::string::npos) << r.output;
  const Comparison c = compare_to_oracle(read_npy_float(path("o.npy")), expected, tolerance_for(Precision::fp16));
  EXPECT_TRUE(c.ok) << c.report();
}

TEST_F(Cli, DecodeBadInputGivesAClearMessage) {
  testing::SeededRng rng;
  write_npy(path("q.npy"), rng.normal_tensor({2, 4, 16}));
  write_npy(path("k.npy"), rng.normal_tensor({2, 2, 6, 16}));
  write_npy(path("long.npy"), Tensor<int32_t>({2}, std::vector<int32_t>{3, 7}));
  write_npy(path("empty.npy"), Tensor<int64_t>({2}, std::vector<int64_t>{3, 0}));
  write_npy(path("float.npy"), Tensor<float>({2}, 3.0f));
  const std::string common = "decode --q " + path("q.npy") + " --k-cache " + path("k.npy") + " --v-cache " +
                             path("k.npy") + " --out " + path("o.npy") + " --lengths ";
  const Result too_long = run(common + path("long.npy"));
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_NE(too_long.output.find("lengths[1] = 7: must be in [0, max_seq_len = 6]"), std::string::npos)
      << too_long.output;
  const Result empty = run(common + path("empty.npy"));
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.output.find("lengths[1] = 0: must be > 0"), std::string::npos) << empty.output;
  const Result floats = run(common + path("float.npy"));
  EXPECT_EQ(floats.exit_code, 2);
  EXPECT_NE(floats.output.find("is not an integer type"), std::string::npos) << floats.output;
  const Result version = run(common + path("long.npy") + " --version cpu/nope");
  EXPECT_EQ(version.exit_code, 2);
  EXPECT_NE(version.output.find("known: cpu/decode (cpu, fp32)"), std::string::npos) << version.output;
  const Result missing = run("decode --q " + path("q.npy"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("--k-cache: is required"), std::string::npos) << missing.output;
}

// `inferlab decode --backend sim` with no --version runs the sim default, the chapter's CUDA
// kernel (it once asked for cpu/decode on sim and failed): fp32 and fp16 files, and an int8 cache.
TEST_F(Cli, DecodeOnSimWithoutAVersionRunsTheCudaKernel) {
  testing::SeededRng rng;
  const int64_t batch = 2, heads = 4, kv_heads = 2, max_seq_len = 19, d = 32;
  const Tensor<float> q = rng.normal_tensor({batch, heads, d});
  const Tensor<float> k = rng.normal_tensor({batch, kv_heads, max_seq_len, d});
  const Tensor<float> v = rng.normal_tensor({batch, kv_heads, max_seq_len, d});
  const std::vector<int64_t> lengths{rng.integer(1, max_seq_len), max_seq_len};
  write_npy(path("q.npy"), q);
  write_npy(path("k.npy"), k);
  write_npy(path("v.npy"), v);
  write_npy(path("lengths.npy"), Tensor<int64_t>({batch}, lengths));
  std::vector<uint16_t> k_bits(size_t(k.size())), v_bits(size_t(v.size()));
  for (size_t i = 0; i < k_bits.size(); ++i) {
    k_bits[i] = float_to_half_bits(k[int64_t(i)]);
    v_bits[i] = float_to_half_bits(v[int64_t(i)]);
  }
  write_npy_f16(path("k16.npy"), k.shape(), k_bits);
  write_npy_f16(path("v16.npy"), v.shape(), v_bits);
  const auto files = [&](const char* k_file, const char* v_file) {
    return "decode --q " + path("q.npy") + " --k-cache " + path(k_file) + " --v-cache " + path(v_file) + " --lengths " +
           path("lengths.npy") + " --out " + path("o.npy") + " --backend sim";
  };
  struct Choice {
    std::string command, names;
    Tensor<double> expected;
    Precision precision;
  };
  const std::vector<Choice> choices = {
      {files("k.npy", "v.npy"), "cuda/decode (sim, fp32 cache)",
       decode_reference(q, make_kv_cache(k, v, lengths, KvDtype::fp32)), Precision::fp32},
      {files("k16.npy", "v16.npy"), "cuda/decode (sim, fp16 cache)",
       decode_reference(q, make_kv_cache(k, v, lengths, KvDtype::fp32)), Precision::fp16},
      {files("k.npy", "v.npy") + " --cache int8", "cuda/decode_int8 (sim, int8 cache",
       decode_reference(q, make_kv_cache(k, v, lengths, KvFormat::int8(KeyScaling::per_token))), Precision::fp32},
  };
  for (const Choice& choice : choices) {
    const Result r = run(choice.command);
    ASSERT_EQ(r.exit_code, 0) << choice.command << "\n" << r.output;
    EXPECT_NE(r.output.find(choice.names), std::string::npos) << r.output;
    const Comparison c =
        compare_to_oracle(read_npy_float(path("o.npy")), choice.expected, tolerance_for(choice.precision));
    EXPECT_TRUE(c.ok) << choice.command << ": " << c.report();
    std::filesystem::remove(path("o.npy"));
  }
}

// `inferlab decode --cache int8|int8-channel|fp8` (chapter 04): the fp32 files quantized on load,
// each INT8 / FP8 version against the float64 decode of the same quantized cache (the
// quantization itself is chapter 04's tests' business); the report names the cache and the
// saturations; a version that does not exist for the cache is refused, naming those that do.
TEST_F(Cli, DecodeWithAQuantizedCacheMatchesTheOracleOfThatCache) {
  testing::SeededRng rng;
  const int64_t batch = 2, heads = 8, kv_heads = 2, max_seq_len = 13, d = 64;
  const Tensor<float> q = rng.normal_tensor({batch, heads, d});
  Tensor<float> k = rng.normal_tensor({batch, kv_heads, max_seq_len, d});
  const Tensor<float> v = rng.normal_tensor({batch, kv_heads, max_seq_len, d});
  for (int64_t i = 3; i < k.size(); i += d) k[i] *= 20.0f;  // an outlier channel
  const std::vector<int64_t> lengths{13, 4};
  write_npy(path("q.npy"), q);
  write_npy(path("k.npy"), k);
  write_npy(path("v.npy"), v);
  write_npy(path("lengths.npy"), Tensor<int64_t>({batch}, lengths));
  const std::string files = "decode --q " + path("q.npy") + " --k-cache " + path("k.npy") + " --v-cache " +
                            path("v.npy") + " --lengths " + path("lengths.npy") + " --out " + path("o.npy") + " ";
  struct Choice {
    std::string options, cache;
    Tensor<double> expected;
  };
  const std::vector<Choice> choices = {
      {"--cache int8", "int8 cache",
       decode_reference(q, make_kv_cache(k, v, lengths, KvFormat::int8(KeyScaling::per_token)))},
      {"--cache int8-channel --backend sim --version cuda/decode_int8", "int8-channel cache",
       decode_reference(q, make_kv_cache(k, v, lengths, KvFormat::int8(KeyScaling::per_channel)))},
      {"--cache fp8 --backend sim", "fp8 cache", decode_reference(q, make_kv_cache(k, v, lengths, KvFormat::fp8()).dequantized())},
  };
  for (const Choice& choice : choices) {
    const Result r = run(files + choice.options);
    ASSERT_EQ(r.exit_code, 0) << choice.options << "\n" << r.output;
    EXPECT_NE(r.output.find(choice.cache), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("0 values saturated"), std::string::npos) << r.output;
    const Comparison c = compare_to_oracle(read_npy_float(path("o.npy")), choice.expected, tolerance_for(Precision::fp32));
    EXPECT_TRUE(c.ok) << choice.options << ": " << c.report();
    std::filesystem::remove(path("o.npy"));
  }
  const Result no_cpu_fp8 = run(files + "--cache fp8 --backend cpu");
  EXPECT_EQ(no_cpu_fp8.exit_code, 2);
  EXPECT_NE(no_cpu_fp8.output.find("cuda/decode_fp8 (sim, fp8)"), std::string::npos) << no_cpu_fp8.output;
  const Result bad = run(files + "--cache int4");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--cache = int4: must be int8"), std::string::npos) << bad.output;
}

// `inferlab analyze` (chapter 06's memory arithmetic): the capacity lines of the report, and the
// --kv-waste table. LLaMA-7B on an A100 40GB: 40 GB − 13.48 GB of weights = 26.52 GB of KV,
// 24 one-GiB contiguous slots of 2048 tokens; 16 GiB of KV holds 16 such slots.
TEST_F(Cli, AnalyzeReportsKvCapacityAndTheWasteTable) {
  const Result r = run("analyze --model llama-7b --device a100-40 --context 2048");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* expected : {"capacity: 26.52 GB left after the weights holds ShareGPT-like sequences",
                               "contiguous 2048-token slots", "24 sequences", "paged, 16-token blocks",
                               "% of reserved KV holds tokens (x"}) {
    EXPECT_NE(r.output.find(expected), std::string::npos) << expected << "\n" << r.output;
  }
  const Result json = run("analyze --model llama-7b --device a100-40 --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const Json parsed = Json::parse(json.output);
  EXPECT_GT(parsed["kv_capacity"]["budget_bytes"].get<double>(), 26e9) << json.output;
  EXPECT_EQ(parsed["kv_capacity"]["contiguous"]["sequences_fit"], 24) << json.output;
  EXPECT_NE(json.output.find("\"contiguous\": {\"sequences_fit\": 24,"), std::string::npos) << json.output;
  // The weights of LLaMA-2-13B (26 GB) leave nothing on a 24 GB RTX 4090.
  const Result full = run("analyze --model llama-2-13b --device rtx4090");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  EXPECT_NE(full.output.find("the weights leave no device memory for the KV cache"), std::string::npos) << full.output;

  const Result table = run("analyze --kv-waste --model llama-7b --requests 2000");
  ASSERT_EQ(table.exit_code, 0) << table.output;
  for (const char* expected : {"512.0 KiB per token, max_seq_len 2048, KV budget 16.00 GiB", "2,000 requests drawn from ShareGPT",
                               "contiguous  2048   1.000 GiB", "paged       16", "parallel sampling, n = 4",
                               "341-token system prompt"}) {
    EXPECT_NE(table.output.find(expected), std::string::npos) << expected << "\n" << table.output;
  }
  const Result rows = run("analyze --kv-waste --lengths alpaca --kv-budget-gib 8 --requests 500 --json");
  ASSERT_EQ(rows.exit_code, 0) << rows.output;
  EXPECT_NE(rows.output.find("\"model\": \"llama-7b\", \"kv\": \"fp16\""), std::string::npos) << rows.output;
  EXPECT_NE(rows.output.find("\"lengths\": \"alpaca\""), std::string::npos) << rows.output;
  EXPECT_NE(rows.output.find("\"scheme\": \"contiguous\", \"block_size\": 0"), std::string::npos) << rows.output;
  EXPECT_NE(rows.output.find("\"sequences_fit\": 8}"), std::string::npos) << rows.output;  // 8 GiB / 1 GiB slots

  const std::pair<const char*, const char*> bad[] = {
      {"analyze --kv-waste --kv-budget-gib 0", "kv-budget-gib = 0"},
      {"analyze --kv-waste --lengths lmsys", "lengths = lmsys: unknown"},
      {"analyze --kv-waste --requests 0", "requests = 0"},
      {"analyze --kv-waste --context 1", "max_seq_len = 1"},
      {"analyze --requests 5", "--requests: only with --kv-waste"},
  };
  for (const auto& [arguments, message] : bad) {
    const Result e = run(arguments);
    EXPECT_EQ(e.exit_code, 2) << arguments << "\n" << e.output;
    EXPECT_NE(e.output.find(message), std::string::npos) << arguments << "\n" << e.output;
  }
}

// Every command answers --help and -h with its own usage (exit 0, nothing run), whatever else is
// on the line; an unknown option is reported as unknown, naming the known ones, whether or not a
// value follows it; a known option without its value "needs a value".
TEST_F(Cli, EveryCommandAnswersHelpWithItsOwnUsage) {
  for (const char* command :
       {"tour", "roofline", "attention", "decode", "versions", "analyze", "generate", "chat", "serve"}) {
    for (const char* flag : {"--help", "-h"}) {
      const Result r = run(std::string(command) + " " + flag);
      EXPECT_EQ(r.exit_code, 0) << command << " " << flag << "\n" << r.output;
      EXPECT_NE(r.output.find(std::string("usage: inferlab ") + command), std::string::npos)
          << command << " " << flag << "\n" << r.output;
    }
    // `help COMMAND` is the same text; --help wins over a bad line.
    EXPECT_EQ(run(std::string("help ") + command).output, run(std::string(command) + " --help").output) << command;
    const Result bad = run(std::string(command) + " --bogus --help");
    EXPECT_EQ(bad.exit_code, 0) << command << "\n" << bad.output;
  }
  for (const char* global : {"help", "--help", "-h"}) {
    const Result r = run(global);
    EXPECT_EQ(r.exit_code, 0) << global;
    EXPECT_NE(r.output.find("usage: inferlab <command>"), std::string::npos) << r.output;
  }
  EXPECT_NE(run("decode --help").output.find("--block-size N"), std::string::npos);
  EXPECT_NE(run("roofline --help").output.find("median"), std::string::npos);
  // generate, chat and serve: the usage is written from the option tables, the shared ones included.
  const std::string generate = run("generate --help").output, serve = run("serve --help").output;
  for (const char* line : {"--block-size N          tokens per KV block (default 16)", "--max-new-tokens N", "--tp N"})
    EXPECT_NE(generate.find(line), std::string::npos) << line << "\n" << generate;
  for (const char* line : {"--block-size N          tokens per KV block (default 16)", "--port N", "--pp N"})
    EXPECT_NE(serve.find(line), std::string::npos) << line << "\n" << serve;
  EXPECT_NE(run("chat --help").output.find("--max-new-tokens N      tokens to generate at most (default 256)"),
            std::string::npos);
}

TEST_F(Cli, UnknownOptionsAreReportedAsUnknownNotAsNeedingAValue) {
  for (const char* command :
       {"decode", "attention", "analyze", "roofline", "tour", "versions", "generate", "chat", "serve"}) {
    for (const char* line : {" --bogus", " --bogus 1", " --bogus --help-me"}) {
      const Result r = run(std::string(command) + line);
      EXPECT_EQ(r.exit_code, 2) << command << line << "\n" << r.output;
      EXPECT_NE(r.output.find("option --bogus: unknown (known: "), std::string::npos) << command << line << "\n"
                                                                                       << r.output;
      EXPECT_EQ(r.output.find("needs a value"), std::string::npos) << command << line << "\n" << r.output;
    }
  }
  const Result known = run("decode --q");
  EXPECT_EQ(known.exit_code, 2);
  EXPECT_NE(known.output.find("option --q: needs a value"), std::string::npos) << known.output;
  // An option followed by another option has no value (the next one is not taken as it).
  const Result next = run("attention --q --causal");
  EXPECT_EQ(next.exit_code, 2);
  EXPECT_NE(next.output.find("option --q: needs a value"), std::string::npos) << next.output;
  const Result stray = run("versions extra");
  EXPECT_EQ(stray.exit_code, 2);
  EXPECT_NE(stray.output.find("argument 'extra': expected an --option"), std::string::npos) << stray.output;
  const Result list = run("versions --bogus");
  EXPECT_NE(list.output.find("(known: --help)"), std::string::npos) << list.output;
  const Result analyze = run("analyze --bogus");
  for (const char* name : {"--model", "--head-dim", "--tied-embeddings", "--bandwidth", "--help"}) {
    EXPECT_NE(analyze.output.find(name), std::string::npos) << name << "\n" << analyze.output;
  }
}

}  // namespace
}  // namespace inferlab
