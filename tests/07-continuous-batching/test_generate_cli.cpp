// `inferlab generate` as a user runs it (chapter 07): stories260K's greedy ids from BOS equal the
// float64 reference's committed ids, on cpu and on the sim backend; a random model by name; a JSON-lines trace replayed through
// the engine with its metrics file; clear errors for bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/json.h"
#include "tests/07-continuous-batching/stories_data.h"
#include "tests/support/run_inferlab.h"

namespace inferlab {
namespace {

testing::CommandResult run(const std::string& arguments) {
  return testing::run_command(INFERLAB_EXE, arguments, "");
}

std::string committed_ids() {
  std::string line;
  for (const int32_t id : testing::committed_greedy_ids()) {
    if (!line.empty()) line += ' ';  // appended apart: GCC 12's -Wrestrict false positive (bug 105329) on " " + s
    line += std::to_string(id);
  }
  return line;
}

TEST(Ch07GenerateCli, Stories260KGreedyFromBosEqualsTheFloat64Reference) {
  const auto r = run("generate --model " + std::string(INFERLAB_SOURCE_DIR) +
                     "/models/stories260K.bin --prompt-ids 1 --max-new-tokens 256 --greedy --ids");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_FALSE(committed_ids().empty());
  EXPECT_EQ(r.output, committed_ids() + "\n");
}

TEST(Ch07GenerateCli, TheEngineGivesTheSameIdsAsRunningAlone) {
  const std::string model = "--model " + std::string(INFERLAB_SOURCE_DIR) + "/models/stories260K.bin";
  const auto alone = run("generate " + model + " --prompt-ids 1,461,401 --max-new-tokens 40 --ids");
  const auto engine = run("generate " + model + " --prompt-ids 1,461,401 --max-new-tokens 40 --ids --engine "
                          "--block-size 4 --chunk 2 --budget 3");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  EXPECT_EQ(engine.output, alone.output);
}

// The whole model on the emulator (--backend sim: weights and KV pool resident on the device, the
// engine's steps through the device runner): stories260K's greedy ids from BOS, 256 tokens, equal
// the float64 reference's committed ids. The device sums in other orders than the cpu (logits
// within fp32 rounding of each other: test_ch07_model_backends_sim); along this path every
// top-2 margin is wide enough that no token flips.
TEST(Ch07GenerateCli, Stories260KOnTheSimBackendGivesTheReferenceIds) {
  const auto r = run("generate --model " + std::string(INFERLAB_SOURCE_DIR) +
                     "/models/stories260K.bin --prompt-ids 1 --max-new-tokens 256 --greedy --ids --backend sim");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, committed_ids() + "\n");
}

TEST(Ch07GenerateCli, TraceReplayWritesPerRequestMetrics) {
  const auto dir = std::filesystem::temp_directory_path() / ("inferlab_ch07_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto trace = (dir / "trace.jsonl").string(), out = (dir / "metrics.json").string();
  {
    std::ofstream t(trace);
    t << "# arrival, prompt, max tokens\n"
      << "{\"arrival\": 0, \"prompt_ids\": [1, 5, 9], \"max_new_tokens\": 5}\n"
      << "{\"arrival\": 0.001, \"prompt_len\": 30, \"max_new_tokens\": 7}\n\n"
      << "{\"id\": 42, \"arrival\": 0.5, \"prompt_len\": 3, \"max_new_tokens\": 2, \"temperature\": 0.7, \"top_p\": 0.9}\n";
  }
  const auto r = run("generate --model random:tiny --trace " + trace + " --out " + out + " --block-size 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(out);
  std::stringstream json;
  json << in.rdbuf();
  const std::string text = json.str();
  EXPECT_NE(text.find("\"summary\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"id\": 42"), std::string::npos) << text;
  EXPECT_NE(text.find("\"output_tokens\": 7"), std::string::npos) << text;
  EXPECT_NE(text.find("\"ttft\""), std::string::npos) << text;
  const Json parsed = Json::parse(text);  // the whole file is one JSON document
  ASSERT_EQ(parsed["requests"].size(), 3u) << text;
  EXPECT_EQ(parsed["requests"][2]["id"], 42);
  EXPECT_EQ(parsed["requests"][1]["output_tokens"], 7);
  EXPECT_EQ(parsed["requests"][1]["tokens"].size(), 7u);
  EXPECT_EQ(parsed["summary"]["requests"], 3);
  EXPECT_EQ(parsed["config"]["block_size"], 4);
  std::filesystem::remove_all(dir);
}

TEST(Ch07GenerateCli, BadInputIsNamed) {
  EXPECT_NE(run("generate --model random:tiny --prompt-ids 1,x").output.find("--prompt-ids"), std::string::npos);
  EXPECT_NE(run("generate --model random:tiny --prompt-ids 99").output.find("--prompt-ids = 99"), std::string::npos);
  EXPECT_NE(run("generate --model random:nope --prompt-ids 1").output.find("nope"), std::string::npos);
  EXPECT_NE(run("generate --model /no/such/file --prompt-ids 1").output.find("/no/such/file"), std::string::npos);
  EXPECT_NE(run("generate --model random:tiny --prompt-ids 1 --bogus 3").output.find("bogus"), std::string::npos);
  const auto help = run("generate --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--trace FILE"), std::string::npos);
}

}  // namespace
}  // namespace inferlab
