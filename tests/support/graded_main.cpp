// main() of a graded test program (test_chNN_student): GoogleTest's, plus the options the grader
// passes (tests/support/isolation.h): the seed of the fresh data, and the graded-run marker.
#include <gtest/gtest.h>

#include <cstdio>
#include <exception>

#include "tests/support/isolation.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  try {
    inferlab::testing::parse_inferlab_options(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    std::fprintf(stderr, "unknown option %s (the InferLab options are --inferlab_seed=N, --inferlab_grading and "
                         "--inferlab_no_isolation; the others are GoogleTest's --gtest_*)\n", argv[i]);
    return 2;
  }
  return RUN_ALL_TESTS();
}
