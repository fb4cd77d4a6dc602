// `inferlab generate --tp N` and `--pp N` as a user runs them (tools/cli/ranks.h): the command
// starts its own ranks through mpirun, and the split model's greedy ids equal the whole model's —
// SmolLM2-135M over 3 tensor-parallel ranks (9 query heads, 3 KV heads: one each) and 2 pipeline
// stages, random models over 2 and 4 (4 KV heads split; 2 KV heads each on two ranks; 3 layers in
// 2 and 3 stages) — plus the splits that cannot be made.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/support/run_inferlab.h"

namespace inferlab {
namespace {

testing::CommandResult run(const std::string& arguments) {
  return testing::run_command(INFERLAB_EXE, arguments, "OMP_NUM_THREADS=1");
}

// The last line of a run's output: --ids prints the generated ids on one line.
std::string last_line(const std::string& output) {
  std::string text = output;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const size_t cut = text.rfind('\n');
  return cut == std::string::npos ? text : text.substr(cut + 1);
}

std::string ids_of(const std::string& arguments) {
  const auto r = run("generate " + arguments + " --ids");
  EXPECT_EQ(r.exit_code, 0) << arguments << "\n" << r.output;
  return last_line(r.output);
}

TEST(TensorParallelCli, SmolLm2OverThreeRanksGeneratesTheIdsOfOne) {
  if (!std::filesystem::exists(INFERLAB_SMOLLM2_GGUF))
    GTEST_FAIL() << "the model " << INFERLAB_SMOLLM2_GGUF << " is not installed: run ./inferlab setup";
  const std::string request = "--model smollm2 --prompt 'The capital of France is' --max-new-tokens 12 --engine";
  const std::string one = ids_of(request);
  EXPECT_FALSE(one.empty());
  EXPECT_EQ(ids_of(request + " --tp 3"), one);
}

TEST(TensorParallelCli, RandomModelsOverTwoAndFourRanksGenerateTheIdsOfOne) {
  // 8 query heads, 4 KV heads: split in 2 (two KV heads a rank) and in 4 (one); with 2 KV heads,
  // 4 ranks replicate each on two. A vocabulary of 250 leaves the last of 4 ranks fewer rows.
  for (const std::string shape : {"dim=64,heads=8,kv_heads=4,hidden=128,vocab=250,layers=3,seed=4",
                                  "dim=64,heads=8,kv_heads=2,hidden=128,vocab=250,layers=3,seed=5"}) {
    const std::string request = "--model random:tiny," + shape + " --prompt-ids '3 14 15 92 65 35 89' --max-new-tokens 20 "
                                "--num-blocks 8 --block-size 4 --max-seqs 2 --engine";
    const std::string one = ids_of(request);
    EXPECT_FALSE(one.empty()) << shape;
    for (const int tp : {2, 4}) EXPECT_EQ(ids_of(request + " --tp " + std::to_string(tp)), one) << shape << ", tp " << tp;
  }
}

TEST(PipelineParallelCli, SmolLm2InTwoStagesGeneratesTheIdsOfOne) {
  if (!std::filesystem::exists(INFERLAB_SMOLLM2_GGUF))
    GTEST_FAIL() << "the model " << INFERLAB_SMOLLM2_GGUF << " is not installed: run ./inferlab setup";
  const std::string request = "--model smollm2 --prompt 'The capital of France is' --max-new-tokens 12 --engine";
  const std::string one = ids_of(request);
  EXPECT_FALSE(one.empty());
  EXPECT_EQ(ids_of(request + " --pp 2"), one);
  EXPECT_EQ(ids_of(request + " --pp 2 --micro-batches 5"), one);
}

TEST(PipelineParallelCli, RandomModelsInTwoAndThreeStagesGenerateTheIdsOfOne) {
  const std::string request = "--model random:tiny,dim=64,heads=8,kv_heads=4,hidden=128,vocab=250,layers=3,seed=6 "
                              "--prompt-ids '3 14 15 92 65 35 89 79 32 38' --max-new-tokens 20 "
                              "--num-blocks 8 --block-size 4 --max-seqs 2 --chunk 4 --budget 6 --engine";
  const std::string one = ids_of(request);
  EXPECT_FALSE(one.empty());
  for (const int pp : {2, 3}) EXPECT_EQ(ids_of(request + " --pp " + std::to_string(pp)), one) << "pp " << pp;
  EXPECT_EQ(ids_of(request + " --pp 3 --micro-batches 2"), one);
}

TEST(PipelineParallelCli, SplitsThatCannotBeMadeAreRefusedNamingPp) {
  const auto deep = run("generate --model random:tiny,layers=3 --prompt-ids 1 --pp 4");
  EXPECT_EQ(deep.exit_code, 2) << deep.output;
  EXPECT_NE(deep.output.find("pp = 4"), std::string::npos) << deep.output;
  EXPECT_NE(deep.output.find("n_layers = 3"), std::string::npos) << deep.output;
  const auto both = run("generate --model random:tiny --prompt-ids 1 --pp 2 --tp 2");
  EXPECT_EQ(both.exit_code, 2) << both.output;
  EXPECT_NE(both.output.find("one way at a time"), std::string::npos) << both.output;
  const auto lone = run("generate --model random:tiny --prompt-ids 1 --micro-batches 2");
  EXPECT_EQ(lone.exit_code, 2) << lone.output;
  EXPECT_NE(lone.output.find("--micro-batches"), std::string::npos) << lone.output;
  const auto none = run("generate --model random:tiny --prompt-ids 1 --pp 2 --micro-batches 0");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("--micro-batches"), std::string::npos) << none.output;
}

TEST(TensorParallelCli, SplitsThatCannotBeMadeAreRefusedNamingTp) {
  const auto two = run("generate --model smollm2 --prompt-ids '1 2 3' --tp 2");
  EXPECT_EQ(two.exit_code, 2) << two.output;
  EXPECT_NE(two.output.find("tp = 2"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("query heads"), std::string::npos) << two.output;
  const auto zero = run("generate --model random:tiny --prompt-ids 1 --tp 0");
  EXPECT_EQ(zero.exit_code, 2) << zero.output;
  EXPECT_NE(zero.output.find("--tp"), std::string::npos) << zero.output;
  const auto device = run("generate --model random:tiny --prompt-ids 1 --tp 2 --backend sim");
  EXPECT_NE(device.exit_code, 0) << device.output;
  EXPECT_NE(device.output.find("cpu"), std::string::npos) << device.output;
}

}  // namespace
}  // namespace inferlab
