// The registered attention versions crossed with the test shapes (attention_check.h): apart
// from the rest of the check, so that a program that grades only against the float64 oracle
// (inferlab_test_light: chapter 01's graded tests) links none of the lab's kernels.
#include "tests/support/attention_check.h"

#include <cctype>
#include <string>
#include <vector>

#include "kernels/registry.h"

namespace inferlab::testing {

void PrintTo(const VersionCase& c, std::ostream* out) {
  *out << c.version->name << " (" << to_string(c.version->backend) << ") " << c.shape.name();
}

std::string version_case_name(const ::testing::TestParamInfo<VersionCase>& info) {
  std::string name = info.param.version->name + "_" + std::string(to_string(info.param.version->backend)) + "_" +
                     info.param.shape.name();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

std::vector<VersionCase> version_cases(Backend backend, int chapter, int64_t max_seq_len) {
  std::vector<VersionCase> cases;
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != backend || version.chapter != chapter) continue;
    for (const AttentionCase& shape : odd_attention_cases(max_seq_len)) cases.push_back({&version, shape});
  }
  return cases;
}

}  // namespace inferlab::testing
