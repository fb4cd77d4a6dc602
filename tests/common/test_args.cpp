// common/args.h, the one command-line reader (the inferlab subcommands and chapter 07's
// benchmark): --flag, --key value, --key=value, --help, and each problem named.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/args.h"

namespace inferlab {
namespace {

// The message of the std::invalid_argument check_known(@p known) throws for @p argv, or "".
std::string problem(const std::vector<std::string>& argv, const std::set<std::string>& known) {
  try {
    Args(argv, {"quick"}).check_known(known);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Args, FlagsValuesAndHelp) {
  const Args args({"--quick", "--out", "a.json", "--seed=7", "--rate", "-0.5"}, {"quick"});
  EXPECT_FALSE(args.help());
  EXPECT_TRUE(args.has("quick"));
  EXPECT_EQ(args.required("out"), "a.json");
  EXPECT_EQ(args.integer("seed"), 7);
  EXPECT_EQ(args.real("rate"), -0.5) << "a negative number is a value, not an option";
  EXPECT_EQ(args.get_or("missing", "fallback"), "fallback");
  EXPECT_FALSE(args.integer("missing").has_value());
  EXPECT_NO_THROW(args.check_known({"quick", "out", "seed", "rate"}));
  EXPECT_TRUE(Args({"-h", "--bogus", "1"}, {}).help()) << "--help / -h whatever else is on the line";
  EXPECT_TRUE(Args({"--help"}, {}).help());
}

TEST(Args, EachProblemIsNamed) {
  EXPECT_EQ(problem({"stray"}, {"out"}), "argument 'stray': expected an --option");
  EXPECT_EQ(problem({"--bogus", "1"}, {"out"}), "option --bogus: unknown (known: --out, --help)");
  EXPECT_EQ(problem({"--out"}, {"out"}), "option --out: needs a value");
  EXPECT_EQ(problem({"--out", "--quick"}, {"out", "quick"}), "option --out: needs a value");
  EXPECT_THROW(Args({}, {}).required("out"), std::invalid_argument);
  try {
    Args({"--seed", "7x"}, {}).integer("seed");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "seed = 7x: must be an integer");
  }
  try {
    Args({"--rate=fast"}, {}).real("rate");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "rate = fast: must be a number");
  }
}

}  // namespace
}  // namespace inferlab
