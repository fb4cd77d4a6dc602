#pragma once
/// @file student_code.h
/// A graded test's failure points at the student's code first, the test second.
///
/// GoogleTest puts the file and line of the failing assertion on a failure's first line, which
/// in a graded test is the test file (or a checker such as tests/support/expect_all.h), a file
/// students are told they need not open. Each graded test file therefore says which student
/// function each of its TESTs grades:
///
///     INFERLAB_GRADED_FUNCTIONS({
///         {"Ch01Softmax", "softmax_row"},                            // every TEST of the suite
///         {"Ch04Quantize.GivenScaleSaturatesNeverWrapsAndCounts", "quantize_int8"},  // one TEST
///     });
///
/// and the graded programs' main() (tests/support/graded_main.cpp) prints each failure as
///
///     exercises/01-naive-cpu-attention/softmax_row.cpp:10: Failure
///     in student::softmax_row (the check: tests/01-naive-cpu-attention/test_student.cpp:64)
///     <the check's message: the shape, the first wrong element, ...>
///
/// The line is where the function (or, for a class, its first member) is defined in the
/// student's own copy of the chapter folder, found by reading that folder's .cpp, .cu and .cuh
/// files. `test_chNN_student --inferlab_check_student_code` checks a program's table: every
/// TEST has a function, every entry names a TEST or suite of the program, and every function is
/// defined in the student tree it was built with (ctest runs it on the solutions).

#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace inferlab::testing {

/// One entry of a graded test file's table: the TESTs and the student function they grade.
struct GradedFunction {
  const char* test;      ///< "Suite" (every TEST of it) or "Suite.Test" (that one, taking precedence)
  const char* function;  ///< the name in namespace student: "softmax_row", "StudentBlockAllocator"
};

/// Adds @p entries to the program's table (called by INFERLAB_GRADED_FUNCTIONS during static
/// initialisation). Returns true.
bool register_graded_functions(std::initializer_list<GradedFunction> entries);

/// The student function the test @p suite.@p test grades, if the table names one.
std::optional<std::string> graded_function(std::string_view suite, std::string_view test);

/// A place in a source file.
struct SourceLine {
  std::filesystem::path file;
  int line = 0;
};

/// Where @p name is defined in the .cpp, .cu and .cuh files of @p chapter_dir (in name order):
/// the first line holding `name(` or `name::` that is neither a comment nor a statement ending
/// in ';' (a call or a declaration). A qualified use (`Other::name(`) does not count.
std::optional<SourceLine> find_definition(const std::filesystem::path& chapter_dir, std::string_view name);

/// Replaces GoogleTest's result printer with one that prints a graded test's failures at the
/// student's definition of its function in @p student_dir/<the test file's chapter folder>,
/// then the test's own file and line. Paths under @p source_dir are printed relative to it; a
/// relative __FILE__ is taken from @p compile_dir, the folder the compiler ran in.
void point_failures_at_student_code(const std::filesystem::path& student_dir, const std::filesystem::path& source_dir,
                                    const std::filesystem::path& compile_dir);

/// The check behind --inferlab_check_student_code: prints each TEST of the program with its
/// function and where @p student_dir defines it, and every problem (a TEST without a function,
/// an entry that names no TEST, a function not found). Returns the number of problems. The paths
/// are those of point_failures_at_student_code().
int check_student_code(const std::filesystem::path& student_dir, const std::filesystem::path& source_dir,
                       const std::filesystem::path& compile_dir);

}  // namespace inferlab::testing

/// The graded test file's table of GradedFunction entries (see the file comment).
#define INFERLAB_GRADED_FUNCTIONS(...)                                   \
  [[maybe_unused]] static const bool inferlab_graded_functions_table_ = \
      ::inferlab::testing::register_graded_functions(__VA_ARGS__)
