// `inferlab tokenize` as a user runs it (chapter 08): SmolLM2's ids of a text on one line (by the
// model's name, smollm2), special tokens parsed or not, the text of ids, and clear errors. The ids
// here are Hugging Face tokenizers' on the same GGUF (tokenizer_oracle.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/support/run_inferlab.h"

namespace inferlab {
namespace {

testing::CommandResult run(const std::string& arguments) {
  return testing::run_command(INFERLAB_EXE, arguments, "");
}

class Ch08TokenizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(INFERLAB_SMOLLM2_GGUF)) {
      GTEST_FAIL() << "the model " << INFERLAB_SMOLLM2_GGUF << " is not installed: run ./inferlab setup";
    }
  }
};

TEST_F(Ch08TokenizeCli, PrintsTheIdsOfATextOnOneLine) {
  const auto r = run("tokenize --model smollm2 --text 'Hello world!'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "19556 905 17\n");  // "Hello", " world", "!"; no BOS: add_bos is false
  const auto digits = run("tokenize --model smollm2 --text 'in 2024'");
  EXPECT_EQ(digits.output, "254 216 34 32 34 36\n");  // every digit alone, the space before them too
  const auto path = run(std::string("tokenize --model ") + INFERLAB_SMOLLM2_GGUF + " --text 'Hello world!'");
  EXPECT_EQ(path.output, r.output);
  const auto empty = run("tokenize --model smollm2 --text ''");
  EXPECT_EQ(empty.exit_code, 0) << empty.output;
  EXPECT_EQ(empty.output, "\n");
}

TEST_F(Ch08TokenizeCli, ParsesSpecialTokensUnlessAskedNotTo) {
  EXPECT_EQ(run("tokenize --model smollm2 --text '<|im_start|>user'").output, "1 4093\n");
  const auto plain = run("tokenize --model smollm2 --text '<|im_start|>user' --no-special");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("1 "), std::string::npos) << plain.output;
  EXPECT_EQ(plain.output.substr(0, 3), "44 ") << plain.output;  // "<"
}

TEST_F(Ch08TokenizeCli, DecodesIdsToText) {
  EXPECT_EQ(run("tokenize --model smollm2 --decode '19556 905 17'").output, "Hello world!\n");
  EXPECT_EQ(run("tokenize --model smollm2 --decode 1,4093,198,6004,2").output, "<|im_start|>user\nhi<|im_end|>\n");
  const auto ids = run("tokenize --model smollm2 --text 'café 中文 😀'");
  ASSERT_EQ(ids.exit_code, 0) << ids.output;
  const std::string line = ids.output.substr(0, ids.output.size() - 1);
  EXPECT_EQ(run("tokenize --model smollm2 --decode '" + line + "'").output, "café 中文 😀\n");
}

TEST_F(Ch08TokenizeCli, BadInputIsNamed) {
  const auto out_of_range = run("tokenize --model smollm2 --decode '5 49152'");
  EXPECT_EQ(out_of_range.exit_code, 2);
  EXPECT_NE(out_of_range.output.find("token id 49152: out of range"), std::string::npos) << out_of_range.output;
  const auto not_ids = run("tokenize --model smollm2 --decode '5 x'");
  EXPECT_EQ(not_ids.exit_code, 2);
  EXPECT_NE(not_ids.output.find("--decode = x"), std::string::npos) << not_ids.output;
  const auto neither = run("tokenize --model smollm2");
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_NE(neither.output.find("exactly one of --text and --decode"), std::string::npos) << neither.output;
  const auto no_model = run("tokenize --text hi");
  EXPECT_EQ(no_model.exit_code, 2);
  EXPECT_NE(no_model.output.find("--model"), std::string::npos) << no_model.output;
  const auto missing = run("tokenize --model /no/such/model.gguf --text hi");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("/no/such/model.gguf"), std::string::npos) << missing.output;
  const auto unknown = run("tokenize --model smollm2 --text hi --bos");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("--bos"), std::string::npos) << unknown.output;
}

TEST(Ch08TokenizeCliHelp, AnswersHelp) {
  const auto r = run("tokenize --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("usage: inferlab tokenize"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("./inferlab setup"), std::string::npos) << r.output;
  EXPECT_NE(run("help").output.find("tokenize --model"), std::string::npos);
  // The conventions of tests/cli's EveryCommandAnswersHelpWithItsOwnUsage and
  // UnknownOptionsAreReportedAsUnknownNotAsNeedingAValue.
  EXPECT_EQ(run("tokenize -h").output, r.output);
  EXPECT_EQ(run("help tokenize").output, r.output);
  EXPECT_EQ(run("tokenize --bogus --help").exit_code, 0);
  for (const char* line : {" --bogus", " --bogus 1", " --bogus --help-me"}) {
    const auto bad = run(std::string("tokenize") + line);
    EXPECT_EQ(bad.exit_code, 2) << line << "\n" << bad.output;
    EXPECT_NE(bad.output.find("option --bogus: unknown (known: "), std::string::npos) << line << "\n" << bad.output;
  }
}

}  // namespace
}  // namespace inferlab
