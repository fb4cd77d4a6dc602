// `inferlab attention` and `inferlab tour` as a user runs them: .npy files in, .npy out,
// compared with the float64 oracle; bad input gives a clear message and a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/compare.h"
#include "common/npy.h"
#include "kernels/attention/attention.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

struct Result {
  int exit_code;
  std::string output;
};

Result run(const std::string& arguments, const std::string& environment = "") {
  const std::string command = environment + " " + std::string(INFERLAB_EXE) + " " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
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
  EXPECT_NE(r.output.find("% roof"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace inferlab
