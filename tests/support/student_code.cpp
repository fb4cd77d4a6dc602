#include "tests/support/student_code.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

namespace inferlab::testing {
namespace {

namespace fs = std::filesystem;

// The program's table: "Suite" or "Suite.Test" → function.
std::map<std::string, std::string, std::less<>>& table() {
  static std::map<std::string, std::string, std::less<>> entries;
  return entries;
}

bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether @p line holds @p name as a definition's name: not part of a longer identifier, not
// qualified by another name (`Other::name`), followed by `(` or `::`.
bool names_definition(std::string_view line, std::string_view name) {
  for (size_t at = line.find(name); at != std::string_view::npos; at = line.find(name, at + 1)) {
    if (at > 0 && (identifier_char(line[at - 1]) || line[at - 1] == ':')) continue;
    size_t next = at + name.size();
    while (next < line.size() && (line[next] == ' ' || line[next] == '\t')) ++next;
    if (next < line.size() && line[next] == '(') return true;
    if (line.substr(next).starts_with("::")) return true;
  }
  return false;
}

std::string trimmed(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const size_t last = s.find_last_not_of(" \t\r");
  return std::string(s.substr(first, last - first + 1));
}

// Where the compiler ran: a test's __FILE__ is relative to it (Ninja passes ../../tests/… when the
// build folder lies in the sources). Set once, before any test runs.
fs::path g_compile_dir;

// @p path (relative ones from the compiler's folder) relative to @p base when it lies under it,
// else absolute.
std::string shown(const fs::path& path, const fs::path& base) {
  const fs::path absolute = (path.is_relative() ? g_compile_dir / path : path).lexically_normal();
  const fs::path relative = absolute.lexically_relative(base.lexically_normal());
  if (!relative.empty() && *relative.begin() != "..") return relative.string();
  return absolute.string();
}

// The student's chapter folder of the test defined in @p test_file (tests/NN-slug/test_*.cpp).
fs::path chapter_folder(const fs::path& student_dir, const char* test_file) {
  return student_dir / fs::path(test_file ? test_file : "").parent_path().filename();
}

// GoogleTest's own printer, except that a graded test's failure starts at the student's code.
class StudentCodePrinter : public ::testing::TestEventListener {
 public:
  StudentCodePrinter(std::unique_ptr<::testing::TestEventListener> printer, fs::path student_dir, fs::path source_dir)
      : printer_(std::move(printer)), student_dir_(std::move(student_dir)), source_dir_(std::move(source_dir)) {}

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    // The test is the one OnTestStart named: GoogleTest calls this holding the lock that
    // UnitTest::current_test_info() takes.
    const ::testing::TestInfo* test = current_;
    if (!result.failed() || test == nullptr) return printer_->OnTestPartResult(result);
    const std::optional<std::string> function = graded_function(test->test_suite_name(), test->name());
    if (!function) return printer_->OnTestPartResult(result);
    const std::optional<SourceLine> where = definition(chapter_folder(student_dir_, test->file()), *function);
    if (!where) return printer_->OnTestPartResult(result);
    // The check: the failing assertion's place, or the TEST's when the failure has none (an
    // exception escaping the test body).
    const bool located = result.file_name() != nullptr && result.line_number() > 0;
    const std::string check = located ? shown(result.file_name(), source_dir_) + ":" + std::to_string(result.line_number())
                                      : shown(test->file(), source_dir_) + ":" + std::to_string(test->line());
    std::printf("%s:%d: Failure\nin student::%s (the check: %s)\n%s\n", shown(where->file, source_dir_).c_str(),
                where->line, function->c_str(), check.c_str(), result.message());
    std::fflush(stdout);
  }

  void OnTestProgramStart(const ::testing::UnitTest& u) override { printer_->OnTestProgramStart(u); }
  void OnTestIterationStart(const ::testing::UnitTest& u, int i) override { printer_->OnTestIterationStart(u, i); }
  void OnEnvironmentsSetUpStart(const ::testing::UnitTest& u) override { printer_->OnEnvironmentsSetUpStart(u); }
  void OnEnvironmentsSetUpEnd(const ::testing::UnitTest& u) override { printer_->OnEnvironmentsSetUpEnd(u); }
  void OnTestSuiteStart(const ::testing::TestSuite& s) override { printer_->OnTestSuiteStart(s); }
  void OnTestCaseStart(const ::testing::TestCase& s) override { printer_->OnTestCaseStart(s); }
  void OnTestStart(const ::testing::TestInfo& t) override {
    current_ = &t;
    printer_->OnTestStart(t);
  }
  void OnTestDisabled(const ::testing::TestInfo& t) override { printer_->OnTestDisabled(t); }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    current_ = nullptr;
    printer_->OnTestEnd(t);
  }
  void OnTestSuiteEnd(const ::testing::TestSuite& s) override { printer_->OnTestSuiteEnd(s); }
  void OnTestCaseEnd(const ::testing::TestCase& s) override { printer_->OnTestCaseEnd(s); }
  void OnEnvironmentsTearDownStart(const ::testing::UnitTest& u) override { printer_->OnEnvironmentsTearDownStart(u); }
  void OnEnvironmentsTearDownEnd(const ::testing::UnitTest& u) override { printer_->OnEnvironmentsTearDownEnd(u); }
  void OnTestIterationEnd(const ::testing::UnitTest& u, int i) override { printer_->OnTestIterationEnd(u, i); }
  void OnTestProgramEnd(const ::testing::UnitTest& u) override { printer_->OnTestProgramEnd(u); }

 private:
  // find_definition(), read once per chapter and function.
  const std::optional<SourceLine>& definition(const fs::path& chapter, const std::string& function) {
    const auto key = std::make_pair(chapter.string(), function);
    auto found = definitions_.find(key);
    if (found == definitions_.end()) found = definitions_.emplace(key, find_definition(chapter, function)).first;
    return found->second;
  }

  std::unique_ptr<::testing::TestEventListener> printer_;
  fs::path student_dir_, source_dir_;
  const ::testing::TestInfo* current_ = nullptr;  // between OnTestStart and OnTestEnd
  std::map<std::pair<std::string, std::string>, std::optional<SourceLine>> definitions_;
};

}  // namespace

bool register_graded_functions(std::initializer_list<GradedFunction> entries) {
  for (const GradedFunction& e : entries) table()[e.test] = e.function;
  return true;
}

std::optional<std::string> graded_function(std::string_view suite, std::string_view test) {
  const std::string one = std::string(suite) + "." + std::string(test);
  if (auto it = table().find(one); it != table().end()) return it->second;
  if (auto it = table().find(suite); it != table().end()) return it->second;
  return std::nullopt;
}

std::optional<SourceLine> find_definition(const fs::path& chapter_dir, std::string_view name) {
  std::error_code error;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(chapter_dir, error), end; !error && it != end; it.increment(error)) {
    const std::string ext = it->path().extension().string();
    if (ext == ".cpp" || ext == ".cu" || ext == ".cuh") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::string line;
    bool in_block_comment = false;
    for (int number = 1; std::getline(in, line); ++number) {
      const std::string text = trimmed(line);
      if (in_block_comment) {
        in_block_comment = text.find("*/") == std::string::npos;
        continue;
      }
      if (text.starts_with("/*")) {
        in_block_comment = text.find("*/") == std::string::npos;
        continue;
      }
      const std::string code = trimmed(std::string_view(text).substr(0, text.find("//")));
      if (code.empty() || code.starts_with("*") || code.ends_with(";")) continue;
      if (names_definition(code, name)) return SourceLine{file, number};
    }
  }
  return std::nullopt;
}

void point_failures_at_student_code(const fs::path& student_dir, const fs::path& source_dir,
                                    const fs::path& compile_dir) {
  g_compile_dir = compile_dir;
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  ::testing::TestEventListener* printer = listeners.default_result_printer();
  if (printer == nullptr) return;
  listeners.Release(printer);
  listeners.Append(new StudentCodePrinter(std::unique_ptr<::testing::TestEventListener>(printer), student_dir, source_dir));
}

int check_student_code(const fs::path& student_dir, const fs::path& source_dir, const fs::path& compile_dir) {
  g_compile_dir = compile_dir;
  int problems = 0;
  std::set<std::string, std::less<>> used;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const ::testing::TestInfo& test = *suite.GetTestInfo(t);
      const std::string name = std::string(suite.name()) + "." + test.name();
      const std::optional<std::string> function = graded_function(suite.name(), test.name());
      used.insert(table().count(name) ? name : std::string(suite.name()));
      if (!function) {
        std::printf("PROBLEM %s (%s:%d): no student function in the file's INFERLAB_GRADED_FUNCTIONS table\n",
                    name.c_str(), shown(test.file(), source_dir).c_str(), test.line());
        ++problems;
        continue;
      }
      const fs::path chapter = chapter_folder(student_dir, test.file());
      const std::optional<SourceLine> where = find_definition(chapter, *function);
      if (!where) {
        std::printf("PROBLEM %s: student::%s is defined in no .cpp, .cu or .cuh of %s\n", name.c_str(),
                    function->c_str(), shown(chapter, source_dir).c_str());
        ++problems;
        continue;
      }
      std::printf("%s: student::%s at %s:%d\n", name.c_str(), function->c_str(),
                  shown(where->file, source_dir).c_str(), where->line);
    }
  }
  for (const auto& [test, function] : table())
    if (!used.count(test)) {
      std::printf("PROBLEM the table's entry {\"%s\", \"%s\"} names no TEST of this program\n", test.c_str(),
                  function.c_str());
      ++problems;
    }
  return problems;
}

}  // namespace inferlab::testing
