// `inferlab analyze` as a user runs it: the report, --list, --json, --audit, and bad input
// (exit code 2 and a message naming the argument and its value).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace inferlab
