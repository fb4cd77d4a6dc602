#pragma once
/// @file run_inferlab.h
/// Runs the `inferlab` executable as a user would (for the CLI tests): its exit code and its
/// combined stdout + stderr.

#include <string>

namespace inferlab::testing {

/// What one run of the executable gave.
struct CommandResult {
  int exit_code = -1;  ///< the process's exit status (-1 when it did not exit normally)
  std::string output;  ///< stdout and stderr, interleaved
};

/// Runs `<environment> <executable> <arguments>` through the shell. @p environment may hold
/// `NAME=value` assignments for this run only.
CommandResult run_command(const std::string& executable, const std::string& arguments,
                          const std::string& environment = "");

}  // namespace inferlab::testing
