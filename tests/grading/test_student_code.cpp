// Where a graded failure points (tests/support/student_code.h): the student's definition of a
// function found in a chapter folder, the table's lookups, and the check of a program's table.
// The printer itself is checked end to end by tests/grading/grade_bugs.py (softmax-no-max-shift).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "tests/support/student_code.h"

namespace inferlab::testing {
namespace {

namespace fs = std::filesystem;

INFERLAB_GRADED_FUNCTIONS({
    {"StudentCode", "softmax_row"},
    {"StudentCode.ATestsOwnEntryComesFirst", "Widget::run"},
    {"NoSuch.Test", "softmax_row"},
});

// A fresh folder under the system's temporary one, removed at the end.
class Folder {
 public:
  Folder() {
    static int made = 0;
    path_ = fs::temp_directory_path() /
            ("inferlab-student-code-" + std::to_string(::getpid()) + "-" + std::to_string(made++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Folder() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& name, const std::string& text) const {
    fs::create_directories((path_ / name).parent_path());
    std::ofstream(path_ / name) << text;
  }

 private:
  fs::path path_;
};

TEST(StudentCode, FindsTheDefinitionNotACommentADeclarationACallOrAnotherName) {
  Folder folder;
  folder.write("ch.h", "void softmax_row(float* row) {}\n");  // headers are the contract's, not read
  folder.write("b_softmax.cpp",
               "// softmax_row(row) subtracts the max\n"        // 1: a comment
               "/* softmax_row(x)\n"                            // 2: a block comment…
               "   softmax_row(y) */\n"                         // 3
               "void softmax_row(float* row);\n"                // 4: a declaration
               "void softmax_row_twice(float* row) {\n"         // 5: a longer name
               "  softmax_row(row);\n"                          // 6: a call
               "  Other::softmax_row(row) + 1\n"                // 7: a qualified name
               "}\n"                                            // 8
               "void softmax_row (float* row) {  // the one\n"  // 9: the definition
               "}\n");
  folder.write("a_first.cu", "__global__ void kernel() {}\n");
  const std::optional<SourceLine> where = find_definition(folder.path(), "softmax_row");
  ASSERT_TRUE(where.has_value());
  EXPECT_EQ(where->file.filename(), "b_softmax.cpp");
  EXPECT_EQ(where->line, 9);
  EXPECT_FALSE(find_definition(folder.path(), "kernel_two").has_value());
  EXPECT_FALSE(find_definition(folder.path() / "no-such-folder", "softmax_row").has_value());
}

TEST(StudentCode, AClassIsFoundAtItsFirstMemberAndAMemberByItsQualifiedName) {
  Folder folder;
  folder.write("widget.cpp",
               "#include \"ch.h\"\n"                                 // 1
               "int helper() { return 1; }\n"                        // 2
               "Widget::Widget(int n) : n_(n) {}\n"                  // 3
               "int Widget::size() const { return n_; }\n"           // 4
               "void Widget::run(int steps) {\n"                     // 5
               "}\n");
  const std::optional<SourceLine> type = find_definition(folder.path(), "Widget");
  const std::optional<SourceLine> member = find_definition(folder.path(), "Widget::run");
  ASSERT_TRUE(type.has_value() && member.has_value());
  EXPECT_EQ(type->line, 3);
  EXPECT_EQ(member->line, 5);
  EXPECT_FALSE(find_definition(folder.path(), "Widget::stop").has_value());
}

TEST(StudentCode, ATestsOwnEntryComesFirst) {
  EXPECT_EQ(graded_function("StudentCode", "ATestsOwnEntryComesFirst"), "Widget::run");
  EXPECT_EQ(graded_function("StudentCode", "AnyOther"), "softmax_row");
  EXPECT_FALSE(graded_function("OtherSuite", "AnyOther").has_value());
}

TEST(StudentCode, TheCheckNamesAStaleEntryAndAFunctionNotDefined) {
  // This program's own table: its TESTs live in tests/grading/, so the student's chapter folder
  // is <student tree>/grading. With both functions defined, only the stale entry is a problem;
  // without Widget::run, the test that names it is one more.
  Folder tree;
  tree.write("grading/softmax_row.cpp", "void softmax_row(float* row) {\n}\n");
  tree.write("grading/widget.cpp", "void Widget::run(int steps) {\n}\n");
  ::testing::internal::CaptureStdout();
  const int stale_only = check_student_code(tree.path(), tree.path(), tree.path());
  const std::string stale_report = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(stale_only, 1) << stale_report;
  EXPECT_NE(stale_report.find("PROBLEM the table's entry {\"NoSuch.Test\", \"softmax_row\"} names no TEST"),
            std::string::npos) << stale_report;
  EXPECT_NE(stale_report.find("StudentCode.ATestsOwnEntryComesFirst: student::Widget::run at grading/widget.cpp:1"),
            std::string::npos) << stale_report;

  fs::remove(tree.path() / "grading/widget.cpp");
  ::testing::internal::CaptureStdout();
  const int both = check_student_code(tree.path(), tree.path(), tree.path());
  const std::string report = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(both, 2) << report;
  EXPECT_NE(report.find("PROBLEM StudentCode.ATestsOwnEntryComesFirst: student::Widget::run is defined in no .cpp, "
                        ".cu or .cuh of grading"),
            std::string::npos) << report;
}

}  // namespace
}  // namespace inferlab::testing
