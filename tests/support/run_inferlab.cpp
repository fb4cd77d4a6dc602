#include "tests/support/run_inferlab.h"

#include <sys/wait.h>

#include <cstdio>

namespace inferlab::testing {

CommandResult run_command(const std::string& executable, const std::string& arguments,
                          const std::string& environment) {
  const std::string command = environment + " " + executable + " " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace inferlab::testing
