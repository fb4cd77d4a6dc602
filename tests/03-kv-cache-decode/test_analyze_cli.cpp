// `inferlab analyze` as a user runs it: the report, --list, --json, --audit, and bad input
// (exit code 2 and a message naming the argument and its value).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/support/run_inferlab.h"

namespace inferlab {
namespace {

using Result = testing::CommandResult;

Result run(const std::string& arguments) { return testing::run_command(INFERLAB_EXE, arguments); }

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(AnalyzeCli, ReportForLlama7bOnA100) {
  const Result r = run("analyze --model llama-7b --batch 1 --context 2048 --device a100-40");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 16 KiB per token per layer, 32 MiB per layer and 1 GiB per sequence at 2048 tokens; decode
  // floor (13,214,687,232 + 2049 · 524,288) B at 1555 GB/s = 108.8 token/s.
  for (const char* expected : {"16.00 KiB", "32.00 MiB", "1.000 GiB", "memory-bound", "compute-bound", "108.8 tokens/s",
                               "ridge point 200.6"}) {
    EXPECT_TRUE(contains(r.output, expected)) << expected << "\n" << r.output;
  }
}

TEST(AnalyzeCli, CustomShapeGqaAndFormats) {
  // --model llama-7b --kv-heads 8: 2 · 8 · 128 · 1 B + 2 · 8 · 2 B of scales = 2080 B in int8.
  const Result r = run("analyze --model llama-7b --kv-heads 8 --kv int8 --weights int4 --device h100");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "2.031 KiB")) << r.output;
  EXPECT_TRUE(contains(r.output, "(modified)")) << r.output;
  // A custom shape from flags alone: H = 2048, 8 heads → head_dim 256.
  const Result custom = run("analyze --hidden 2048 --layers 4 --heads 8 --device a100-80 --json");
  ASSERT_EQ(custom.exit_code, 0) << custom.output;
  EXPECT_TRUE(contains(custom.output, "\"head_dim\": 256")) << custom.output;
  EXPECT_TRUE(contains(custom.output, "\"ffn_size\": 5632")) << custom.output;  // ceil(8·2048/3) → 5632
}

TEST(AnalyzeCli, ListJsonAndAudit) {
  const Result list = run("analyze --list");
  ASSERT_EQ(list.exit_code, 0) << list.output;
  for (const char* expected :
       {"llama-7b", "llama-2-13b", "llama-3-8b", "a100-40", "a100-80", "h100", "h200", "rtx4090", "this"}) {
    EXPECT_TRUE(contains(list.output, expected)) << expected << "\n" << list.output;
  }
  const Result json = run("analyze --model llama-3-8b --batch 8 --context 4096 --device h200 --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  EXPECT_EQ(json.output.front(), '{') << json.output;
  EXPECT_TRUE(contains(json.output, "\"bytes_per_token_per_layer\": 4096")) << json.output;
  const Result audit = run("analyze --audit");
  ASSERT_EQ(audit.exit_code, 0) << audit.output;
  EXPECT_TRUE(contains(audit.output, "article says: 32 KB")) << audit.output;
  EXPECT_TRUE(contains(audit.output, "[WRONG]")) << audit.output;
  const Result markdown = run("analyze --audit --markdown");
  ASSERT_EQ(markdown.exit_code, 0) << markdown.output;
  EXPECT_TRUE(contains(markdown.output, "| § | figure |")) << markdown.output;
}

TEST(AnalyzeCli, BadInputExitsWith2AndNamesTheArgument) {
  const std::pair<const char*, const char*> cases[] = {
      {"analyze --batch 0", "batch = 0: must be > 0"},
      {"analyze --batch two", "batch = two: must be an integer"},
      {"analyze --model gpt-9", "model = gpt-9: unknown"},
      {"analyze --device tpu", "device = tpu: unknown"},
      {"analyze --weights int3", "weights = int3"},
      {"analyze --kv int4", "kv = int4"},
      {"analyze --kv-heads 5", "num_kv_heads = 5: must divide num_heads = 32"},
      {"analyze --prompt 0", "prompt = 0"},
      {"analyze --layers 4", "option --hidden: is required"},
      {"analyze --device this --roofline /nonexistent/roofline.json", "inferlab roofline"},
      {"analyze --bogus 1", "--bogus"},
  };
  for (const auto& [arguments, message] : cases) {
    const Result r = run(arguments);
    EXPECT_EQ(r.exit_code, 2) << arguments << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, message)) << arguments << "\n" << r.output;
  }
}

// ---- as an engineer uses it --------------------------------------------------------------------

TEST(AnalyzeCli, HelpListsEveryFlag) {
  const Result help = run("analyze --help");
  ASSERT_EQ(help.exit_code, 0) << help.output;
  const Result global = run("help");
  for (const char* flag : {"--hidden", "--layers", "--heads", "--kv-heads", "--head-dim", "--ffn", "--vocab",
                           "--tied-embeddings", "--bandwidth", "--peak", "--memory", "--roofline", "--markdown",
                           "--json", "--list", "--audit", "32k", "fp32"}) {
    EXPECT_TRUE(contains(help.output, flag)) << flag << "\n" << help.output;
    EXPECT_TRUE(contains(global.output, flag)) << flag << "\n" << global.output;
  }
  EXPECT_EQ(run("analyze -h").output, help.output);
}

TEST(AnalyzeCli, ListJsonIsJson) {
  const Result r = run("analyze --list --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.front(), '{') << r.output;
  EXPECT_TRUE(contains(r.output, "\"key\": \"llama-3-8b\"")) << r.output;
  EXPECT_TRUE(contains(r.output, "\"key\": \"a100-40\"")) << r.output;
}

TEST(AnalyzeCli, ContextInKAndCustomShapeAndDevice) {
  // 32k = 32 x 1024 tokens: Llama-3-8B's KV of one sequence is 32768 x 131,072 B = 4 GiB.
  const Result r = run("analyze --model llama-3-8b --device h100 --context 32k --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "\"context\": 32768")) << r.output;
  EXPECT_TRUE(contains(r.output, "\"bytes_per_sequence\": 4294967296")) << r.output;
  // SmolLM2-135M from flags alone: tied embeddings, head_dim 64 → 134,515,008 parameters
  // (30 x (2·576·576 + 2·576·192 + 3·576·1536 + 2·576) + 49152·576 + 576).
  const Result smol = run("analyze --hidden 576 --layers 30 --heads 9 --kv-heads 3 --head-dim 64 --ffn 1536 "
                          "--vocab 49152 --tied-embeddings --json");
  ASSERT_EQ(smol.exit_code, 0) << smol.output;
  EXPECT_TRUE(contains(smol.output, "\"params\": 134515008")) << smol.output;
  EXPECT_TRUE(contains(smol.output, "\"tied_embeddings\": true")) << smol.output;
  const Result preset = run("analyze --model smollm2-135m --weights fp32 --kv fp32 --bandwidth 20 --peak 0.08");
  ASSERT_EQ(preset.exit_code, 0) << preset.output;
  EXPECT_TRUE(contains(preset.output, "134.5 M parameters (134,515,008)")) << preset.output;
  EXPECT_TRUE(contains(preset.output, "custom device")) << preset.output;
  // Custom device: decode floor of LLaMA-7B batch 1 at 400 GB/s = 400e9 / (13,214,687,232 + 2049 x
  // 524,288) B = 27.99 tokens/s.
  const Result device = run("analyze --bandwidth 400 --peak 50 --memory 16");
  ASSERT_EQ(device.exit_code, 0) << device.output;
  EXPECT_TRUE(contains(device.output, "27.99 tokens/s")) << device.output;
  EXPECT_TRUE(contains(device.output, "17.2 GB")) << device.output;  // 16 GiB
  // Overriding a built-in's bandwidth: named "(modified)".
  const Result modified = run("analyze --device h100 --bandwidth 3000");
  ASSERT_EQ(modified.exit_code, 0) << modified.output;
  EXPECT_TRUE(contains(modified.output, "H100 SXM (modified)")) << modified.output;
}

TEST(AnalyzeCli, Fp8OnA100WarnsAndFitsAndCrossoverAreReported) {
  const Result r = run("analyze --model llama-7b --device a100-40 --weights fp8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "WARNING: A100 40GB SXM has no FP8 math")) << r.output;
  EXPECT_TRUE(contains(r.output, "largest that fits beside the weights: batch ")) << r.output;
  EXPECT_TRUE(contains(r.output, "i.e. at batch ")) << r.output;
  EXPECT_TRUE(contains(r.output, "Assumptions:")) << r.output;
  const Result json = run("analyze --model llama-7b --device a100-40 --weights fp8 --json");
  for (const char* part : {"\"other_formats\"", "\"fits\": {", "\"assumptions\"", "\"warnings\": [\"A100"}) {
    EXPECT_TRUE(contains(json.output, part)) << part << "\n" << json.output;
  }
}

TEST(AnalyzeCli, ThisMachineWarnsWhenItsRooflineWasMeasuredUnderLoad) {
  const std::string path = "/tmp/inferlab_cli_busy_roofline_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path);
    out << "{\"peak_gflops\": 80, \"read_gbs\": 18, \"triad_gbs\": 20, \"threads\": 2, \"load_average\": 4.6, "
           "\"simd\": \"avx2\", \"cpu\": \"Test CPU\"}\n";
  }
  const Result r = run("analyze --model smollm2-135m --device this --roofline " + path + " --weights fp32 --kv fp32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "WARNING: the roofline in " + path + " was measured under load")) << r.output;
  EXPECT_TRUE(contains(r.output, "decode streams at the read bandwidth, 18.00 GB/s")) << r.output;
  std::remove(path.c_str());
}

TEST(AnalyzeCli, EngineerBadInputNamesTheArgument) {
  const std::pair<const char*, const char*> cases[] = {
      {"analyze --context 32x", "context = 32x: must be a token count"},
      {"analyze --prompt 1.5", "prompt = 1.5: must be a token count"},
      {"analyze --head-dim 0", "head-dim = 0: must be > 0"},
      {"analyze --peak 10", "option --bandwidth: is required for a custom device"},
      {"analyze --bandwidth 0 --peak 10", "bandwidth = 0: must be > 0"},
      {"analyze --device h100 --memory -1", "memory = -1"},
      {"analyze --weights fp64", "weights = fp64: unknown format (known: fp32"},
      {"analyze --markdown", "option --markdown: only with --audit"},
      {"analyze --bogus", "option --bogus: unknown (known: "},
      {"analyze --model", "option --model: needs a value"},
  };
  for (const auto& [arguments, message] : cases) {
    const Result r = run(arguments);
    EXPECT_EQ(r.exit_code, 2) << arguments << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, message)) << arguments << "\n" << r.output;
  }
}

}  // namespace
}  // namespace inferlab
