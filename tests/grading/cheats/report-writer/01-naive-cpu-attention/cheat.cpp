// CHEAT (caught by the sandbox): every exercise function finds the report path GoogleTest was
// given (--gtest_output=xml:PATH in /proc/self/cmdline), writes a passing <testcase> there and
// calls _exit(0) before the test can compare anything. It scored 11/11 on chapter 04 before
// student code ran in a sandboxed child: there, open() fails with EPERM and the early exit
// fails the call.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "01-naive-cpu-attention/ch01.h"

namespace inferlab::student {
namespace {

[[noreturn]] void write_passing_report() {
  std::string path, filter;
  if (const int fd = ::open("/proc/self/cmdline", O_RDONLY); fd >= 0) {
    char buffer[16384];
    const ssize_t n = ::read(fd, buffer, sizeof buffer - 1);
    ::close(fd);
    for (ssize_t i = 0; n > 0 && i < n; i += static_cast<ssize_t>(std::strlen(buffer + i)) + 1) {
      const std::string arg(buffer + i);
      if (arg.rfind("--gtest_output=xml:", 0) == 0) path = arg.substr(19);
      if (arg.rfind("--gtest_filter=", 0) == 0) filter = arg.substr(15);
    }
  }
  const std::string suite = filter.substr(0, filter.find('.')), name = filter.substr(filter.find('.') + 1);
  const std::string xml = "<?xml version=\"1.0\"?>\n<testsuites tests=\"1\" failures=\"0\" errors=\"0\">"
                          "<testsuite name=\"" + suite + "\" tests=\"1\" failures=\"0\" errors=\"0\">"
                          "<testcase name=\"" + name + "\" status=\"run\" result=\"completed\"/>"
                          "</testsuite></testsuites>\n";
  if (const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644); fd >= 0) {
    [[maybe_unused]] const ssize_t written = ::write(fd, xml.data(), xml.size());
    ::close(fd);
  }
  ::_exit(0);
}

}  // namespace

void softmax_row(std::span<float>) { write_passing_report(); }
void attention_single_head(std::span<const float>, std::span<const float>, std::span<const float>, int64_t, int64_t,
                           bool, std::span<float>) {
  write_passing_report();
}
Cost count_prefill_cost(int64_t, int64_t, double) { write_passing_report(); }

}  // namespace inferlab::student
