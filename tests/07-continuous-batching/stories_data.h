#pragma once
// Chapter 07's committed data, for the tests built with INFERLAB_SOURCE_DIR: the stories260K
// checkpoint (models/) and the float64 reference's greedy ids from BOS (data/).
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace inferlab::testing {

/// models/stories260K.bin in the source tree.
inline std::string stories_path() { return std::string(INFERLAB_SOURCE_DIR) + "/models/stories260K.bin"; }

/// The ids of a data file: every number on lines that do not start with '#'.
inline std::vector<int32_t> read_ids(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("ids file '" + path + "': cannot be opened");
  std::vector<int32_t> ids;
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("#")) continue;
    std::istringstream words(line);
    for (int32_t id; words >> id;) ids.push_back(id);
  }
  return ids;
}

/// The 256 ids the float64 reference generates greedily from BOS on stories260K (committed).
inline std::vector<int32_t> committed_greedy_ids() {
  return read_ids(std::string(INFERLAB_SOURCE_DIR) + "/tests/07-continuous-batching/data/stories260K_greedy_bos_256.txt");
}

}  // namespace inferlab::testing
