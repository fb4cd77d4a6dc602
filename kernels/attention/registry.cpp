#include "kernels/attention/registry.h"

#include <stdexcept>

namespace inferlab {

const std::vector<AttentionVersion>& attention_versions() {
  static const std::vector<AttentionVersion> versions = {
      {"cpu/naive", Backend::cpu, Precision::fp32, 1, "three loops per head, L×L scores in memory, fp32",
       attention_cpu_naive},
  };
  return versions;
}

const AttentionVersion& find_attention_version(std::string_view name, Backend backend) {
  std::string known;
  for (const AttentionVersion& version : attention_versions()) {
    if (version.name == name && version.backend == backend) return version;
    known += (known.empty() ? "" : ", ") + version.name + " (" + std::string(to_string(version.backend)) + ")";
  }
  throw std::invalid_argument("version = " + std::string(name) + " on backend " + std::string(to_string(backend)) +
                              ": is not registered; known: " + known);
}

}  // namespace inferlab
