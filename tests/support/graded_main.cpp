// main() of a graded test program (test_chNN_student): GoogleTest's, plus the options the grader
// passes (tests/support/isolation.h): the seed of the fresh data, and the graded-run marker.
// A failure is printed at the student's code first (tests/support/student_code.h): the student
// tree this program was built with is INFERLAB_STUDENT_DIR, the repository INFERLAB_SOURCE_DIR, and
// the folder the compiler ran in (a test's __FILE__ is relative to it) INFERLAB_BUILD_DIR.
#include <gtest/gtest.h>

#include <cstdio>
#include <exception>
#include <string_view>

#include "tests/support/isolation.h"
#include "tests/support/student_code.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  bool check_student_code = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--inferlab_check_student_code")
      check_student_code = true;
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  argv[argc] = nullptr;
  try {
    inferlab::testing::parse_inferlab_options(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    std::fprintf(stderr, "unknown option %s (the InferLab options are --inferlab_seed=N, --inferlab_grading, "
                         "--inferlab_no_isolation and --inferlab_check_student_code; the others are GoogleTest's "
                         "--gtest_*)\n", argv[i]);
    return 2;
  }
  if (check_student_code) {
    const int problems = inferlab::testing::check_student_code(INFERLAB_STUDENT_DIR, INFERLAB_SOURCE_DIR, INFERLAB_BUILD_DIR);
    std::printf("%d problem(s) in the table of graded functions (tests/support/student_code.h)\n", problems);
    return problems == 0 ? 0 : 1;
  }
  inferlab::testing::point_failures_at_student_code(INFERLAB_STUDENT_DIR, INFERLAB_SOURCE_DIR, INFERLAB_BUILD_DIR);
  return RUN_ALL_TESTS();
}
