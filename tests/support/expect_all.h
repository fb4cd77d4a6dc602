#pragma once
/// @file expect_all.h
/// Grading many shapes in one TEST without drowning the student in repeats.

#include <gtest/gtest.h>

#include <source_location>
#include <string>
#include <vector>

namespace inferlab::testing {

/// Runs @p check (returning ::testing::AssertionResult) on every case of @p cases. A stub fails
/// once, with "not implemented yet: …", instead of once per shape; a wrong kernel reports at most
/// three failing shapes, then how many shapes were left unchecked. The failures are reported at
/// the caller's line (@p where), the TEST that asked for the check.
template <class Case, class Check>
void expect_all(const std::vector<Case>& cases, const Check& check,
                const std::source_location where = std::source_location::current()) {
  constexpr int kReported = 3;
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const ::testing::AssertionResult result = check(cases[i]);
    if (result) continue;
    ADD_FAILURE_AT(where.file_name(), static_cast<int>(where.line())) << result.message();
    if (std::string(result.message()).find("not implemented yet") != std::string::npos) return;
    if (++failures == kReported) {
      const size_t left = cases.size() - i - 1;
      if (left > 0)
        ADD_FAILURE_AT(where.file_name(), static_cast<int>(where.line()))
            << "(stopped after " << kReported << " failing shapes; " << left << " of the " << cases.size()
            << " shapes were not checked)";
      return;
    }
  }
}

}  // namespace inferlab::testing
